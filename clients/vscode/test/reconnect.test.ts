/**
 * Replay across a daemon restart: the client is held away while the daemon
 * is stopped (SIGTERM), started again on the same home, and another client
 * runs a turn; then it reconnects, subscribes with `since`, and its model
 * has seen every stored event exactly once, in order.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SessiondClient } from '../src/protocol/client';
import { Sessiond } from '../src/protocol/live';
import { Methods } from '../src/protocol/methods';
import { connectSocket } from '../src/protocol/transport';
import type { Event } from '../src/protocol/types';
import { startDaemon, type Daemon } from './helpers/daemon';
import { gitRepo, liveClient } from './helpers/live';
import { Deferred, nextOf, waitFor } from './helpers/wait';

/** Every stored event, read by a fresh subscription from seq 0. */
async function storedEvents(daemon: Daemon): Promise<Event[]> {
  const client = await SessiondClient.connect(await connectSocket(daemon.socket), { clientName: 'replay reader' });
  try {
    const events: Event[] = [];
    let through = 0;
    const done = new Deferred();
    let head = Number.POSITIVE_INFINITY;
    const check = () => {
      if (Math.max(through, events.at(-1)?.seq ?? 0) >= head) done.resolve();
    };
    client.onEvents((notice) => {
      events.push(...notice.events);
      if (typeof notice.through === 'number') through = notice.through;
      check();
    });
    head = (await client.request(Methods.eventsSubscribe, { since: 0 })).head;
    check();
    await done.promise;
    return events.filter((event) => event.seq <= head);
  } finally {
    await client.close();
  }
}

describe('reconnect with replay', () => {
  let daemon: Daemon;
  let sessiond: Sessiond;
  let hold: Deferred | undefined;

  before(async () => {
    daemon = await startDaemon();
  });

  after(async () => {
    hold?.resolve();
    await sessiond?.dispose();
    await daemon?.destroy();
  });

  it('after a daemon restart the client resubscribes with since and has no gap and no duplicate', async () => {
    const repo = gitRepo(daemon.home);
    sessiond = liveClient(daemon, { reconnect: { minDelayMs: 50, maxDelayMs: 300, beforeAttempt: () => hold?.promise ?? Promise.resolve() } });
    await sessiond.whenConnected();
    const applied: number[] = [];
    sessiond.model.onEvent((event) => applied.push(event.seq));

    const { sessions } = await sessiond.request(Methods.sessionOpen, { agent: 'demo', root: repo, title: 'replay' });
    const id = sessions[0].id;
    assert.equal((await sessiond.prompt(id, 'say one')).text, 'one');

    // Mid-turn: a turn is running when the daemon is stopped.
    hold = new Deferred();
    const chunk = nextOf(sessiond.model.onEvent, (e) => e.session === id && e.kind === 'turn.chunk' && e.data?.text === 'going', 'the chunk "going"');
    const interrupted = sessiond.prompt(id, 'say going\nhang').catch((error: Error) => error);
    await chunk;
    const disconnected = nextOf(sessiond.onDidChangeState, (state) => state === 'disconnected', 'the client to see the daemon go');
    await daemon.stop();
    await disconnected;
    // A stopping daemon cancels its running turns: the prompt ends "cancelled", or fails with the connection.
    const outcome = await interrupted;
    assert.ok(outcome instanceof Error || outcome.stopReason === 'cancelled', JSON.stringify(outcome));

    // While the client is held away: the daemon comes back and another client runs a turn.
    await daemon.restart();
    const other = liveClient(daemon, {}, 'other');
    try {
      await other.whenConnected();
      assert.equal((await other.prompt(id, 'say while away')).text, 'while away');
    } finally {
      await other.dispose();
    }
    const seenBeforeReconnect = applied.length;

    hold.resolve();
    hold = undefined;
    await sessiond.whenConnected();
    const session = await waitFor(sessiond.model, () => {
      const s = sessiond.model.sessions.get(id);
      return s?.recap === 'while away' && s.status === 'idle' ? s : undefined;
    }, 'the turn run while away to reach the model by replay');
    assert.equal(session.lastStopReason, 'end_turn');
    // (The session may be read again, as stale, before the replayed events are applied: waited for.)
    await waitFor(sessiond.model, () => applied.length > seenBeforeReconnect || undefined, 'replay to bring the events of the turn run while away');

    const stored = await storedEvents(daemon);
    await waitFor(sessiond.model, () => sessiond.model.lastSeq >= stored.at(-1)!.seq, `the model to reach seq ${stored.at(-1)!.seq}`);
    const appliedUpToHead = applied.filter((seq) => seq <= stored.at(-1)!.seq);
    assert.equal(new Set(appliedUpToHead).size, appliedUpToHead.length, 'no event applied twice');
    assert.deepEqual(appliedUpToHead, [...appliedUpToHead].sort((a, b) => a - b), 'in seq order');
    assert.deepEqual(appliedUpToHead, stored.map((event) => event.seq), 'every stored event, no gap');
    const kinds = stored.filter((e) => e.session === id).map((e) => e.kind);
    assert.ok(kinds.includes('turn.ended'));
  });

  it('a client that connects later loads the current state', async () => {
    const late = liveClient(daemon, {}, 'late');
    try {
      await late.whenConnected();
      const sessions = [...late.model.sessions.values()];
      assert.equal(sessions.length, 1);
      assert.equal(sessions[0].recap, 'while away');
      assert.ok(late.model.lastSeq > 0);
    } finally {
      await late.dispose();
    }
  });
});

