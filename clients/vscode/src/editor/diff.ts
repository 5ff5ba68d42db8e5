import * as vscode from 'vscode';
import { readBaseContent, type BaseQuery } from '../protocol/baseContent';
import type { Sessiond } from '../protocol/live';
import { BASE_SCHEME, diffTarget } from '../ui/diff';

/** The base side of a changed file: its content at the session's base, read from git. */
export class BaseContent implements vscode.TextDocumentContentProvider {
  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const query = JSON.parse(uri.query) as BaseQuery;
    try {
      return await readBaseContent(query);
    } catch (error) {
      return `sessiond: ${error instanceof Error ? error.message : String(error)}\n`;
    }
  }
}

/** Open VS Code's diff editor: the file at the session's base ↔ the file now. */
export async function openChangedFile(sessiond: Sessiond, sessionId: string, path: string): Promise<void> {
  const session = sessiond.model.sessions.get(sessionId);
  const file = session?.changes?.files?.find((candidate) => candidate.path === path);
  if (!session || !file) {
    void vscode.window.showWarningMessage(`sessiond: ${path} is no longer among the changed files of ${sessionId}`);
    return;
  }
  const target = diffTarget(session, file);
  const base = vscode.Uri.from({ scheme: BASE_SCHEME, path: `/${path}`, query: JSON.stringify(target.base) });
  const current = target.deleted
    ? vscode.Uri.from({ scheme: BASE_SCHEME, path: `/${path}`, query: JSON.stringify({ ...target.base, path: null }) })
    : vscode.Uri.file(target.current);
  await vscode.commands.executeCommand('vscode.diff', base, current, target.title);
}
