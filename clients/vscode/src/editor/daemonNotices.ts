import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { EventKinds } from '../protocol/methods';
import { daemonLostMessage, stoppedMessage, stoppedNotice } from '../ui/daemon';
import { toDisposable } from './sessionsTree';

/** How long after a reconnect the replayed `turn.ended … interrupted` events are gathered into one notice. */
const GATHER_MS = 1500;
/** The command the stop notice's link runs. */
const START_COMMAND_ID = 'sessiond.startDaemon';

/**
 * Says once what happened to the daemon, besides the status bar: stopped on purpose (offering to
 * start it), or gone without a stop and replaced, with the turns its new run found interrupted.
 */
export class DaemonNotices implements vscode.Disposable {
  private readonly subscriptions: vscode.Disposable[];
  private interrupted: string[] = [];
  private replaced = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Withdraws the notification that the daemon was stopped; set while it shows. */
  private withdrawStopped: (() => void) | undefined;

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
      this.withdrawStopped?.();
      if (connection?.replacedDeadDaemon) {
        this.replaced = true;
        this.sayLostSoon();
      }
    } else if (state === 'stopped' && !this.withdrawStopped) {
      this.sayStopped();
    }
  }

  /**
   * Once per stop, until a daemon is connected again (started here or elsewhere): a withdrawable
   * notification (a message notification cannot be withdrawn, and kept saying "stopped" with a
   * Start button beside a connected status bar).
   */
  private sayStopped(): void {
    this.output.info(stoppedMessage());
    const { title, message } = stoppedNotice(START_COMMAND_ID);
    this.withdrawStopped = showWithdrawable(title, message, () => (this.withdrawStopped = undefined));
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
      // News of what already happened, said with a daemon connected: a warning, closed by hand.
      void vscode.window.showWarningMessage(message);
    }, GATHER_MS);
  }

  dispose(): void {
    this.withdrawStopped?.();
    if (this.timer) clearTimeout(this.timer);
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}

/**
 * A notification that can be withdrawn: a progress notification, shown until the returned function
 * is called (a message notification cannot be taken back). `onWithdrawn` runs once, when it is.
 */
export function showWithdrawable(title: string, message: string | undefined, onWithdrawn?: () => void): () => void {
  // Set at once: VS Code may run the task a moment later, after it was withdrawn already.
  let withdrawn = false;
  let endTask: (() => void) | undefined;
  void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title }, (progress) =>
    new Promise<void>((resolve) => {
      if (withdrawn) return resolve();
      endTask = resolve;
      if (message) progress.report({ message });
    }),
  );
  return () => {
    if (withdrawn) return;
    withdrawn = true;
    onWithdrawn?.();
    endTask?.();
  };
}
