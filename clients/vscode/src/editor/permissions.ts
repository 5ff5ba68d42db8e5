import * as vscode from 'vscode';
import { errorSentence } from '../protocol/errors';
import type { Sessiond } from '../protocol/live';
import type { PendingPermission } from '../protocol/model';
import { answerLinks, permissionPrompt } from '../ui/permissions';
import { toDisposable } from './sessionsTree';

/**
 * Each permission request once as a notification with the agent's options as links, withdrawn
 * when the request settles (answered here or elsewhere, or its turn ended). A plain message
 * notification cannot be withdrawn, and kept live Allow/Reject buttons for requests long gone;
 * a progress notification goes away when its task resolves. Shown after a coalesced model
 * change, so a request asked and answered within one replayed batch never pops up.
 */
export class Permissions implements vscode.Disposable {
  /** Requests shown, and how to withdraw each one's notification. */
  private readonly shown = new Map<string, () => void>();
  private readonly subscription: vscode.Disposable;

  constructor(private readonly sessiond: Sessiond) {
    this.subscription = toDisposable(
      sessiond.model.onDidChange((change) => {
        if (change.permissions || change.reset) this.showNew();
      }),
    );
  }

  private showNew(): void {
    // A request waiting at connect arrives before the sessions are loaded: show it once they are,
    // so it names its session ("Add a CLI (s2)", not "s2").
    if (!this.sessiond.model.loaded) return;
    const pending = this.sessiond.model.permissions;
    for (const [id, withdraw] of this.shown) {
      if (pending.has(id)) continue;
      withdraw();
      this.shown.delete(id);
    }
    for (const permission of pending.values()) {
      if (!this.shown.has(permission.id)) this.notify(permission);
    }
  }

  /** A notification that lasts while the request waits: the question, then the options as links. */
  private notify(permission: PendingPermission): void {
    const prompt = permissionPrompt(permission, this.sessiond.model.sessions.get(permission.session));
    void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: prompt.message }, (progress) =>
      new Promise<void>((resolve) => {
        this.shown.set(permission.id, resolve);
        progress.report({ message: answerLinks(permission.id, prompt.choices) });
      }),
    );
  }

  /** From the tree or the palette: choose among the options in a quick pick. */
  async choose(permissionId?: string): Promise<void> {
    const model = this.sessiond.model;
    let permission = permissionId ? model.permissions.get(permissionId) : undefined;
    if (!permission) {
      const all = [...model.permissions.values()];
      if (!all.length) {
        void vscode.window.showInformationMessage('sessiond: no permission request is waiting');
        return;
      }
      const item = await vscode.window.showQuickPick(
        all.map((p) => ({ label: permissionPrompt(p, model.sessions.get(p.session)).message, permission: p })),
        { placeHolder: 'Which permission request?' },
      );
      permission = item?.permission;
    }
    if (!permission) return;
    const prompt = permissionPrompt(permission, model.sessions.get(permission.session));
    const choice = await vscode.window.showQuickPick(
      [...prompt.choices.map((c) => ({ label: c.title, optionId: c.optionId })), { label: 'Cancel the request', optionId: null }],
      { title: prompt.message, placeHolder: 'Your answer' },
    );
    if (choice) await this.answer(permission.id, choice.optionId);
  }

  /** Answer a request (null: cancel it); one answered already, here or elsewhere, is said to be. */
  async answer(id: string, optionId: string | null): Promise<void> {
    if (!this.sessiond.model.permissions.has(id)) {
      void vscode.window.showInformationMessage('sessiond: that permission request was already answered');
      return;
    }
    try {
      await this.sessiond.answerPermission(id, optionId);
    } catch (error) {
      void vscode.window.showErrorMessage(errorSentence(error));
    }
  }

  dispose(): void {
    this.subscription.dispose();
    for (const withdraw of this.shown.values()) withdraw();
    this.shown.clear();
  }
}
