import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { statusBar } from '../ui/status';
import { toDisposable } from './sessionsTree';

/** The status bar item; `current` is the session last opened, stepped to or picked. */
export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('sessiond.status', vscode.StatusBarAlignment.Left, 50);
  private readonly subscriptions: vscode.Disposable[] = [this.item];
  current: string | undefined;

  constructor(
    private readonly sessiond: Sessiond,
    private readonly socket: () => string,
  ) {
    this.item.name = 'sessiond';
    this.item.command = 'sessiond.pickSession';
    this.subscriptions.push(
      toDisposable(sessiond.model.onDidChange(() => this.update())),
      toDisposable(sessiond.onDidChangeState(() => this.update())),
    );
    this.update();
    this.item.show();
  }

  setCurrent(session: string | undefined): void {
    this.current = session;
    this.update();
  }

  update(): void {
    const current = this.current ? this.sessiond.model.sessions.get(this.current) : undefined;
    const sessiond = this.sessiond;
    const view = statusBar(sessiond.model, sessiond.state, current, {
      lastError: sessiond.lastError,
      disconnectedSince: sessiond.disconnectedSince,
      socket: sessiond.state === 'idle' ? this.socket() : undefined,
    });
    this.item.text = view.text;
    this.item.tooltip = new vscode.MarkdownString(view.tooltip, true);
    this.item.backgroundColor = view.warning ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}
