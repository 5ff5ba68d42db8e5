/**
 * The model files sessions under their parent and agent, and permissions under their session, so
 * the Sessions tree does not go through every session for every row it draws. These tests hold
 * the indexes to what going through everything gives, as the model changes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { byCreation, type FleetModel, type PendingPermission } from '../src/protocol/model';
import type { SessionInfo, SessionStatus } from '../src/protocol/types';
import { children, describe, type TreeNode } from '../src/ui/tree';
import { event, modelWith, session } from './helpers/fixtures';

const AGENTS = ['demo', 'claude', 'codex'];

/** What the model's lookups gave before they had indexes: a pass over everything. */
const scan = {
  childSessions: (model: FleetModel, id: string): SessionInfo[] =>
    [...model.sessions.values()].filter((s) => s.parent === id && s.status !== 'closed').sort(byCreation),
  permissionsOf: (model: FleetModel, id: string): PendingPermission[] =>
    [...model.permissions.values()].filter((p) => p.session === id),
  sessionsUnder: (model: FleetModel, id: string): string[] =>
    [...model.sessions.values()].filter((s) => s.parent === id).map((s) => s.id).sort(),
  agentSessions: (model: FleetModel, agent: string): string[] =>
    [...model.sessions.values()].filter((s) => s.agent === agent).map((s) => s.id).sort(),
  /** Sessions that need you, and every session above one (through closed ones too). */
  waitingOrAbove(model: FleetModel): Set<string> {
    const out = new Set<string>();
    for (const s of model.sessions.values()) {
      let at: SessionInfo | undefined = s.status === 'needs_you' ? s : undefined;
      while (at && !out.has(at.id)) {
        out.add(at.id);
        at = at.parent ? model.sessions.get(at.parent) : undefined;
      }
    }
    return out;
  },
  /** The session rows under a row, needs-you ones first. */
  sessionRows(model: FleetModel, sessions: SessionInfo[]): string[] {
    const waiting = scan.waitingOrAbove(model);
    const rank = (s: SessionInfo): number => (waiting.has(s.id) ? 0 : 1);
    return [...sessions].sort((a, b) => rank(a) - rank(b) || byCreation(a, b)).map((s) => s.id);
  },
};

/** Every lookup, for every session (and some that are not there), agrees with a scan. */
function assertMatchesScan(model: FleetModel, label: string): void {
  const ids = [...model.sessions.keys(), 'nope', ...[...model.permissions.values()].map((p) => p.session)];
  for (const id of new Set(ids)) {
    assert.deepEqual(model.childSessions(id), scan.childSessions(model, id), `${label}: childSessions(${id})`);
    assert.deepEqual(model.permissionsOf(id), scan.permissionsOf(model, id), `${label}: permissionsOf(${id})`);
    assert.deepEqual(model.sessionsUnder(id).map((s) => s.id).sort(), scan.sessionsUnder(model, id), `${label}: sessionsUnder(${id})`);
  }
  for (const agent of [...AGENTS, 'nobody']) {
    assert.deepEqual(model.agentSessions(agent).map((s) => s.id).sort(), scan.agentSessions(model, agent), `${label}: agentSessions(${agent})`);
  }
  for (const s of model.sessions.values()) {
    if (s.status === 'closed') continue;
    const rows = children(model, { type: 'session', session: s.id });
    const sessionRows = rows.filter((node) => node.type === 'session').map((node) => (node as { session: string }).session);
    assert.deepEqual(sessionRows, scan.sessionRows(model, scan.childSessions(model, s.id)), `${label}: rows under ${s.id}`);
    const permissionRows = rows.filter((node) => node.type === 'permission').map((node) => (node as { permission: string }).permission);
    assert.deepEqual(permissionRows, scan.permissionsOf(model, s.id).map((p) => p.id), `${label}: permissions under ${s.id}`);
  }
  for (const agent of AGENTS) {
    const node: TreeNode = { type: 'agent', agent };
    const top = [...model.sessions.values()].filter((s) => {
      const above = s.parent ? model.sessions.get(s.parent) : undefined;
      return s.agent === agent && s.status !== 'closed' && !(above && above.status !== 'closed' && above.id !== s.id);
    });
    assert.deepEqual(children(model, node).map((n) => (n as { session: string }).session), scan.sessionRows(model, top), `${label}: rows under ${agent}`);
    const open = [...model.sessions.values()].filter((s) => s.agent === agent && s.status !== 'closed');
    const working = open.filter((s) => s.status === 'working').length;
    assert.match(describe(model, node).description ?? '', new RegExp(`^${open.length} open${working ? ` · ${working} working` : ''}`), `${label}: ${agent} row`);
  }
}

/** 2,000 sessions over three agents: every third one started from an earlier one, every seventh waiting with a permission, some closed. */
function bigFleet(): FleetModel {
  const sessions: SessionInfo[] = [];
  for (let i = 1; i <= 2000; i++) {
    // Three or so under each of s1, s2, …, nested (s9 is under s2, under nothing); s2000 names itself.
    const parent = i === 2000 ? 's2000' : i % 3 === 0 ? `s${Math.floor(i / 9) + 1}` : null;
    const status: SessionStatus = i % 7 === 0 ? 'needs_you' : i % 11 === 0 ? 'closed' : i % 2 ? 'working' : 'idle';
    sessions.push(session(`s${i}`, { agent: AGENTS[i % 3], parent, kind: parent ? 'side' : 'main', status }));
  }
  const model = modelWith(sessions);
  for (let i = 7; i <= 2000; i += 7) {
    model.addPermission({ id: `p${i}a`, session: `s${i}`, toolCall: { title: `run ${i}` }, options: [], viaRequest: false });
  }
  // A second request of some sessions after others' first: each session keeps its own in the order they came.
  for (let i = 14; i <= 2000; i += 14) {
    model.addPermission({ id: `p${i}b`, session: `s${i}`, toolCall: { title: `again ${i}` }, options: [], viaRequest: true });
  }
  return model;
}

