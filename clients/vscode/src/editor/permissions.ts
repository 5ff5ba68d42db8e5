import * as vscode from 'vscode';
import { describeError } from '../protocol/errors';
import type { Sessiond } from '../protocol/live';
import type { PendingPermission } from '../protocol/model';
import { permissionPrompt } from '../ui/permissions';
import { toDisposable } from './sessionsTree';

/**
 * Each permission request once as a notification with the agent's options.
 * Shown after a coalesced model change, so a request asked and answered
 * within one replayed batch never pops up.
 */
export class Permissions implements vscode.Disposable {
  private readonly shown = new Set<string>();
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
    for (const id of this.shown) if (!pending.has(id)) this.shown.delete(id);
    for (const permission of pending.values()) {
      if (this.shown.has(permission.id)) continue;
      this.shown.add(permission.id);
      void this.notify(permission);
    }
  }

  private async notify(permission: PendingPermission): Promise<void> {
    const prompt = permissionPrompt(permission, this.sessiond.model.sessions.get(permission.session));
    const picked = await vscode.window.showInformationMessage(prompt.message, ...prompt.choices);
    if (picked) await this.answer(permission.id, picked.optionId);
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
      { placeHolder: prompt.message },
    );
    if (choice) await this.answer(permission.id, choice.optionId);
  }

  private async answer(id: string, optionId: string | null): Promise<void> {
    if (!this.sessiond.model.permissions.has(id)) {
      void vscode.window.showInformationMessage('sessiond: that permission request was already answered');
      return;
    }
    try {
      await this.sessiond.answerPermission(id, optionId);
    } catch (error) {
      void vscode.window.showErrorMessage(describeError('permission/answer', error));
    }
  }

  dispose(): void {
    this.subscription.dispose();
  }
}
