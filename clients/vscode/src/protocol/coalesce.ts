/**
 * Coalescing: many changes in a short while become one flush.
 *
 * The daemon may send hundreds of events a second across two hundred
 * sessions; the editor should redraw a few times a second, with every key
 * that changed in between. The clock is injectable so tests need no sleeps.
 */

export interface Scheduler {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realScheduler: Scheduler = {
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    // A pending redraw must not keep a node process (a test, a script) alive.
    handle.unref?.();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * Collects keys and calls `flush` with all of them at most once per `delayMs`: `delayMs` after the
 * first of them; or, `leading`, at once when nothing was flushed for `delayMs`, else `delayMs` after
 * the last flush (a lone change goes without delay, a stream in flushes `delayMs` apart).
 */
export class Coalescer<K> {
  private pending = new Set<K>();
  private handle: unknown;
  private disposed = false;
  private lastFlush = -Infinity;

  constructor(
    private readonly delayMs: number,
    private readonly flush: (keys: Set<K>) => void,
    private readonly scheduler: Scheduler = realScheduler,
    private readonly pace: { leading?: boolean; now?: () => number } = {},
  ) {}

  add(key: K): void {
    if (this.disposed) return;
    this.pending.add(key);
    if (this.handle !== undefined) return;
    if (!this.pace.leading) {
      this.handle = this.scheduler.setTimeout(() => this.fire(), this.delayMs);
      return;
    }
    const wait = this.lastFlush + this.delayMs - this.now();
    if (wait <= 0) this.fire();
    else this.handle = this.scheduler.setTimeout(() => this.fire(), wait);
  }

  private now(): number {
    return (this.pace.now ?? Date.now)();
  }

  /** Flush now what is pending (for shutdown, and for callers that must see the state at once). */
  flushNow(): void {
    if (this.handle !== undefined) this.scheduler.clearTimeout(this.handle);
    this.fire();
  }

  get size(): number {
    return this.pending.size;
  }

  dispose(): void {
    if (this.handle !== undefined) this.scheduler.clearTimeout(this.handle);
    this.handle = undefined;
    this.pending.clear();
    this.disposed = true;
  }

  private fire(): void {
    this.handle = undefined;
    if (this.pending.size === 0) return;
    const keys = this.pending;
    this.pending = new Set();
    this.lastFlush = this.now();
    this.flush(keys);
  }
}

