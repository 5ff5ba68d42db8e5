import type { Disposable } from 'vscode-jsonrpc/node';
import type { FleetModel } from '../../src/protocol/model';

/**
 * Resolves when `predicate` holds, checked now and after every event and
 * model change; rejects after `timeoutMs` naming what was awaited.
 */
export function waitFor<T>(
  model: FleetModel,
  predicate: () => T | undefined | false | null,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const subscriptions: Disposable[] = [];
    const finish = (value?: T, error?: Error): void => {
      clearTimeout(timer);
      for (const subscription of subscriptions) subscription.dispose();
      if (error) reject(error);
      else resolve(value as T);
    };
    const check = (): void => {
      let value: T | undefined | false | null;
      try {
        value = predicate();
      } catch (error) {
        finish(undefined, error as Error);
        return;
      }
      if (value) finish(value);
    };
    const timer = setTimeout(() => finish(undefined, new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
    subscriptions.push(model.onDidChange(check), model.onEvent(check));
    check();
  });
}

/** Resolves with the first value `subscribe` delivers that satisfies `predicate`. */
export function nextOf<T>(
  subscribe: (listener: (value: T) => void) => Disposable,
  predicate: (value: T) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      subscription.dispose();
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
    }, timeoutMs);
    const subscription = subscribe((value) => {
      if (!predicate(value)) return;
      clearTimeout(timer);
      subscription.dispose();
      resolve(value);
    });
  });
}

export class Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve!: (value: T) => void;
  constructor() {
    this.promise = new Promise<T>((resolve) => (this.resolve = resolve));
  }
}
