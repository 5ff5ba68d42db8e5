import * as vscode from 'vscode';
import type { ProgressNotice } from '../protocol/client';
import type { Sessiond } from '../protocol/live';
import { progressSession, progressTitle, waitingMessage } from '../ui/permissions';
import { toDisposable } from './sessionsTree';

interface Running {
  session: string | undefined;
  /** The daemon's last message, shown again once the session stops waiting for a person. */
  message: string | undefined;
  /** What is shown now. */
  shown: string | undefined;
  report: (message?: string) => void;
  end: () => void;
}

/**
 * This window's turns in VS Code's progress UI, from the daemon's `$/progress`. While the
 * turn's session waits for a permission, it says "needs you: …" instead of "working".
 */
export class TurnProgress implements vscode.Disposable {
  private readonly running = new Map<string | number, Running>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly sessiond: Sessiond) {
    this.subscriptions = [
      toDisposable(sessiond.onProgress((notice) => this.onProgress(notice))),
      toDisposable(sessiond.model.onDidChange(() => this.showAll())),
      // A dropped connection ends no turn, but its progress will not be reported here any more.
      toDisposable(sessiond.onDidChangeState((state) => state !== 'connected' && this.endAll())),
    ];
  }

  private endAll(): void {
    for (const turn of this.running.values()) turn.end();
    this.running.clear();
  }

  private show(turn: Running): void {
    const message = (turn.session && waitingMessage(this.sessiond.model, turn.session)) ?? turn.message;
    if (message === turn.shown) return;
    turn.shown = message;
    turn.report(message);
  }

  private showAll(): void {
    for (const turn of this.running.values()) this.show(turn);
  }

  private onProgress({ token, value }: ProgressNotice): void {
    if (value.kind === 'begin') {
      void vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: progressTitle(this.sessiond.model, value.title), cancellable: value.cancellable ?? false },
        (progress, cancel) =>
          new Promise<void>((resolve) => {
            cancel.onCancellationRequested(() => this.sessiond.cancelProgress(token));
            const turn: Running = {
              session: progressSession(value.title),
              message: value.message,
              shown: undefined,
              report: (message) => progress.report({ message }),
              end: resolve,
            };
            this.running.set(token, turn);
            this.show(turn);
          }),
      );
    } else if (value.kind === 'report') {
      const turn = this.running.get(token);
      if (!turn) return;
      turn.message = value.message;
      this.show(turn);
    } else {
      this.running.get(token)?.end();
      this.running.delete(token);
    }
  }

  dispose(): void {
    this.endAll();
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}
