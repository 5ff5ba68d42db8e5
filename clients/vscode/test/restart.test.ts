/**
 * Restarting the daemon against real daemons with the demo agent: `daemon/stop`
 * through the protocol client (its answer, the cancelled turn, the connection
 * closing, the process exiting), and `Sessiond.restartDaemon`, which reconnects
 * the way the extension does (the socket, else `sessiond stdio`, which starts a
 * new daemon) and reaches a daemon with another pid.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { SessiondClient } from '../src/protocol/client';
import { DaemonRestartError, Sessiond, withTimeout, type ConnectionState } from '../src/protocol/live';
import { Methods } from '../src/protocol/methods';
import { connectSocket, openTransport, spawnStdio, type TransportOptions } from '../src/protocol/transport';
import type { TurnResult } from '../src/protocol/types';
import { restartedMessage, restartFailedMessage } from '../src/ui/daemon';
import { SESSIOND, startDaemon, type Daemon } from './helpers/daemon';
import { destroyAll, gitRepo, liveClient } from './helpers/live';
import { nextOf, waitFor } from './helpers/wait';

const LONG = 60_000;

/** A Sessiond wired as src/extension.ts wires it: `openTransport` with the extension's settings (defaults). */
function extensionLike(daemon: Daemon, settings: Partial<TransportOptions> = {}, onStderr?: (line: string) => void): Sessiond {
  const sessiond = new Sessiond({
    openTransport: (start) =>
      openTransport({ sessiondPath: SESSIOND, socket: daemon.socket, startDaemon: true, env: daemon.env, onStderr, start, ...settings }),
    client: { clientName: 'vscode test', answersPermissions: true, workDoneProgress: true },
    coalesceMs: 10,
    refreshDelayMs: 20,
  });
  sessiond.start();
  return sessiond;
}

/** Open a session and start a turn that hangs after its first chunk; resolves once it is running. */
async function hangingTurn(sessiond: Sessiond, daemon: Daemon): Promise<{ session: string; turn: Promise<TurnResult> }> {
  const { sessions } = await sessiond.request(Methods.sessionOpen, { agent: 'demo', root: gitRepo(daemon.home), title: 'hangs' });
  const session = sessions[0].id;
  const going = nextOf(sessiond.model.onEvent, (e) => e.session === session && e.kind === 'turn.chunk' && e.data?.text === 'going', 'the chunk "going"', LONG);
  const turn = sessiond.prompt(session, 'say going\nhang');
  await going;
  return { session, turn };
}

/** A fake `sessiond stdio`: reads one whole LSP-framed message from stdin, says it failed, exits 1. */
function tookTheRequestAndExited(): void {
  let got = Buffer.alloc(0);
  process.stdin.on('data', (chunk: Buffer) => {
    got = Buffer.concat([got, chunk]);
    const text = got.toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    const length = /Content-Length: (\d+)/i.exec(text)?.[1];
    if (end < 0 || length === undefined || got.length < end + 4 + Number(length)) return;
    process.stderr.write('sessiond: started a daemon but nothing accepted connections\n');
    process.exit(1);
  });
}

