import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { mergeDone } from '../protocol/model';
import { gateOutputText, mergeOutcome, mergeProgressMessage } from '../ui/merge';

export const MERGE_SCHEME = 'sessiond-merge';

/** The gate output of a session's last merge, as a read-only document. */
export class MergeOutput implements vscode.TextDocumentContentProvider {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  constructor(private readonly sessiond: Sessiond) {}

  uri(session: string): vscode.Uri {
    const info = this.sessiond.model.sessions.get(session);
    const name = (info?.title || session).replace(/[/\\]/g, '_');
    return vscode.Uri.from({ scheme: MERGE_SCHEME, path: `/${encodeURIComponent(session)}/gate of ${name}.log` });
  }

  async show(session: string): Promise<void> {
    const uri = this.uri(session);
    this.changed.fire(uri);
    const document = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(document, { preview: true });
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const match = /^\/([^/]+)\//.exec(uri.path);
    const session = match ? decodeURIComponent(match[1]) : '';
    const entry = this.sessiond.model.merges.get(session);
    if (!entry) return `# no merge of ${session} is known to this window`;
    return gateOutputText(entry, this.sessiond.model.sessions.get(session));
  }
}

/**
 * Follow a merge just asked for: a progress notification saying its place in the queue and its
 * step until it ends, then its outcome as a notification (a failed gate offers its output).
 */
export async function followMerge(sessiond: Sessiond, session: string, output: MergeOutput, log: vscode.LogOutputChannel): Promise<void> {
  const model = sessiond.model;
  const name = model.sessions.get(session)?.title || session;
  await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `sessiond: merging ${name}` },
    (progress) =>
      new Promise<void>((resolve) => {
        let said = '';
        const check = (): boolean => {
          const entry = model.merges.get(session);
          if (!entry) return false;
          if (mergeDone(entry)) {
            subscription.dispose();
            connection.dispose();
            resolve();
            return true;
          }
          const message = mergeProgressMessage(entry);
          if (message !== said) progress.report({ message: (said = message) });
          return false;
        };
        const subscription = model.onDidChange(() => check());
        // Not connected: the outcome comes once connected again (replay); say so meanwhile.
        const connection = sessiond.onDidChangeState((state) => state !== 'connected' && progress.report({ message: 'not connected; waiting for the daemon' }));
        check();
      }),
  );
  const entry = model.merges.get(session);
  if (!entry) return;
  const outcome = mergeOutcome(entry, model.sessions.get(session));
  log[outcome.severity === 'error' ? 'error' : 'info'](outcome.message);
  const show = outcome.severity === 'info' ? vscode.window.showInformationMessage : outcome.severity === 'warning' ? vscode.window.showWarningMessage : vscode.window.showErrorMessage;
  const action = outcome.gateOutput ? 'Show Gate Output' : undefined;
  const answer = await show(outcome.message, ...(action ? [action] : []));
  if (answer === action) await output.show(session);
}