test('with 2,000 sessions, children, permissions and agents\' sessions are what a scan of everything gives', () => {
  const model = bigFleet();
  assert.ok(model.childSessions('s1').length > 1, 'the fleet has nesting');
  assert.deepEqual(model.permissionsOf('s14').map((p) => p.id), ['p14a', 'p14b']);
  assertMatchesScan(model, 'loaded');
});

test('the indexes follow the model: sessions opened, re-parented, closed, removed, reloaded; permissions asked and answered', () => {
  const model = bigFleet();
  const at = (label: string): void => assertMatchesScan(model, label);

  model.apply(event('session.opened', { session: 's3001', agent: 'claude', data: { parent: 's1', sessionKind: 'side' } }));
  assert.ok(model.childSessions('s1').some((s) => s.id === 's3001'));
  at('opened a side chat');

  model.upsertSession(session('s3001', { agent: 'codex', parent: 's2', kind: 'side' }));
  assert.ok(!model.childSessions('s1').some((s) => s.id === 's3001'), 'gone from under its old parent');
  assert.ok(model.childSessions('s2').some((s) => s.id === 's3001'));
  assert.ok(model.agentSessions('codex').some((s) => s.id === 's3001') && !model.agentSessions('claude').some((s) => s.id === 's3001'));
  at('re-parented and moved to another agent');

  model.upsertSession(session('s3001', { agent: 'codex', parent: null }));
  assert.deepEqual(model.sessionsUnder('s2').filter((s) => s.id === 's3001'), []);
  at('made a main session');

  model.upsertSession(session('s3001', { agent: 'codex', parent: 's5', kind: 'thread' }));
  model.apply(event('session.status', { session: 's3001', data: { status: 'needs_you' } }));
  model.apply(event('permission.asked', { session: 's3001', data: { permission: 'p-new', toolCall: { title: 'ok?' }, options: [] } }));
  assert.deepEqual(model.permissionsOf('s3001').map((p) => p.id), ['p-new']);
  at('a thread asks');

  model.apply(event('permission.answered', { session: 's3001', data: { permission: 'p-new' } }));
  assert.deepEqual(model.permissionsOf('s3001'), []);
  at('answered');

  model.apply(event('permission.asked', { session: 's14', data: { permission: 'p14c', toolCall: {}, options: [] } }));
  assert.deepEqual(model.permissionsOf('s14').map((p) => p.id), ['p14a', 'p14b', 'p14c']);
  model.removePermission('p14b');
  assert.deepEqual(model.permissionsOf('s14').map((p) => p.id), ['p14a', 'p14c']);
  model.apply(event('session.status', { session: 's14', data: { status: 'working' } }));
  assert.deepEqual(model.permissionsOf('s14'), [], 'a session that no longer needs you has no pending request');
  at('a session stopped needing you');

  model.apply(event('session.closed', { session: 's3001' }));
  assert.ok(!model.childSessions('s5').some((s) => s.id === 's3001'), 'a closed one is no child row');
  assert.ok(model.sessionsUnder('s5').some((s) => s.id === 's3001'), 'but still under its parent');
  at('closed');

  model.apply(event('session.reopened', { session: 's3001', data: { info: session('s3001', { agent: 'demo', parent: 's5', kind: 'thread' }) } }));
  assert.ok(model.childSessions('s5').some((s) => s.id === 's3001'));
  at('reopened');

  model.removeSession('s3001');
  assert.ok(!model.sessionsUnder('s5').some((s) => s.id === 's3001'));
  assert.ok(!model.agentSessions('demo').some((s) => s.id === 's3001'));
  at('removed');

  model.removeSession('s1');
  at('a parent removed: its children show under their agent');

  model.mergeSessions([session('s1', { agent: 'demo' }), session('s3002', { parent: 's1', kind: 'task', status: 'needs_you' })]);
  model.addPermission({ id: 'p3002', session: 's3002', toolCall: {}, options: [], viaRequest: true });
  at('merged a listing');

  model.replaceSessions([session('s1', { status: 'needs_you' }), session('s2', { parent: 's1' }), session('s7', { parent: 's1', status: 'needs_you' })], 99);
  assert.deepEqual(model.childSessions('s1').map((s) => s.id), ['s2', 's7']);
  assert.deepEqual(model.agentSessions('claude'), []);
  assert.deepEqual(model.permissionsOf('s3002'), [], 'a session the listing left out has no pending request');
  assert.deepEqual(model.permissionsOf('s7').map((p) => p.id), ['p7a']);
  at('replaced');

  model.forget();
  assert.deepEqual(model.childSessions('s1'), []);
  assert.deepEqual(model.permissionsOf('s7'), []);
  assert.deepEqual(model.agentSessions('demo'), []);
  at('forgotten');
});

test('a session with one waiting below it, through a closed one, comes first among its siblings', () => {
  const model = modelWith([
    session('s1'),
    session('s2'),
    session('s3', { parent: 's2', kind: 'side', status: 'closed' }),
    session('s4', { parent: 's3', kind: 'thread', status: 'needs_you' }),
  ]);
  const rows = children(model, { type: 'agent', agent: 'demo' });
  // s4's parent is closed, so it shows at the top level too; s2 has it below it (through s3).
  assert.deepEqual(rows, [{ type: 'session', session: 's2' }, { type: 'session', session: 's4' }, { type: 'session', session: 's1' }]);
  assertMatchesScan(model, 'closed in between');
});
