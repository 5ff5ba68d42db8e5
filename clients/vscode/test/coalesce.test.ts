import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Coalescer, type Scheduler } from '../src/protocol/coalesce';
import { ManualScheduler } from './helpers/fixtures';

test('many adds within the delay become one flush with every key once', () => {
  const scheduler = new ManualScheduler();
  const flushes: string[][] = [];
  const coalescer = new Coalescer<string>(100, (keys) => flushes.push([...keys]), scheduler);
  for (let i = 0; i < 1000; i++) coalescer.add(`s${i % 200}`);
  assert.equal(scheduler.pending, 1, 'one timer for the whole burst');
  assert.equal(flushes.length, 0);
  scheduler.runAll();
  assert.equal(flushes.length, 1);
  assert.equal(flushes[0].length, 200);
  coalescer.add('s1');
  scheduler.runAll();
  assert.deepEqual(flushes[1], ['s1']);
});

test('flushNow delivers at once; dispose drops what is pending', () => {
  const scheduler = new ManualScheduler();
  const flushes: string[][] = [];
  const coalescer = new Coalescer<string>(100, (keys) => flushes.push([...keys]), scheduler);
  coalescer.add('a');
  coalescer.flushNow();
  assert.deepEqual(flushes, [['a']]);
  assert.equal(scheduler.pending, 0);
  coalescer.add('b');
  coalescer.dispose();
  scheduler.runAll();
  coalescer.add('c');
  assert.deepEqual(flushes, [['a']]);
});

/** A clock and timers that move only when told to. */
class Clock implements Scheduler {
  now = 1000;
  private timers: { at: number; callback: () => void }[] = [];
  setTimeout(callback: () => void, ms: number): unknown {
    const timer = { at: this.now + ms, callback };
    this.timers.push(timer);
    return timer;
  }
  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((timer) => timer !== handle);
  }
  advance(ms: number): void {
    const until = this.now + ms;
    for (;;) {
      const due = this.timers.filter((timer) => timer.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers = this.timers.filter((timer) => timer !== due);
      this.now = due.at;
      due.callback();
    }
    this.now = until;
  }
}

test('leading: a lone change is flushed at once, and a stream of changes in flushes no closer together than the delay', () => {
  const clock = new Clock();
  const handed: { at: number; keys: string[] }[] = [];
  const coalescer = new Coalescer<string>(350, (keys) => handed.push({ at: clock.now, keys: [...keys] }), clock, {
    leading: true,
    now: () => clock.now,
  });
  coalescer.add('a');
  assert.deepEqual(handed, [{ at: 1000, keys: ['a'] }], 'the first change goes at once');
  // A session reporting every 100 ms for 3 s: what VS Code would have held back until it stopped.
  for (let i = 1; i <= 30; i++) {
    clock.advance(100);
    coalescer.add(`s${i % 3}`);
    coalescer.add('agent');
  }
  const times = handed.map((hand) => hand.at);
  assert.ok(handed.length >= 8, `the stream went on in ${handed.length} hand-overs: ${times.join(', ')}`);
  for (let i = 1; i < times.length; i++) {
    assert.ok(times[i] - times[i - 1] >= 350, `hand-overs ${times[i - 1]} and ${times[i]} are closer than 350 ms`);
  }
  clock.advance(350);
  const last = handed[handed.length - 1];
  assert.ok(last.keys.includes('s0') && last.keys.includes('agent'), `the last change is handed on: ${last.keys.join(' ')}`);
  assert.equal(last.keys.filter((key) => key === 'agent').length, 1, 'each key once');
  assert.ok(last.at >= 4000 && last.at <= 4350, `the last hand-over (${last.at}) followed the last change (4000) within the gap`);
  const count = handed.length;
  clock.advance(1000);
  coalescer.add('b');
  assert.equal(handed.length, count + 1, 'after a quiet while, a change goes at once again');
  coalescer.add('c');
  coalescer.dispose();
  clock.advance(1000);
  assert.equal(handed.length, count + 1, 'dispose drops what is waiting');
});
