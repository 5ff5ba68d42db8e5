import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { composeFileName, composeHint, sessionOfComposeName } from '../ui/compose';
import { toDisposable } from './sessionsTree';

/** The context key that is true while a compose editor is the active one (keybinding, title button). */
export const COMPOSING = 'sessiond.composing';

/**
 * Compose editors: an untitled markdown document per target session, named after it ("Prompt for
 * Fix tests (s3).md"), sent with Ctrl+Enter (Cmd+Enter) or the editor's send button. The target
 * is the document's, never "the last session opened".
 */
export class Compose implements vscode.Disposable {
  /** Open compose documents (their URI) → the session they go to. */
  private readonly targets = new Map<string, string>();
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly sessiond: Sessiond) {
    this.subscriptions.push(
      // Restored compose editors are known once the sessions are.
      toDisposable(sessiond.model.onDidChange((change) => change.reset && this.updateContext())),
      vscode.window.onDidChangeActiveTextEditor(() => this.updateContext()),
      vscode.workspace.onDidCloseTextDocument((document) => {
        this.targets.delete(document.uri.toString());
        this.updateContext();
      }),
    );
  }

  /** The session a compose document goes to. */
  target(uri: vscode.Uri | undefined): string | undefined {
    if (!uri) return undefined;
    const known = this.targets.get(uri.toString());
    if (known || uri.scheme !== 'untitled') return known;
    // One VS Code restored after a reload: its name says its session.
    const session = sessionOfComposeName(uri.path.split('/').pop() ?? '');
    if (!session || !this.sessiond.model.sessions.has(session)) return undefined;
    this.targets.set(uri.toString(), session);
    return session;
  }

  /** Open (or show again) the compose editor of `session`; `text` goes in a new one (a prompt that failed to go). */
  async open(session: string, text = ''): Promise<void> {
    const known = [...this.targets].find(([, target]) => target === session)?.[0];
    const uri = known
      ? vscode.Uri.parse(known)
      : vscode.Uri.from({ scheme: 'untitled', path: `${this.folder()}/${composeFileName(this.sessiond.model.sessions.get(session), session)}` });
    this.targets.set(uri.toString(), session);
    const document = await vscode.workspace.openTextDocument(uri);
    if (document.languageId !== 'markdown') await vscode.languages.setTextDocumentLanguage(document, 'markdown');
    const editor = await vscode.window.showTextDocument(document, { preview: false });
    if (text && !document.getText().trim()) await editor.edit((edit) => edit.insert(new vscode.Position(0, 0), text));
    this.updateContext();
    vscode.window.setStatusBarMessage(composeHint(this.sessiond.model.sessions.get(session), session), 10_000);
  }

  /**
   * Take the prompt out of a compose document (the active one, or `uri`) and close it without
   * asking to save. Undefined when it is not a compose document or is empty (the person is told).
   */
  async take(uri?: vscode.Uri): Promise<{ session: string; text: string } | undefined> {
    const document = uri
      ? vscode.workspace.textDocuments.find((doc) => doc.uri.toString() === uri.toString())
      : vscode.window.activeTextEditor?.document;
    const session = this.target(document?.uri);
    if (!document || !session) {
      void vscode.window.showInformationMessage('sessiond: this editor is not a prompt; run "sessiond: Send Prompt…" to write one.');
      return undefined;
    }
    const text = document.getText();
    if (!text.trim()) {
      void vscode.window.showWarningMessage('sessiond: the prompt is empty: write it first.');
      return undefined;
    }
    await vscode.window.showTextDocument(document, { preview: false });
    this.targets.delete(document.uri.toString());
    await vscode.commands.executeCommand('workbench.action.revertAndCloseActiveEditor');
    this.updateContext();
    return { session, text };
  }

  /** Where compose documents would be saved (they are untitled; the folder only names them). */
  private folder(): string {
    return vscode.workspace.workspaceFolders?.[0]?.uri.path.replace(/\/$/, '') ?? '';
  }

  private updateContext(): void {
    const active = vscode.window.activeTextEditor?.document.uri;
    void vscode.commands.executeCommand('setContext', COMPOSING, this.target(active) !== undefined);
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    void vscode.commands.executeCommand('setContext', COMPOSING, false);
  }
}
