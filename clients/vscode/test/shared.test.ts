/**
 * Changed files in a working copy two sessions share (placement "here"), against a real daemon
 * with the demo agent: a file made while both sessions' commands ran cannot be told apart, so
 * each session lists it, shared with the other, and its row in the Sessions tree says so.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Sessiond } from '../src/protocol/live';
import { Methods } from '../src/protocol/methods';
import type { ChangedFile } from '../src/protocol/types';
import { children, describe as describeNode, type TreeNodeView } from '../src/ui/tree';
import { startDaemon, type Daemon } from './helpers/daemon';
import { gitRepo, liveClient } from './helpers/live';
import { waitFor } from './helpers/wait';

const waitForFile = (name: string) => `while [ ! -f ${name} ]; do sleep 0.02; done`;

describe('files shared by two sessions in one working copy, against a real daemon', () => {
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

  /** The session's changed files once every one of `paths` is among them. */
  function filesOnceListed(session: string, paths: string[]): Promise<ChangedFile[]> {
    return waitFor(sessiond.model, () => {
      const files = sessiond.model.sessions.get(session)?.changes?.files ?? [];
      return paths.every((path) => files.some((file) => file.path === path)) ? files : undefined;
    }, `${session}'s changes to list ${paths.join(', ')}`);
  }

  /** The rows under the session's "Changed files" node, by path. */
  function fileRows(session: string): Map<string, TreeNodeView> {
    const changes = children(sessiond.model, { type: 'session', session }).find((node) => node.type === 'changes');
    assert.ok(changes, `${session} has a "Changed files" node`);
    return new Map(children(sessiond.model, changes).map((node) => [node.type === 'file' ? node.path : '', describeNode(sessiond.model, node)]));
  }

  it('each session\'s tree shows the files both commands made as shared with the other; a file it wrote alone as its own', async () => {
    const { sessions } = await sessiond.request(Methods.sessionOpen, { agent: 'demo', root: repo, placement: 'here', count: 2 });
    const [one, two] = sessions.map((s) => s.id);
    await Promise.all([sessiond.prompt(one, 'say ready'), sessiond.prompt(two, 'say ready')]);
    // Each command waits until the other has started: both ran before either is announced.
    await Promise.all([
      sessiond.prompt(one, `shell sh -c 'touch one-up; ${waitForFile('two-up')}; echo 1 > one.txt'`),
      sessiond.prompt(two, `shell sh -c 'touch two-up; ${waitForFile('one-up')}; echo 2 > two.txt'`),
    ]);
    const made = ['one-up', 'two-up', 'one.txt', 'two.txt'];
    for (const [me, other] of [[one, two], [two, one]]) {
      const files = await filesOnceListed(me, made);
      for (const path of made) {
        const file = files.find((f) => f.path === path);
        assert.equal(file?.shared, true, `${me}: ${path} is shared: ${JSON.stringify(file)}`);
        assert.deepEqual(file?.sharedWith, [other], `${me}: ${path}`);
      }
      const rows = fileRows(me);
      const row = rows.get('one.txt');
      assert.equal(row?.description, `A · +1 −0 · shared with ${other}`);
      assert.equal(row?.tooltip, `one.txt (added)\nAlso changed while ${other}'s command ran in the same working copy: it may be theirs as well.`);
      assert.match(rows.get('one-up')?.description ?? '', new RegExp(`^A · \\+0 −0 · shared with ${other}$`));
    }

    // A file the agent wrote itself, with nothing else running, is its own: no "shared" on its row.
    await sessiond.prompt(one, 'write own.txt mine');
    await filesOnceListed(one, ['own.txt']);
    const own = fileRows(one).get('own.txt');
    assert.equal(own?.description, 'A · +1 −0');
    assert.equal(own?.tooltip, 'own.txt (added)');
    assert.ok(!fileRows(two).has('own.txt'), `${two} does not list ${one}'s own file`);
  });
});
