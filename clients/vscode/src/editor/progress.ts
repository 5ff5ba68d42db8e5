import * as vscode from 'vscode';
import type { ProgressNotice } from '../protocol/client';
import type { Sessiond } from '../protocol/live';
import { toDisposable } from './sessionsTree';

/** This window's turns in VS Code's progress UI, from the daemon's `$/progress`. */
export class TurnProgress implements vscode.Disposable {
  private readonly running = new Map<string | number, { report: (message?: string) => void; end: () => void }>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly sessiond: Sessiond) {
    this.subscriptions = [
      toDisposable(sessiond.onProgress((notice) => this.onProgress(notice))),
      // A dropped connection ends no turn, but its progress will not be reported here any more.
      toDisposable(sessiond.onDidChangeState((state) => state !== 'connected' && this.endAll())),
    ];
  }

  private endAll(): void {
    for (const turn of this.running.values()) turn.end();
    this.running.clear();
  }

  private onProgress({ token, value }: ProgressNotice): void {
    if (value.kind === 'begin') {
      void vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: value.title ?? 'sessiond', cancellable: value.cancellable ?? false },
        (progress, cancel) =>
          new Promise<void>((resolve) => {
            cancel.onCancellationRequested(() => this.sessiond.cancelProgress(token));
            this.running.set(token, { report: (message) => progress.report({ message }), end: resolve });
            if (value.message) progress.report({ message: value.message });
          }),
      );
    } else if (value.kind === 'report') {
      this.running.get(token)?.report(value.message);
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
