/**
 * What a tester found using the extension daily with ~20 busy sessions: palette commands that
 * acted on a session never named, permission notifications that outlived their request, a child
 * that needed you hidden under its parent, a stopped daemon brought back at once, internal names
 * in tooltips, queued turns unseen.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it, test } from 'node:test';
import { SessiondClient } from '../src/protocol/client';
import { Sessiond, type ConnectionState } from '../src/protocol/live';
import { Methods } from '../src/protocol/methods';
import { connectSocket, DaemonStoppedError, openTransport } from '../src/protocol/transport';
import { daemonLostMessage } from '../src/ui/daemon';
import { answerLinks } from '../src/ui/permissions';
import { sessionPickItems } from '../src/ui/quickpick';
import { children, describe as describeNode } from '../src/ui/tree';
import { cancelledMessage, cancelQuestion, closeQuestion, turnsLabel } from '../src/ui/turns';
import { SESSIOND, startDaemon, tempHome, type Daemon } from './helpers/daemon';
import { event, modelWith, session } from './helpers/fixtures';
import { destroyAll, gitRepo } from './helpers/live';
import { nextOf } from './helpers/wait';

const LONG = 60_000;

/** Resolves once `predicate` holds (polled), rejects after `timeoutMs`. */
async function until(predicate: () => boolean, what: string, timeoutMs = LONG): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`not ${what} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('a palette pick offers every open session, the current one first and marked, each with id, title and status', () => {
  const model = modelWith([session('s1', { title: 'Fix', status: 'needs_you' }), session('s2', { title: 'Runs tests' }), session('s3', { status: 'working' })]);
  const items = sessionPickItems(model, 's2');
  assert.deepEqual(items.map((item) => item.session), ['s2', 's1', 's3']);
  assert.equal(items[0].label, '$(circle-outline) Runs tests');
  assert.equal(items[0].description, 'current · s2 · demo · idle');
  assert.ok(!items[1].description.includes('current'));
});

test('cancel and close say which session and how many turns go: always from the palette, from a row when queued turns go too', () => {
  const busy = session('s8', { title: 'Worker 5', status: 'working', queuedTurns: 2 });
  const alone = session('s9', { title: 'Solo', status: 'working', queuedTurns: 0 });
  assert.equal(turnsLabel(busy), '1 running, 2 queued');
  assert.equal(cancelQuestion(busy, true), 'Cancel 3 turns of Worker 5 (s8): its running turn and 2 queued turns?');
  assert.equal(cancelQuestion(busy, false), 'Cancel 3 turns of Worker 5 (s8): its running turn and 2 queued turns?');
  assert.equal(cancelQuestion(alone, false), undefined, 'the row named it, nothing else goes: no question');
  assert.equal(cancelQuestion(alone, true), 'Cancel 1 turn of Solo (s9): its running turn?');
  assert.equal(cancelledMessage(busy, 's8', 3), 'sessiond: told 3 turns of Worker 5 (s8) to stop');
  const idle = session('s21', { title: 'Runs tests' });
  assert.match(closeQuestion(idle, true) ?? '', /^Close Runs tests \(s21\)\? /);
  assert.equal(closeQuestion(idle, false), undefined);
  assert.match(closeQuestion(busy, false) ?? '', /^Close Worker 5 \(s8\): closing it cancels its running turn and 2 queued turns\?/);
});

test('a permission notification offers the options as command links carrying the request and the option', () => {
  const links = answerLinks('p-1', [
    { title: 'Allow', optionId: 'allow_once' },
    { title: 'Reject [x]', optionId: 'reject_once' },
  ]);
  const found = [...links.matchAll(/\[([^\]]+)\]\(command:sessiond\.answerPermission\?([^)]+)\)/g)];
  assert.deepEqual(found.map((m) => m[1]), ['Allow', 'Reject x']);
  assert.deepEqual(found.map((m) => JSON.parse(decodeURIComponent(m[2])) as unknown), [['p-1', 'allow_once'], ['p-1', 'reject_once']]);
});

test('a side chat that needs you shows on its parent row (description, tooltip, bell) and the parent comes first', () => {
  const model = modelWith([
    session('s1', { title: 'First' }),
    session('s19', { title: 'Many files', status: 'working' }),
    session('s23', { title: 'Run it?', kind: 'side', parent: 's19', status: 'needs_you' }),
  ]);
  model.apply(event('permission.asked', { session: 's23', data: { permission: 'p-5', toolCall: { title: 'Run rm -rf build?' }, options: [] } }));
  const rows = children(model, { type: 'agent', agent: 'demo' });
  assert.deepEqual(rows, [{ type: 'session', session: 's19' }, { type: 'session', session: 's1' }]);
  const parent = describeNode(model, rows[0]);
  assert.equal(parent.description, 's19 · working · side chat s23 needs you');
  assert.match(parent.tooltip ?? '', /side chat Run it\? \(s23\) needs you: "Run rm -rf build\?"/);
  assert.equal(parent.icon?.id, 'bell-dot');
  assert.deepEqual(children(model, rows[0])[0], { type: 'session', session: 's23' });
});

test('tooltips say attention flags and queued turns in words', () => {
  const model = modelWith([session('s17', { status: 'working', queuedTurns: 2, attention: ['context_high', 'agent_silent'] })]);
  const row = describeNode(model, { type: 'session', session: 's17' });
  assert.equal(row.description, 'working · 1 running, 2 queued');
  assert.match(row.tooltip ?? '', /turns: 1 running, 2 queued/);
  assert.match(row.tooltip ?? '', /its context window is over 80% full/);
  assert.match(row.tooltip ?? '', /its agent has said nothing for a while/);
  assert.doesNotMatch(row.tooltip ?? '', /context_high|agent_silent|attention:/);
});

test('nothing open: no rows, so the view shows its welcome (not an agent row with "0 open")', () => {
  const model = modelWith([]);
  model.setAgents([{ name: 'demo', command: ['demo'], envKeys: [], options: {}, process: { state: 'stopped' } }]);
  assert.deepEqual(children(model), []);
});

test('the daemon lost: one sentence naming the interrupted turns', () => {
  const model = modelWith([session('s1', { title: 'Fix greet() typo' }), session('s2')]);
  assert.equal(
    daemonLostMessage(true, ['s1', 's2'], model),
    'sessiond: the daemon stopped unexpectedly (killed or crashed); the extension started a new one. 2 turns were interrupted: Fix greet() typo (s1), s2. Send again what should still run.',
  );
  assert.equal(daemonLostMessage(false, [], model), 'sessiond: the daemon was restarted.');
});

test('after a drop, no daemon is started where one was stopped (no socket); one is where it died (a socket left behind)', async () => {
  const home = tempHome();
  const socket = path.join(home, 'run', 'sessiond.sock');
  const options = { socket, sessiondPath: '/nonexistent/sessiond', startDaemon: true };
  await assert.rejects(openTransport({ ...options, start: 'afterCrash' }), DaemonStoppedError);
  // A socket file nobody listens on (the daemon was killed): refused, and a daemon is started.
  mkdirSync(path.dirname(socket), { recursive: true });
  writeFileSync(socket, '');
  await assert.rejects(openTransport({ ...options, start: 'afterCrash' }), /could not run `\/nonexistent\/sessiond stdio`/);
  // Asked by the person: started whatever the setting.
  await assert.rejects(openTransport({ ...options, startDaemon: false, start: 'now' }), /could not run/);
  await assert.rejects(openTransport({ ...options, startDaemon: false }), /sessiond\.startDaemon/);
});

function extensionLike(daemon: Daemon): Sessiond {
  const sessiond = new Sessiond({
    openTransport: (start) => openTransport({ sessiondPath: SESSIOND, socket: daemon.socket, startDaemon: true, env: daemon.env, start }),
    client: { clientName: 'vscode test', answersPermissions: true, workDoneProgress: true },
    reconnect: { minDelayMs: 50, maxDelayMs: 300 },
    coalesceMs: 10,
    refreshDelayMs: 20,
  });
  sessiond.start();
  return sessiond;
}

describe('a daemon stopped stays stopped; one that died is replaced', () => {
  it('`daemon/stop` from elsewhere: state "stopped", no daemon started, until startDaemon()', async () => {
    const daemon = await startDaemon();
    const sessiond = extensionLike(daemon);
    try {
      await sessiond.whenConnected(LONG);
      const states: ConnectionState[] = [];
      sessiond.onDidChangeState((state) => states.push(state));
      const other = await SessiondClient.connect(await connectSocket(daemon.socket), { clientName: 'the CLI' });
      await other.stopDaemon();
      await until(() => sessiond.state === 'stopped', 'stopped');
      await new Promise((resolve) => setTimeout(resolve, 1500)); // several attempts
      assert.equal(sessiond.state, 'stopped');
      assert.ok(!existsSync(daemon.socket), 'no daemon was started again');
      assert.ok(!states.includes('connected'), states.join(' → '));
      const client = await sessiond.startDaemon();
      const status = await client.daemonStatus();
      assert.notEqual(status.pid, daemon.pid());
      assert.equal(client.replacedDeadDaemon, false);
    } finally {
      await sessiond.dispose();
      await destroyAll(daemon);
    }
  });

  it('killed mid-turn: a new daemon is started, the connection says so, and the turn ends interrupted', async () => {
    const daemon = await startDaemon();
    const sessiond = extensionLike(daemon);
    try {
      await sessiond.whenConnected(LONG);
      const { sessions } = await sessiond.request(Methods.sessionOpen, { agent: 'demo', root: gitRepo(daemon.home), title: 'killed' });
      const id = sessions[0].id;
      const going = nextOf(sessiond.model.onEvent, (e) => e.session === id && e.kind === 'turn.chunk', 'a chunk', LONG);
      void sessiond.prompt(id, 'say going\nhang').catch(() => undefined);
      await going;
      const interrupted = nextOf(sessiond.model.onEvent, (e) => e.session === id && e.kind === 'turn.ended' && e.data?.outcome === 'interrupted', 'turn.ended interrupted', LONG);
      process.kill(daemon.pid(), 'SIGKILL');
      await interrupted;
      await until(() => sessiond.state === 'connected', 'connected again');
      assert.equal(sessiond.connection?.replacedDeadDaemon, true);
    } finally {
      await sessiond.dispose();
      await destroyAll(daemon);
    }
  });
});
