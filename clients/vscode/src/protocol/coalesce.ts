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

/** Collects keys and calls `flush` with all of them at most once per `delayMs`. */
export class Coalescer<K> {
  private pending = new Set<K>();
  private handle: unknown;
  private disposed = false;

  constructor(
    private readonly delayMs: number,
    private readonly flush: (keys: Set<K>) => void,
    private readonly scheduler: Scheduler = realScheduler,
  ) {}

  add(key: K): void {
    if (this.disposed) return;
    this.pending.add(key);
    if (this.handle === undefined) {
      this.handle = this.scheduler.setTimeout(() => this.fire(), this.delayMs);
    }
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
    this.flush(keys);
  }
}

/**
 * Hands keys on at once when nothing was handed on for `gapMs`, else gathers them and hands them
 * on `gapMs` after the last time: a lone change goes without delay, and a stream of changes goes
 * in hand-overs never closer together than `gapMs`.
 */
export class Pacer<K> {
  private pending = new Set<K>();
  private handle: unknown;
  private last = -Infinity;
  private disposed = false;

  constructor(
    private readonly gapMs: number,
    private readonly flush: (keys: Set<K>) => void,
    private readonly scheduler: Scheduler = realScheduler,
    private readonly now: () => number = Date.now,
  ) {}

  add(keys: Iterable<K>): void {
    if (this.disposed) return;
    for (const key of keys) this.pending.add(key);
    if (this.handle !== undefined || this.pending.size === 0) return;
    const wait = this.last + this.gapMs - this.now();
    if (wait <= 0) this.fire();
    else this.handle = this.scheduler.setTimeout(() => this.fire(), wait);
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
    this.last = this.now();
    this.flush(keys);
  }
}
