import * as vscode from 'vscode';
import type { TransportOptions } from '../protocol/transport';

/** The extension's settings (contributed in package.json under `sessiond.*`). */
export function transportOptions(output: vscode.OutputChannel): TransportOptions {
  const config = vscode.workspace.getConfiguration('sessiond');
  return {
    sessiondPath: config.get<string>('path') || 'sessiond',
    socket: config.get<string>('socket') || undefined,
    startDaemon: config.get<boolean>('startDaemon', true),
    onStderr: (line) => output.appendLine(`sessiond stdio: ${line}`),
  };
}
