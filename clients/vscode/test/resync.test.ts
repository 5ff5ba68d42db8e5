/**
 * What the real daemon rarely does on cue, against a scripted peer over
 * in-memory streams: events that arrive before the subscribe answer, a
 * `resync` snapshot for a client that fell behind, and the older `overflow`
 * notice that asks the client to subscribe again from its last seq.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';
import { Sessiond, withTimeout } from '../src/protocol/live';
import type { EventsSubscribeParams } from '../src/protocol/types';
import { agent, event, session } from './helpers/fixtures';
import { Deferred, waitFor } from './helpers/wait';

function scriptedDaemon(): { sessiond: Sessiond; peer: MessageConnection; subscribes: EventsSubscribeParams[]; resubscribed: Deferred } {
  const toClient = new PassThrough();
  const toPeer = new PassThrough();
  const peer = createMessageConnection(new StreamMessageReader(toPeer), new StreamMessageWriter(toClient));
  const subscribes: EventsSubscribeParams[] = [];
  const resubscribed = new Deferred();
  peer.onRequest('initialize', () => ({ capabilities: {}, serverInfo: { name: 'scripted' } }));
  peer.onNotification('initialized', () => undefined);
  peer.onRequest('agent/list', () => ({ agents: [agent('demo')] }));
  peer.onRequest('events/subscribe', async (params: EventsSubscribeParams) => {
    subscribes.push(params);
    const id = `sub-${subscribes.length}`;
    if (subscribes.length === 1) {
      // An event sent before the answer: the client must hold it until it knows its subscription.
      await peer.sendNotification('events/notify', { subscription: id, events: [event('session.status', { seq: 11, session: 's1', data: { status: 'working' } })], through: 11 });
      return { subscription: id, head: 10, snapshot: { head: 10, sessions: [session('s1')], fleet: { open: 1 } } };
    }
    // Its first events before its answer, as the daemon may send them: kept, not dropped.
    await peer.sendNotification('events/notify', { subscription: id, events: [event('session.status', { seq: 41, session: 's2', data: { status: 'working' } })], through: 41 });
    resubscribed.resolve();
    return { subscription: id, head: 40 };
  });
  peer.listen();
  const sessiond = new Sessiond({
    openTransport: () => Promise.resolve({ input: toClient, output: toPeer, description: 'in memory', dispose: () => undefined }),
    client: { clientName: 'test' },
    coalesceMs: 1,
  });
  sessiond.start();
  return { sessiond, peer, subscribes, resubscribed };
}

test('events sent before the subscribe answer, resync and overflow', async () => {
  const { sessiond, peer, subscribes, resubscribed } = scriptedDaemon();
  try {
    await sessiond.whenConnected(5000);
    assert.deepEqual(subscribes[0], { snapshot: true });
    await waitFor(sessiond.model, () => sessiond.model.sessions.get('s1')?.status === 'working', 'the early event over the snapshot', 5000);
    assert.equal(sessiond.model.lastSeq, 11);

    await peer.sendNotification('events/notify', { subscription: 'sub-1', events: [], through: 15 });
    await waitFor(sessiond.model, () => sessiond.model.lastSeq === 15, '`through` to move the last seq', 5000);

    await peer.sendNotification('events/notify', {
      subscription: 'sub-1',
      events: [],
      through: 40,
      resync: { head: 40, sessions: [session('s2', { status: 'needs_you' })], fleet: { open: 1 } },
    });
    await waitFor(sessiond.model, () => sessiond.model.sessions.has('s2') && !sessiond.model.sessions.has('s1'), 'the resync snapshot', 5000);
    assert.equal(sessiond.model.lastSeq, 40);

    await peer.sendNotification('events/notify', { subscription: 'sub-other', events: [event('session.closed', { seq: 41, session: 's2' })], through: 41 });
    await peer.sendNotification('events/notify', { subscription: 'sub-1', events: [], overflow: 'more than 10000 events were waiting unread' });
    await withTimeout(resubscribed.promise, 5000, () => 'no new subscription after overflow');
    assert.deepEqual(subscribes[1], { since: 40 });
    await waitFor(sessiond.model, () => sessiond.model.sessions.get('s2')?.status === 'working', 'the event sent before the new subscription was answered', 5000);
    assert.equal(sessiond.model.lastSeq, 41);
  } finally {
    await sessiond.dispose();
    peer.dispose();
  }
});
