/**
 * A permission request already waiting when a client connects: the daemon sends it again right
 * after `initialize`, before `SessiondClient.connect()` has returned. The handler must already be
 * in place then (it was set after connect, and 3 of 10 connections lost the request: the daemon
 * was told "this client has no permission handler" and never asked again).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SessiondClient } from '../src/protocol/client';
import type { Sessiond } from '../src/protocol/live';
import { Methods } from '../src/protocol/methods';
import { connectSocket } from '../src/protocol/transport';
import type { PermissionRequestParams } from '../src/protocol/types';
import { startDaemon, type Daemon } from './helpers/daemon';
import { gitRepo, liveClient } from './helpers/live';
import { waitFor } from './helpers/wait';

describe('a permission request waiting before the client connects', () => {
  let daemon: Daemon;
  let asker: Sessiond;
  let repo: string;

  before(async () => {
    daemon = await startDaemon();
    repo = gitRepo(daemon.home);
    asker = liveClient(daemon, {}, 'asker');
    await asker.whenConnected();
  });

  after(async () => {
    await asker?.dispose();
    await daemon?.destroy();
  });

  it('reaches every new connection (raw clients, 10 in a row), none refused', async () => {
    const { sessions } = await asker.request(Methods.sessionOpen, { agent: 'demo', root: repo, title: 'waiting' });
    const session = sessions[0];
    const turn = asker.prompt(session.id, 'ask already waiting?\nsay after');
    const permission = await waitFor(asker.model, () => asker.model.permissionsOf(session.id)[0], 'the request to be asked');
    const allow = permission.options[0].optionId;
    const clients: SessiondClient[] = [];
    // Each connection: the handler is given to connect(); the request must reach it.
    for (let i = 0; i < 10; i += 1) {
      let got: PermissionRequestParams | undefined;
      let heard: () => void = () => undefined;
      const asked = new Promise<void>((resolve) => (heard = resolve));
      // The request arrives before connect() returns: each connection is kept (and disposed
      // below) once it has returned, whatever the race, or it outlives the test.
      const connecting = connectSocket(daemon.socket).then((transport) =>
        SessiondClient.connect(
          transport,
          { clientName: `late ${i}`, answersPermissions: true },
          {
            permissions: (params) => {
              got = params;
              heard();
              return new Promise(() => undefined); // keep it open: another client answers
            },
          },
        ),
      );
      await Promise.race([asked, new Promise((r) => setTimeout(r, 5000).unref())]);
      clients.push(await connecting);
      assert.equal(got?.permission, permission.id, `connection ${i + 1} of 10 was sent the waiting request`);
    }
    for (const client of clients) client.dispose();
    await asker.answerPermission(permission.id, allow);
    const result = await turn;
    assert.equal(result.stopReason, 'end_turn');
  });

  it('a Sessiond that connects while a request waits can answer it (viaRequest)', async () => {
    const { sessions } = await asker.request(Methods.sessionOpen, { agent: 'demo', root: repo, title: 'waiting 2' });
    const session = sessions[0];
    const turn = asker.prompt(session.id, 'ask answer me from the late client?');
    const permission = await waitFor(asker.model, () => asker.model.permissionsOf(session.id)[0], 'the request to be asked');
    for (let i = 0; i < 5; i += 1) {
      const late = liveClient(daemon, { client: { clientName: `late live ${i}`, answersPermissions: true } });
      try {
        await late.whenConnected();
        await waitFor(late.model, () => late.model.permissions.get(permission.id)?.viaRequest, `late client ${i + 1} to hold the request`, 5000);
      } finally {
        await late.dispose();
      }
    }
    const answerer = liveClient(daemon, { client: { clientName: 'late answerer', answersPermissions: true } });
    try {
      await waitFor(answerer.model, () => answerer.model.permissions.get(permission.id)?.viaRequest, 'the answerer to hold the request');
      await answerer.answerPermission(permission.id, permission.options[0].optionId);
      const result = await turn;
      assert.equal(result.stopReason, 'end_turn');
    } finally {
      await answerer.dispose();
    }
  });
});
