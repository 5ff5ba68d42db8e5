/**
 * The protocol layer against a real daemon and the real demo agent: connect,
 * subscribe, turns, progress, permissions, transcripts, transports.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CancellationTokenSource } from 'vscode-jsonrpc/node';
import { readBaseContent } from '../src/protocol/baseContent';
import { SessiondClient, type ProgressNotice } from '../src/protocol/client';
import type { Sessiond } from '../src/protocol/live';
import { Methods } from '../src/protocol/methods';
import { TranscriptPool, type TranscriptFollower } from '../src/protocol/transcripts';
import { connectSocket, openTransport, spawnStdio } from '../src/protocol/transport';
import type { SessionInfo } from '../src/protocol/types';
import { SESSIOND, startDaemon, type Daemon } from './helpers/daemon';
import { gitRepo, liveClient } from './helpers/live';
import { nextOf, waitFor } from './helpers/wait';

describe('against a real daemon', () => {
  let daemon: Daemon;
  let sessiond: Sessiond;
  let repo: string;

  before(async () => {
    daemon = await startDaemon();
    repo = gitRepo(daemon.home);
    sessiond = liveClient(daemon);
    await sessiond.whenConnected();
  });

  after(async () => {
    await sessiond?.dispose();
    await daemon?.destroy();
  });

  async function open(title: string, root = repo): Promise<SessionInfo> {
    const { sessions } = await sessiond.request(Methods.sessionOpen, { agent: 'demo', root, title });
    return sessions[0];
  }

  /** The session as the model has it once its `turns` counter reached `turns` (refetched after turn.ended). */
  function afterTurns(id: string, turns: number): Promise<SessionInfo> {
    return waitFor(sessiond.model, () => {
      const session = sessiond.model.sessions.get(id);
      return session && (session.turns ?? 0) >= turns && session.status !== 'working' ? session : undefined;
    }, `session ${id} to finish turn ${turns} in the model`);
  }

  it('connects, loads the agents, and learns of new sessions from the event log', async () => {
    assert.equal(sessiond.state, 'connected');
    assert.ok(sessiond.connection?.server.methods.includes(Methods.sessionPrompt));
    assert.ok(sessiond.model.agents.has('demo'));
    const session = await open('first');
    // Not upserted by hand: session.opened reaches the model through the subscription.
    const seen = await waitFor(sessiond.model, () => sessiond.model.sessions.get(session.id), 'session.opened');
    assert.equal(seen.title, 'first');
    assert.equal(seen.root, repo);
  });

  it('a turn\'s status, reply and recap reach the model', async () => {
    const session = await open('say');
    const statuses: string[] = [];
    const listener = sessiond.model.onEvent((e) => {
      if (e.session === session.id && e.kind === 'session.status') statuses.push(String(e.data?.status));
    });
    const result = await sessiond.prompt(session.id, 'say hi');
    assert.equal(result.text, 'hi');
    assert.equal(result.stopReason, 'end_turn');
    const info = await afterTurns(session.id, 1);
    listener.dispose();
    assert.equal(info.recap, 'hi');
    assert.equal(info.status, 'idle');
    assert.ok(statuses.includes('working'), `statuses seen: ${statuses.join(', ')}`);
  });

  it('a turn\'s plan, context fill and changed files reach the model', async () => {
    const session = await open('insight');
    const script = ['plan a | b', 'progress 1 in_progress', 'usage 150000 200000 1.75', 'write f.txt hi', 'edit a.txt hello => bye', 'say done'];
    await sessiond.prompt(session.id, script.join('\n'));
    await afterTurns(session.id, 1);
    // Changes are counted from git after the turn, so they may arrive a moment after it ends.
    const info = await waitFor(sessiond.model, () => {
      const s = sessiond.model.sessions.get(session.id);
      const paths = s?.changes?.files?.map((f) => f.path).sort().join(',');
      return s?.plan?.current === 'a' && s.context?.used === 150000 && paths === 'a.txt,f.txt' ? s : undefined;
    }, 'plan entry a in progress, 150000 tokens used, a.txt and f.txt changed');
    assert.deepEqual(info.plan?.entries?.map((e) => [e.content, e.status]), [['a', 'in_progress'], ['b', 'pending']]);
    assert.equal(info.plan?.total, 2);
    assert.equal(info.plan?.done, 0);
    assert.equal(info.context?.size, 200000);
    assert.equal(Math.round(info.context?.percent ?? 0), 75);
    assert.equal(info.context?.cost?.amount, 1.75);
    const files = Object.fromEntries((info.changes?.files ?? []).map((f) => [f.path, f]));
    assert.deepEqual([files['f.txt'].kind, files['f.txt'].added, files['f.txt'].removed], ['added', 1, 0]);
    assert.deepEqual([files['a.txt'].kind, files['a.txt'].added, files['a.txt'].removed], ['modified', 1, 1]);
    assert.ok(info.changes?.base, 'changes name their base');
    // The diff's left side: a.txt as it was when the session first ran.
    assert.equal(await readBaseContent({ root: info.root, base: info.changes?.base ?? null, path: 'a.txt' }), 'hello\n');
    // The fleet summary the daemon sends adds cost and timings to the local counts.
    // (Its tally may count the turn in one summary and its cost in the next: wait for the cost.)
    await waitFor(sessiond.model, () => (sessiond.model.fleet().cost ?? 0) >= 1.75, 'a fleet.summary with the cost');
    assert.ok((sessiond.model.daemonFleet?.turns ?? 0) >= 1);
  });

  it('the base content of a changed file comes from git', async () => {
    const tree = execFileSync('git', ['rev-parse', 'HEAD^{tree}'], { cwd: repo, encoding: 'utf8' }).trim();
    assert.equal(await readBaseContent({ root: repo, base: tree, path: 'a.txt' }), 'hello\n');
    assert.equal(await readBaseContent({ root: repo, base: tree, path: null }), '');
    await assert.rejects(readBaseContent({ root: repo, base: 'snapshot', path: 'a.txt' }), /snapshot/);
  });

  it('work-done progress reports this client\'s turn: begin, report, end', async () => {
    const session = await open('progress');
    const notices: ProgressNotice[] = [];
    const listener = sessiond.onProgress((notice) => notices.push(notice));
    const ended = nextOf(sessiond.onProgress, (n) => n.value.kind === 'end', '$/progress end');
    await sessiond.prompt(session.id, 'say one\nsay two');
    const end = await ended;
    listener.dispose();
    const mine = notices.filter((n) => n.token === end.token).map((n) => n.value);
    assert.equal(mine[0].kind, 'begin');
    assert.match(mine[0].title ?? '', new RegExp(session.id));
    assert.ok(mine.some((v) => v.kind === 'report' && v.message === 'two'), JSON.stringify(mine));
    assert.equal(end.value.message, 'end_turn');
  });

  it('cancelling a prompt\'s token cancels its turn, which ends "cancelled"', async () => {
    const session = await open('hang');
    const source = new CancellationTokenSource();
    const started = nextOf(sessiond.model.onEvent, (e) => e.session === session.id && e.kind === 'turn.chunk', 'the first chunk');
    const turn = sessiond.prompt(session.id, 'say start\nhang', source.token);
    await started;
    source.cancel();
    const result = await turn;
    assert.equal(result.stopReason, 'cancelled');
    assert.equal(result.text, 'start');
    const info = await afterTurns(session.id, 1);
    assert.equal(info.status, 'stopped');
  });

  it('a permission round trip: permission.asked → needs you → permission/answer → the turn goes on', async () => {
    const session = await open('ask');
    const turn = sessiond.prompt(session.id, 'ask ok?');
    const [pending] = await waitFor(sessiond.model, () => {
      const waiting = sessiond.model.permissionsOf(session.id);
      return waiting.length && sessiond.model.sessions.get(session.id)?.status === 'needs_you' ? waiting : undefined;
    }, 'a pending permission and status needs_you');
    assert.equal(pending.toolCall.title, 'ok?');
    assert.deepEqual(pending.options.map((o) => o.optionId), ['allow_once', 'reject_once']);
    assert.equal(sessiond.model.fleet().needsYou, 1);
    await sessiond.answerPermission(pending.id, 'allow_once');
    const result = await turn;
    assert.equal(result.text, 'Asked "ok?": Allow');
    await waitFor(sessiond.model, () => sessiond.model.sessions.get(session.id)?.status === 'idle', 'status idle');
    assert.equal(sessiond.model.permissions.size, 0);
  });

  it('session/requestPermission reaches clients that answer permissions; the first answer wins', async () => {
    const first = liveClient(daemon, { client: { clientName: 'first', answersPermissions: true } }, 'first');
    const second = liveClient(daemon, { client: { clientName: 'second', answersPermissions: true } }, 'second');
    try {
      await Promise.all([first.whenConnected(), second.whenConnected()]);
      const session = await open('ask twice');
      const turn = sessiond.prompt(session.id, 'ask deploy?');
      const [asked] = await waitFor(sessiond.model, () => {
        const waiting = sessiond.model.permissionsOf(session.id);
        return waiting.length ? waiting : undefined;
      }, 'permission.asked');
      const viaRequest = (s: Sessiond) => s.model.permissions.get(asked.id)?.viaRequest;
      await Promise.all(
        [first, second].map((client) => waitFor(client.model, () => viaRequest(client), `session/requestPermission at ${client === first ? 'the first' : 'the second'} client`)),
      );
      await first.answerPermission(asked.id, 'reject_once');
      const result = await turn;
      assert.equal(result.text, 'Asked "deploy?": Reject');
      // The second client was told (by $/cancelRequest or permission.answered): nothing waits there.
      await waitFor(second.model, () => !second.model.permissions.has(asked.id), 'the second client to drop the answered request');
    } finally {
      await first.dispose();
      await second.dispose();
    }
  });

  it('a permission request still waiting after a reconnect is answered all the same', async () => {
    const answerer = liveClient(daemon, { client: { clientName: 'answerer', answersPermissions: true } }, 'answerer');
    try {
      await answerer.whenConnected();
      const session = await open('ask across reconnect');
      const turn = sessiond.prompt(session.id, 'ask still there?');
      const [pending] = await waitFor(answerer.model, () => {
        const waiting = answerer.model.permissionsOf(session.id);
        return waiting.length ? waiting : undefined;
      }, 'the request at the answering client');
      const dropped = nextOf(answerer.onDidChangeState, (state) => state === 'disconnected', 'the answering client to drop');
      const before = answerer.connection;
      const reconnected = answerer.reconnect();
      await dropped;
      assert.notEqual(await reconnected, before, 'reconnect() resolves with the new connection');
      assert.equal(answerer.state, 'connected');
      await waitFor(answerer.model, () => answerer.model.permissions.has(pending.id), 'the request to be known again after the reconnect');
      await answerer.answerPermission(pending.id, 'allow_once');
      assert.equal((await turn).text, 'Asked "still there?": Allow');
    } finally {
      await answerer.dispose();
    }
  });

  it('transcripts follow their session live; the last eight opened stay live', async () => {
    const session = await open('transcript');
    await sessiond.prompt(session.id, 'say before');
    const pool = new TranscriptPool(sessiond);
    try {
      const follower = await pool.open(session.id);
      const grew = (text: string) =>
        new Promise<TranscriptFollower>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`the transcript never showed ${text}: ${JSON.stringify(follower.lines)}`)), 20_000);
          const check = () => {
            if (follower.lines.some((line) => line.text.includes(text))) {
              clearTimeout(timer);
              listener.dispose();
              resolve(follower);
            }
          };
          const listener = follower.onDidChange(check);
          check();
        });
      const live = grew('live line');
      await sessiond.prompt(session.id, 'say live line');
      await live;
      const others = await Promise.all(Array.from({ length: 8 }, (_, i) => open(`other ${i}`)));
      for (const other of others) await pool.open(other.id);
      assert.equal(pool.liveSessions().length, 8);
      assert.ok(!pool.get(session.id), 'the ninth opened let the first go');
      assert.equal(follower.unavailable, undefined, 'session/transcript answered');
      assert.ok(follower.lines.some((line) => line.role === 'user' && line.text === 'say before'), JSON.stringify(follower.lines));
      assert.ok(follower.lines.some((line) => line.role === 'agent' && line.text === 'before'));
    } finally {
      pool.dispose();
    }
  });

  it('`sessiond stdio` relays to the daemon', async () => {
    const transport = await spawnStdio({ sessiondPath: SESSIOND, socket: daemon.socket, env: daemon.env });
    const client = await SessiondClient.connect(transport, { clientName: 'stdio test' });
    try {
      const status = await client.request(Methods.daemonStatus, {});
      assert.equal(status.socket, daemon.socket);
      assert.equal(client.server.name, 'sessiond');
    } finally {
      await client.close();
    }
  });

  it('openTransport says what to do when no daemon answers and it may not start one', async () => {
    const nowhere = path.join(mkdtempSync('/tmp/sdv-none-'), 'sessiond.sock');
    await assert.rejects(openTransport({ socket: nowhere, startDaemon: false }), /no sessiond daemon answers at .*sessiond\.startDaemon/);
    const stale = path.join(path.dirname(nowhere), 'stale.sock');
    writeFileSync(stale, '');
    await assert.rejects(connectSocket(stale));
    rmSync(path.dirname(nowhere), { recursive: true, force: true });
  });
});
