/** The local model as a pure reducer of listings and events. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ModelChange } from '../src/protocol/model';
import { event, ManualScheduler, modelWith, session, task } from './helpers/fixtures';

test('events at or below the last seq are duplicates and change nothing', () => {
  const model = modelWith([session('s1')], 0);
  const working = event('session.status', { session: 's1', data: { status: 'working', since: 1_800_000_000 } });
  assert.equal(model.apply(working).applied, true);
  assert.equal(model.sessions.get('s1')?.status, 'working');
  assert.equal(model.sessions.get('s1')?.statusSince, new Date(1_800_000_000_000).toISOString());
  const idle = event('session.status', { session: 's1', data: { status: 'idle' } });
  model.apply(idle);
  assert.equal(model.apply(working).applied, false, 'a replayed event is ignored');
  assert.equal(model.sessions.get('s1')?.status, 'idle');
  assert.equal(model.lastSeq, idle.seq);
});

test('a listing at head H ignores events up to H', () => {
  const old = event('session.status', { session: 's1', data: { status: 'working' } });
  const model = modelWith([session('s1', { status: 'idle' })], old.seq);
  assert.equal(model.apply(old).applied, false);
  assert.equal(model.sessions.get('s1')?.status, 'idle');
});

test('session.opened adds a session; session.closed closes it; turn events mark it stale', () => {
  const model = modelWith([], 0);
  model.apply(event('session.opened', { session: 's7', data: { root: '/w/x', placement: 'here', title: 'fix' } }));
  assert.equal(model.sessions.get('s7')?.title, 'fix');
  assert.equal(model.sessions.get('s7')?.root, '/w/x');
  const ended = model.apply(event('turn.ended', { session: 's7', turn: 't1', data: { stopReason: 'end_turn' } }));
  assert.deepEqual(ended.staleSessions, ['s7']);
  model.apply(event('session.closed', { session: 's7' }));
  assert.equal(model.sessions.get('s7')?.status, 'closed');
  assert.equal(model.openSessions().length, 0);
});

test('session.reopened takes the session back whole, as it is open again', () => {
  const model = modelWith([session('s7', { status: 'closed', title: 'fix' })], 0);
  const info = session('s7', { status: 'idle', title: 'fix', turns: 3, plan: { entries: [], done: 1, total: 2 } });
  model.apply(event('session.reopened', { session: 's7', data: { info } }));
  assert.equal(model.sessions.get('s7')?.status, 'idle');
  assert.equal(model.sessions.get('s7')?.turns, 3);
  assert.equal(model.sessions.get('s7')?.plan?.total, 2);
  assert.deepEqual(
    model.openSessions().map((s) => s.id),
    ['s7'],
  );
  const fresh = modelWith([], 0); // a window that never saw it open
  fresh.apply(event('session.reopened', { session: 's7', data: { info } }));
  assert.equal(fresh.sessions.get('s7')?.title, 'fix');
});

test('plan, usage, changes and attention events set the session state, in either payload shape', () => {
  const model = modelWith([session('s1')], 0);
  model.apply(
    event('session.plan', {
      session: 's1',
      data: { entries: [{ content: 'a', status: 'completed' }, { content: 'b', status: 'in_progress' }, { content: 'c' }] },
    }),
  );
  const plan = model.sessions.get('s1')?.plan;
  assert.equal(plan?.done, 1);
  assert.equal(plan?.total, 3);
  assert.equal(plan?.current, 'b');
  model.apply(event('session.plan', { session: 's1', data: { plan: { entries: [{ content: 'x' }], done: 0, total: 1 } } }));
  assert.equal(model.sessions.get('s1')?.plan?.entries?.[0].content, 'x');

  model.apply(event('session.usage', { session: 's1', data: { context: { used: 150000, size: 200000, cost: { amount: 1.75, currency: 'USD' } } } }));
  assert.equal(model.sessions.get('s1')?.context?.percent, 75);
  model.apply(event('session.usage', { session: 's1', data: { used: 50, size: 100 } }));
  assert.equal(model.sessions.get('s1')?.context?.percent, 50);

  model.apply(event('session.changes', { session: 's1', data: { files: [{ path: 'f.txt', kind: 'added', added: 1 }], added: 1, removed: 0, base: 'abc' } }));
  assert.equal(model.sessions.get('s1')?.changes?.files?.[0].path, 'f.txt');
  model.apply(event('session.attention', { session: 's1', data: { attention: ['context_high'] } }));
  assert.deepEqual(model.sessions.get('s1')?.attention, ['context_high']);
  model.apply(event('session.titled', { session: 's1', data: { title: 'fix the login bug' } }));
  assert.equal(model.sessions.get('s1')?.title, 'fix the login bug');

  const unknown = model.apply(event('session.plan', { session: 's1', data: { something: 'else' } }));
  assert.deepEqual(unknown.staleSessions, ['s1'], 'a payload it cannot read makes the session stale, to be refetched');
});

test("a status event's detail (an agent silent, a limit queued on) is kept, and goes with the next status", () => {
  const model = modelWith([session('s1', { status: 'working' })], 0);
  const detail = 'no word from the agent since 14:02:07; wait, or cancel the turn';
  model.apply(event('session.status', { session: 's1', data: { status: 'working', since: 1, detail } }));
  assert.equal(model.sessions.get('s1')?.statusDetail, detail);
  model.apply(event('session.status', { session: 's1', data: { status: 'working', since: 1 } }));
  assert.equal(model.sessions.get('s1')?.statusDetail, null);
});

test('permissions come and go with their events and with the session leaving needs_you', () => {
  const model = modelWith([session('s1', { status: 'working' })], 0);
  const added: string[] = [];
  const removed: string[] = [];
  model.onDidAddPermission((p) => added.push(p.id));
  model.onDidRemovePermission((id) => removed.push(id));
  model.apply(
    event('permission.asked', {
      session: 's1',
      turn: 't1',
      data: { permission: 'p-1', toolCall: { title: 'ok?' }, options: [{ optionId: 'allow_once', name: 'Allow', kind: 'allow_once' }] },
    }),
  );
  model.apply(event('session.status', { session: 's1', data: { status: 'needs_you' } }));
  assert.deepEqual(added, ['p-1']);
  assert.equal(model.permissionsOf('s1')[0].toolCall.title, 'ok?');
  assert.equal(model.fleet().needsYou, 1);
  model.apply(event('permission.answered', { session: 's1', data: { permission: 'p-1', optionId: 'allow_once' } }));
  assert.deepEqual(removed, ['p-1']);

  model.apply(event('permission.asked', { session: 's1', data: { permission: 'p-2', toolCall: {}, options: [] } }));
  model.apply(event('session.status', { session: 's1', data: { status: 'stopped' } }));
  assert.equal(model.permissions.size, 0, 'a session that no longer needs you has no pending request');
});

test('the request for a permission known from its event makes it answerable, and says so', () => {
  const scheduler = new ManualScheduler();
  const model = modelWith([session('s1', { status: 'needs_you' })], 0, scheduler);
  model.apply(event('permission.asked', { session: 's1', data: { permission: 'p-1', toolCall: {}, options: [] } }));
  scheduler.runAll();
  const changes: ModelChange[] = [];
  model.onDidChange((change) => changes.push(change));
  const added = model.addPermission({ id: 'p-1', session: 's1', toolCall: {}, options: [], viaRequest: true });
  assert.equal(added, false, 'the same request, not a second one');
  assert.equal(model.permissions.get('p-1')?.viaRequest, true);
  scheduler.runAll();
  assert.equal(changes.length, 1, 'listeners hear that it can now be answered by request');
  assert.equal(changes[0].permissions, true);
});

test('the fleet is counted from the sessions; the daemon adds cost and timings', () => {
  const model = modelWith([
    session('s1', { status: 'working', context: { used: 1, size: 2, cost: { amount: 0.5, currency: 'USD' } } }),
    session('s2', { status: 'working' }),
    session('s3', { status: 'needs_you', attention: ['needs_you'] }),
    session('s4', { status: 'closed' }),
    session('s5'),
  ]);
  const fleet = model.fleet();
  assert.equal(fleet.open, 4);
  assert.equal(fleet.working, 2);
  assert.equal(fleet.needsYou, 1);
  assert.equal(fleet.cost, 0.5);
  assert.deepEqual(fleet.attention, { needs_you: 1 });
  model.apply(event('fleet.summary', { data: { open: 4, cost: 2.5, serialSeconds: 30, wallSeconds: 3 } }));
  assert.equal(model.fleet().cost, 2.5);
  assert.equal(model.fleet().serialSeconds, 30);
});

test('changes are coalesced into one notice naming every session that changed', () => {
  const scheduler = new ManualScheduler();
  const model = modelWith([session('s1'), session('s2')], 0, scheduler);
  scheduler.runAll();
  const notices: ModelChange[] = [];
  model.onDidChange((change) => notices.push(change));
  for (let i = 0; i < 50; i++) {
    model.apply(event('turn.chunk', { session: i % 2 ? 's1' : 's2', data: { text: 'x' } }));
  }
  assert.equal(notices.length, 0);
  scheduler.runAll();
  assert.equal(notices.length, 1);
  assert.deepEqual([...notices[0].sessions].sort(), ['s1', 's2']);
});

test('openSessions is in creation order, s2 before s10', () => {
  const same = '2026-11-29T09:00:00.000Z';
  const model = modelWith([session('s10', { createdAt: same }), session('s2', { createdAt: same }), session('s1', { createdAt: '2026-11-29T08:00:00.000Z' })]);
  assert.deepEqual(model.openSessions().map((s) => s.id), ['s1', 's2', 's10']);
});

test('a snapshot (or a resync) replaces the sessions and carries on from its head', () => {
  const model = modelWith([session('s1', { status: 'needs_you' }), session('s2')], 0);
  model.apply(event('permission.asked', { session: 's1', data: { permission: 'p-1', toolCall: {}, options: [] } }));
  const head = event('session.status', { session: 's3' }).seq + 10;
  model.applySnapshot({ head, sessions: [session('s3', { status: 'working' })], fleet: { open: 1, cost: 3 } });
  assert.deepEqual([...model.sessions.keys()], ['s3']);
  assert.equal(model.permissions.size, 0, 'requests of sessions the snapshot does not show waiting are gone');
  assert.equal(model.lastSeq, head);
  assert.equal(model.fleet().cost, 3);
  assert.equal(model.apply(event('session.status', { seq: head, session: 's3', data: { status: 'idle' } })).applied, false);
});

test('session.opened carries a side chat\'s kind and parent; childSessions lists the open ones', () => {
  const model = modelWith([session('s1')], 0);
  model.apply(event('session.opened', { session: 's2', data: { root: '/w/project', placement: 'here', title: 'side of s1', sessionKind: 'side', parent: 's1' } }));
  model.apply(event('session.opened', { session: 's3', data: { root: '/w/project', placement: 'here' } }));
  assert.equal(model.sessions.get('s2')?.kind, 'side');
  assert.equal(model.sessions.get('s2')?.parent, 's1');
  assert.equal(model.sessions.get('s3')?.kind, 'main');
  assert.equal(model.sessions.get('s3')?.parent, null);
  assert.deepEqual(model.childSessions('s1').map((s) => s.id), ['s2']);
  model.apply(event('session.closed', { session: 's2' }));
  assert.deepEqual(model.childSessions('s1'), []);
});

test('task.changed events keep the tasks current; suggestedTasks is the inbox, newest first', () => {
  const scheduler = new ManualScheduler();
  const model = modelWith([session('s1')], 0, scheduler);
  const changes: ModelChange[] = [];
  model.onDidChange((change) => changes.push(change));
  model.setTasks([task('k-1', { fromSession: 's1' })]);
  model.apply(event('task.changed', { session: 's1', data: { task: task('k-2', { fromSession: 's1' }) } }));
  assert.deepEqual(model.suggestedTasks().map((t) => t.id), ['k-2', 'k-1']);
  model.apply(event('task.changed', { session: 's1', data: { task: task('k-2', { status: 'running', session: 's4' }) } }));
  model.apply(event('task.changed', { session: 's1', data: { task: task('k-1', { status: 'dismissed', reason: 'not now' }) } }));
  assert.deepEqual(model.suggestedTasks(), []);
  assert.equal(model.tasks.get('k-1')?.reason, 'not now');
  assert.equal(model.tasks.get('k-2')?.session, 's4');
  model.apply(event('task.changed', { data: { task: { id: 'k-3' } } }));
  assert.equal(model.tasks.has('k-3'), false, 'a task without a status is not taken');
  scheduler.runAll();
  assert.equal(changes.at(-1)?.tasks, true);
  model.forget();
  assert.equal(model.tasks.size, 0);
});
