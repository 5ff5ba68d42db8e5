import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { composeFileName, composeHint, sessionOfComposeName } from '../ui/compose';
import { COMPOSE_SCHEME, Drafts } from './drafts';
import { toDisposable } from './sessionsTree';

/** The context key that is true while a compose editor is the active one (keybinding, title button). */
export const COMPOSING = 'sessiond.composing';

/**
 * Compose editors: a markdown draft per target session, named after it ("Prompt for Fix tests
 * (s3).md"), sent with Ctrl+Enter (Cmd+Enter) or the editor's send button. The target is the
 * document's, never "the last session opened". A draft is kept as it is typed (see Drafts), so
 * closing its editor unsent discards it without asking to save anything.
 */
export class Compose implements vscode.Disposable {
  /** Open compose documents (their URI) → the session they go to. */
  private readonly targets = new Map<string, string>();
  private readonly drafts: Drafts;
  /**
   * Compose documents being saved now, those changed again meanwhile (saved once more after), and
   * those closed meanwhile (discarded after: the save would write the draft back).
   */
  private readonly saving = new Set<string>();
  private readonly saveAgain = new Set<string>();
  private readonly discardAfterSave = new Set<string>();
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly sessiond: Sessiond,
    state: vscode.Memento,
  ) {
    this.drafts = new Drafts(state);
    this.subscriptions.push(
      this.drafts,
      vscode.workspace.registerFileSystemProvider(COMPOSE_SCHEME, this.drafts, { isCaseSensitive: true }),
      // Restored compose editors are known once the sessions are.
      toDisposable(sessiond.model.onDidChange((change) => change.reset && this.updateContext())),
      vscode.window.onDidChangeActiveTextEditor(() => this.updateContext()),
      vscode.workspace.onDidChangeTextDocument((event) => event.contentChanges.length && this.keep(event.document)),
      vscode.window.tabGroups.onDidChangeTabs((event) => this.discardClosed(event.closed)),
    );
  }

  /**
   * Save a compose document as it is typed: never dirty, its editor closes without a question.
   * (Not asked whether it is dirty: the extension host learns that after the change.)
   */
  private keep(document: vscode.TextDocument): void {
    const key = document.uri.toString();
    if (document.uri.scheme !== COMPOSE_SCHEME || document.isClosed) return;
    if (this.saving.has(key)) {
      this.saveAgain.add(key);
      return;
    }
    this.saving.add(key);
    void document.save().then(
      () => this.saved(document),
      () => this.saved(document),
    );
  }

  private saved(document: vscode.TextDocument): void {
    const key = document.uri.toString();
    this.saving.delete(key);
    const again = this.saveAgain.delete(key);
    if (this.discardAfterSave.delete(key)) this.drafts.discard(document.uri);
    else if (again) this.keep(document);
  }

  /** A compose editor closed (and no other shows its draft): the draft goes, unsent. */
  private discardClosed(closed: readonly vscode.Tab[]): void {
    if (!closed.length) return; // (a tab's unsaved mark comes and goes as a draft is typed)
    const open = new Set(openTabUris());
    for (const tab of closed) {
      const uri = tab.input instanceof vscode.TabInputText ? tab.input.uri : undefined;
      if (uri?.scheme !== COMPOSE_SCHEME || open.has(uri.toString())) continue;
      this.discardDraft(uri);
    }
    this.updateContext();
  }

  /** Throw a draft away (sent, or its editor closed), once a save under way is done. */
  private discardDraft(uri: vscode.Uri): void {
    const key = uri.toString();
    this.targets.delete(key);
    if (this.saving.has(key)) this.discardAfterSave.add(key);
    else this.drafts.discard(uri);
  }

  /** The session a compose document goes to. */
  target(uri: vscode.Uri | undefined): string | undefined {
    if (!uri) return undefined;
    const known = this.targets.get(uri.toString());
    if (known || uri.scheme !== COMPOSE_SCHEME) return known;
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
      : vscode.Uri.from({ scheme: COMPOSE_SCHEME, path: `/${composeFileName(this.sessiond.model.sessions.get(session), session)}` });
    this.targets.set(uri.toString(), session);
    const document = await vscode.workspace.openTextDocument(uri);
    if (document.languageId !== 'markdown') await vscode.languages.setTextDocumentLanguage(document, 'markdown');
    const editor = await vscode.window.showTextDocument(document, { preview: false });
    await this.showDraft(editor);
    if (text && !document.getText().trim()) await editor.edit((edit) => edit.insert(new vscode.Position(0, 0), text));
    this.updateContext();
    vscode.window.setStatusBarMessage(composeHint(this.sessiond.model.sessions.get(session), session), 10_000);
  }

  /**
   * Make a compose editor show its draft: VS Code keeps a closed document's text a while, and
   * opened it again with the draft thrown away (sent, or closed unsent). Not while it is typed in.
   */
  private async showDraft(editor: vscode.TextEditor): Promise<void> {
    const { document } = editor;
    const draft = this.drafts.text(document.uri);
    if (document.isDirty || this.saving.has(document.uri.toString()) || document.getText() === draft) return;
    const whole = new vscode.Range(document.positionAt(0), document.positionAt(document.getText().length));
    await editor.edit((edit) => edit.replace(whole, draft));
  }

  /**
   * Take the prompt out of a compose document (the active one, or `uri`), close it and discard
   * its draft. Undefined when it is not a compose document or is empty (the person is told).
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
    this.discardDraft(document.uri);
    this.updateContext();
    return { session, text };
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

/** The documents the editor tabs show (text editors only). */
function openTabUris(): string[] {
  return vscode.window.tabGroups.all.flatMap((group) =>
    group.tabs.flatMap((tab) => (tab.input instanceof vscode.TabInputText ? [tab.input.uri.toString()] : [])),
  );
}
