import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Coalescer } from '../src/protocol/coalesce';
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