describe('restarting the daemon', () => {
  it('stopDaemon(): the daemon answers {pid, cancelledTurns}, cancels the running turn, closes the connection and exits', async () => {
    const daemon = await startDaemon();
    const runner = liveClient(daemon, {}, 'runner');
    let client: SessiondClient | undefined;
    try {
      await runner.whenConnected();
      const { turn } = await hangingTurn(runner, daemon);
      client = await SessiondClient.connect(await connectSocket(daemon.socket), { clientName: 'stopper' });
      assert.ok(client.server.methods.includes(Methods.daemonStop), 'the daemon lists daemon/stop');
      assert.equal((await client.daemonStatus()).pid, daemon.pid());

      const stopping = await client.stopDaemon();
      assert.deepEqual(stopping, { pid: daemon.pid(), cancelledTurns: 1 });
      const result = await withTimeout(turn, LONG, () => 'the running turn was not answered');
      assert.equal(result.stopReason, 'cancelled');
      await withTimeout(client.whenClosed, LONG, () => 'the connection did not close after daemon/stop');
      assert.equal(client.isClosed, true);
      await assert.rejects(client.daemonStatus(), /not connected/);
      assert.equal(await withTimeout(daemon.exited(), LONG, () => 'the daemon did not exit'), 0, daemon.log());
      assert.equal(existsSync(daemon.socket), false, 'the daemon removed its socket');
    } finally {
      client?.dispose();
      await runner.dispose();
      await daemon.destroy();
    }
  });

  it('restartDaemon() reconnects the way the extension does, through `sessiond stdio`, to a new daemon', async () => {
    const daemon = await startDaemon();
    const stdio: string[] = [];
    const sessiond = extensionLike(daemon, {}, (line) => stdio.push(line));
    try {
      await sessiond.whenConnected(LONG);
      assert.match(sessiond.connection!.description, /^socket /, 'first connected to the running daemon at its socket');
      const { session, turn } = await hangingTurn(sessiond, daemon);
      const states: ConnectionState[] = [];
      sessiond.onDidChangeState((state) => states.push(state));

      const restart = await sessiond.restartDaemon(LONG);

      assert.deepEqual(restart.stopped, { pid: daemon.pid(), cancelledTurns: 1 });
      assert.notEqual(restart.pid, restart.stopped.pid);
      assert.deepEqual(states, ['disconnected', 'connected'], 'one drop, one reconnect');
      assert.equal(await withTimeout(daemon.exited(), LONG, () => 'the old daemon did not exit'), 0, daemon.log());
      // Nothing answered at the socket after the stop, so the loop ran `sessiond stdio`, which started the new daemon.
      assert.match(sessiond.connection!.description, /stdio \(pid \d+\)$/, `stdio said: ${stdio.join('\n')}`);
      const status = await sessiond.request(Methods.daemonStatus, {});
      assert.equal(status.pid, restart.pid);
      assert.equal(status.socket, daemon.socket);
      // A second client at the socket reaches the same new daemon.
      const other = await SessiondClient.connect(await connectSocket(daemon.socket), { clientName: 'other' });
      try {
        assert.equal((await other.daemonStatus()).pid, restart.pid);
      } finally {
        await other.close();
      }

      // The turn ended cancelled; the model, resubscribed with replay, has the session and the outcome.
      assert.equal((await withTimeout(turn, LONG, () => 'the running turn was not answered')).stopReason, 'cancelled');
      const info = await waitFor(sessiond.model, () => {
        const s = sessiond.model.sessions.get(session);
        return s && s.status !== 'working' && s.lastStopReason === 'cancelled' ? s : undefined;
      }, `session ${session} to show its cancelled turn after the restart`, LONG);
      assert.notEqual(info.status, 'closed');
      // Requests work on the new connection.
      assert.equal((await sessiond.prompt(session, 'say again')).text, 'again');

      assert.equal(restartedMessage(restart), `sessiond: restarted the daemon (pid ${daemon.pid()} → ${restart.pid}); 1 running or queued turn was cancelled`);
    } finally {
      await sessiond.dispose();
      await destroyAll(daemon);
    }
  });

  it('restartDaemon() says which step failed: no new daemon when it may not start one', async () => {
    const daemon = await startDaemon();
    const sessiond = extensionLike(daemon, { startDaemon: false });
    try {
      await sessiond.whenConnected(LONG);
      // The step timeout is short here: nothing will ever answer, the error is what is tested.
      const error = await sessiond.restartDaemon(3_000).then(
        () => assert.fail('the restart went through without a daemon'),
        (error: unknown) => error,
      );
      assert.ok(error instanceof DaemonRestartError, String(error));
      assert.equal(error.stage, 'reconnect');
      assert.deepEqual(error.stopped, { pid: daemon.pid(), cancelledTurns: 0 });
      assert.match(error.reason, /no daemon answered within 3 s: no sessiond daemon answers at .*sessiond\.startDaemon/);
      assert.match(restartFailedMessage(error), new RegExp(`^sessiond: stopped the daemon \\(pid ${daemon.pid()}\\), but could not connect to a new one: `));
      assert.notEqual(sessiond.state, 'connected');
    } finally {
      await sessiond.dispose();
      await destroyAll(daemon);
    }
  });

  it('a `sessiond stdio` that exits before answering initialize fails the connect instead of leaving it pending', async () => {
    // What the loop meets when the new daemon lost the race for the old one's lock: `sessiond stdio`
    // took the whole request, could not reach a daemon and exited. The loop must get an error to try again.
    const dir = mkdtempSync('/tmp/sdv-fake-');
    const fake = path.join(dir, 'sessiond');
    writeFileSync(fake, `#!${process.execPath}\n${tookTheRequestAndExited.toString()}\ntookTheRequestAndExited();\n`);
    chmodSync(fake, 0o755);
    try {
      const transport = await spawnStdio({ sessiondPath: fake });
      await assert.rejects(
        withTimeout(SessiondClient.connect(transport, { clientName: 'test' }), LONG, () => 'connect was still pending'),
        /stdio \(pid \d+\) closed the connection before answering initialize/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('restartDaemon() asks nothing of the daemon when not connected', async () => {
    const sessiond = new Sessiond({
      openTransport: () => Promise.reject(new Error('nowhere to connect')),
      client: { clientName: 'never connected' },
    });
    try {
      await assert.rejects(sessiond.restartDaemon(), (error: unknown) => error instanceof DaemonRestartError && error.stage === 'notConnected');
    } finally {
      await sessiond.dispose();
    }
  });
});
