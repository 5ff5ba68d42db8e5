/**
 * The VS Code side: wiring only. Everything that knows the protocol lives in
 * src/protocol, everything that decides what is shown in src/ui; neither
 * imports `vscode`, and node's test runner tests both.
 */
import { existsSync } from 'node:fs';
import * as vscode from 'vscode';
import { Sessiond } from './protocol/live';
import { defaultSocketPath, openTransport } from './protocol/transport';
import { transportOptions } from './editor/config';
import { registerCommands } from './editor/commands';
import { Compose } from './editor/compose';
import { BaseContent } from './editor/diff';
import { MERGE_SCHEME, MergeOutput } from './editor/merge';
import { Permissions } from './editor/permissions';
import { TurnProgress } from './editor/progress';
import { DaemonNotices } from './editor/daemonNotices';
import { SessionsTree, toDisposable } from './editor/sessionsTree';
import { SideChatEditors } from './editor/sideChatEditors';
import { StatusBar } from './editor/statusBar';
import { Transcripts } from './editor/transcripts';
import { BASE_SCHEME } from './ui/diff';
import { TRANSCRIPT_SCHEME } from './ui/transcript';
import type { TreeNode } from './ui/tree';

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('sessiond', { log: true });
  const sessiond = new Sessiond({
    openTransport: (start) => openTransport({ ...transportOptions(output), start }),
    client: { clientName: `vscode ${vscode.version}`, answersPermissions: true, workDoneProgress: true },
  });
  const statusBar = new StatusBar(sessiond, socketPath);
  const transcripts = new Transcripts(sessiond);
  const permissions = new Permissions(sessiond);
  const tree = new SessionsTree(sessiond);
  const compose = new Compose(sessiond, context.workspaceState);
  const mergeOutput = new MergeOutput(sessiond);
  const treeView = vscode.window.createTreeView('sessiond.sessions', { treeDataProvider: tree, showCollapseAll: true });
  const reveal = (session: string): void => void tree.reveal(treeView, { type: 'session', session }, { select: true, focus: false });
  // A request that starts waiting is shown in the view: its row's parents expand (VS Code keeps a
  // row collapsed that was drawn collapsed, however its session changes). Not selected, not focused.
  // One whose session is not known yet (a side chat asks at once) is revealed once it is.
  const revealed = new Set<string>();
  const revealWaiting = (): void => {
    const pending = sessiond.model.permissions;
    for (const id of revealed) if (!pending.has(id)) revealed.delete(id);
    if (!treeView.visible) return;
    for (const permission of pending.values()) {
      if (revealed.has(permission.id)) continue;
      const node: TreeNode = { type: 'permission', session: permission.session, permission: permission.id };
      if (tree.reveal(treeView, node, { select: false, focus: false, expand: false })) revealed.add(permission.id);
    }
  };
  context.subscriptions.push(
    output,
    { dispose: () => void sessiond.dispose() },
    statusBar,
    transcripts,
    permissions,
    compose,
    tree,
    new TurnProgress(sessiond),
    new DaemonNotices(sessiond, output),
    new SideChatEditors(sessiond),
    treeView,
    vscode.workspace.registerTextDocumentContentProvider(TRANSCRIPT_SCHEME, transcripts),
    vscode.workspace.registerTextDocumentContentProvider(BASE_SCHEME, new BaseContent()),
    vscode.workspace.registerTextDocumentContentProvider(MERGE_SCHEME, mergeOutput),
    toDisposable(sessiond.onDidChangeState((state) => void vscode.commands.executeCommand('setContext', 'sessiond.connected', state === 'connected'))),
    toDisposable(
      sessiond.onDidChangeState((state) =>
        output.info(state === 'connected' ? `connected through ${sessiond.connection?.description}` : `${state}${sessiond.lastError ? `: ${sessiond.lastError}` : ''}`),
      ),
    ),
    toDisposable(sessiond.model.onDidChange((change) => (change.permissions || change.reset || change.sessions.size > 0) && revealWaiting())),
    treeView.onDidChangeVisibility((event) => event.visible && revealWaiting()),
    vscode.workspace.onDidChangeConfiguration((event) => event.affectsConfiguration('sessiond') && sessiond.started && void sessiond.reconnect().catch(() => undefined)),
    ...registerCommands({ sessiond, statusBar, transcripts, permissions, compose, mergeOutput, state: context.globalState, storage: context.globalStorageUri.fsPath, output, reveal }),
  );
  // Activated at start-up (onStartupFinished): connect at once when a daemon may answer or may be
  // started; otherwise when the view opens, a command runs, or a daemon's socket appears.
  if (shouldConnectNow()) {
    sessiond.start();
  } else {
    const start = (): void => {
      sessiond.start();
      clearInterval(watch);
      statusBar.update();
    };
    const watch = setInterval(() => shouldConnectNow() && start(), 5000);
    context.subscriptions.push(
      { dispose: () => clearInterval(watch) },
      treeView.onDidChangeVisibility((event) => event.visible && start()),
    );
    if (treeView.visible) start();
  }
}

/** The socket the settings name (else the daemon's default place). */
function socketPath(): string {
  return vscode.workspace.getConfiguration('sessiond').get<string>('socket') || defaultSocketPath();
}

/** A daemon's socket is there, or the extension may start one (sessiond.startDaemon). */
function shouldConnectNow(): boolean {
  return vscode.workspace.getConfiguration('sessiond').get<boolean>('startDaemon', true) || existsSync(socketPath());
}

export function deactivate(): void {
  // Everything is in context.subscriptions.
}
