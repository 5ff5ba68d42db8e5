import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { EventKinds } from '../protocol/methods';
import { daemonLostMessage, stoppedMessage } from '../ui/daemon';
import { toDisposable } from './sessionsTree';

/** How long after a reconnect the replayed `turn.ended … interrupted` events are gathered into one notice. */
const GATHER_MS = 1500;

/**
 * Says once what happened to the daemon, besides the status bar: stopped on purpose (offering to
 * start it), or gone without a stop and replaced, with the turns its new run found interrupted.
 */
export class DaemonNotices implements vscode.Disposable {
  private readonly subscriptions: vscode.Disposable[];
  private interrupted: string[] = [];
  private replaced = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** The stop was said since the last connection. */
  private stopSaid = false;

  constructor(
    private readonly sessiond: Sessiond,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.subscriptions = [
      toDisposable(
        sessiond.model.onEvent((event) => {
          if (event.kind !== EventKinds.turnEnded || event.data?.outcome !== 'interrupted' || !event.session) return;
          if (!this.interrupted.includes(event.session)) this.interrupted.push(event.session);
          this.sayLostSoon();
        }),
      ),
      toDisposable(sessiond.onDidChangeState(() => this.onState())),
    ];
  }

  private onState(): void {
    const { state, connection } = this.sessiond;
    if (state === 'connected') {
      this.stopSaid = false;
      if (connection?.replacedDeadDaemon) {
        this.replaced = true;
        this.sayLostSoon();
      }
    } else if (state === 'stopped' && !this.stopSaid) {
      this.stopSaid = true;
      const message = stoppedMessage();
      this.output.info(message);
      void vscode.window.showInformationMessage(message, 'Start the Daemon').then((answer) => {
        if (answer) void vscode.commands.executeCommand('sessiond.startDaemon');
      });
    }
  }

  /** One notice for a reconnect: the interrupted turns come as replayed events, a moment after. */
  private sayLostSoon(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const message = daemonLostMessage(this.replaced, this.interrupted, this.sessiond.model);
      this.interrupted = [];
      this.replaced = false;
      this.output.warn(message);
      void vscode.window.showWarningMessage(message);
    }, GATHER_MS);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}
