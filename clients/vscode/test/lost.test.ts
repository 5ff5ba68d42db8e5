/**
 * A daemon that dies mid-request: what waits on it fails with a sentence instead of waiting forever
 * (vscode-jsonrpc itself leaves a request pending when the stream ends).
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { SessiondClient } from '../src/protocol/client';
import { Methods } from '../src/protocol/methods';
import { connectSocket } from '../src/protocol/transport';
import { startDaemon, tempHome, type Daemon } from './helpers/daemon';
import { Deferred } from './helpers/wait';

describe('a daemon that dies', () => {
  let daemon: Daemon;
  const root = tempHome('sdv-lost-');
  before(async () => {
    daemon = await startDaemon();
  });
  after(async () => {
    await daemon.destroy();
    rmSync(root, { recursive: true, force: true });
  });

  it('fails the prompt in flight when the daemon is killed, rather than leaving it pending', async () => {
    const client = await SessiondClient.connect(await connectSocket(daemon.socket), { clientName: 'lost' });
    const started = new Deferred();
    client.onEvents((notice) => {
      if (notice.events.some((event) => event.kind === 'turn.started')) started.resolve();
    });
    await client.request(Methods.eventsSubscribe, { kinds: ['turn.started'] });
    const { sessions } = await client.request(Methods.sessionOpen, { agent: 'demo', root });
    const prompt = client.request(Methods.sessionPrompt, { session: sessions[0].id, prompt: 'hang' });
    await started.promise;
    process.kill(daemon.pid(), 'SIGKILL');
    await assert.rejects(prompt, /the connection to sessiond closed before it answered session\/prompt/);
    await client.whenClosed;
    await assert.rejects(client.request(Methods.daemonStatus, {}), /not connected to sessiond \(daemon\/status\)/);
  });
});