describe('reconnecting now, as the reconnect command asks', () => {
  it('makes an attempt at once, not at the back-off\'s next turn, and says how it went', async () => {
    const daemon = await startDaemon();
    // A back-off far longer than the test: any connection made after the drop is reconnect()'s.
    const sessiond = liveClient(daemon, { reconnect: { minDelayMs: 600_000, maxDelayMs: 600_000 } });
    try {
      await sessiond.whenConnected();
      const first = sessiond.connection;
      const disconnected = nextOf(sessiond.onDidChangeState, (state) => state === 'disconnected', 'the client to see the daemon go');
      await daemon.stop();
      await disconnected;
      // Nobody answers: the attempt's own error, and the loop stays disconnected.
      await assert.rejects(sessiond.reconnect(), /ENOENT|ECONNREFUSED/);
      assert.equal(sessiond.state, 'disconnected');
      await daemon.restart();
      const client = await sessiond.reconnect();
      assert.notEqual(client, first);
      assert.equal(sessiond.state, 'connected');
      assert.equal(sessiond.connection, client);
      assert.match(client.description, /^socket /);
      // Asked while connected: that connection is dropped and a new one made.
      const again = await sessiond.reconnect();
      assert.notEqual(again, client);
      assert.equal(sessiond.connection, again);
      assert.ok((await again.daemonStatus()).pid > 0);
    } finally {
      await sessiond.dispose();
      await daemon.destroy();
    }
  });

  it('a reconnect asked before the loop started is its first attempt; one pending when the client is disposed fails', async () => {
    const daemon = await startDaemon();
    try {
      const idle = new Sessiond({ openTransport: () => connectSocket(daemon.socket), client: { clientName: 'idle' } });
      const client = await idle.reconnect();
      assert.equal(idle.connection, client);
      await idle.dispose();
      await assert.rejects(idle.reconnect(), /stopped its connection/);
      // Disposed while its attempt hangs: the promise ends instead of hanging.
      const never = new Sessiond({ openTransport: () => new Promise(() => undefined), client: { clientName: 'hanging' } });
      const pending = never.reconnect();
      await never.dispose();
      await assert.rejects(pending, /stopped its connection/);
    } finally {
      await daemon.destroy();
    }
  });
});

