/**
 * Side chats and suggested tasks against a real daemon with the demo agent:
 * the model places them under their parent session, and the tree shows them there.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Sessiond } from '../src/protocol/live';
import { Methods } from '../src/protocol/methods';
import type { Event, SessionInfo, TaskInfo } from '../src/protocol/types';
import { taskPickItems } from '../src/ui/around';
import { children, describe as describeNode, parent } from '../src/ui/tree';
import { startDaemon, type Daemon } from './helpers/daemon';
import { gitRepo, liveClient } from './helpers/live';
import { waitFor } from './helpers/wait';

describe('side chats and suggested tasks against a real daemon', () => {
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

  async function open(title: string): Promise<SessionInfo> {
    const { sessions } = await sessiond.request(Methods.sessionOpen, { agent: 'demo', root: repo, title });
    await sessiond.prompt(sessions[0].id, 'say ready');
    return sessions[0];
  }

  function suggest(from: string, title: string, prompt: string): Promise<TaskInfo> {
    return sessiond.request(Methods.taskSuggest, { fromSession: from, title, prompt, why: 'seen in a test' });
  }

  it('a side chat answers, and the model and the tree place it under its parent', async () => {
    const main = await open('main');
    const result = await sessiond.side(main.id, 'say the answer is 42');
    assert.equal(result.reply?.text, 'the answer is 42');
    assert.equal(result.session.kind, 'side');
    assert.equal(result.session.parent, main.id);

    const side = await waitFor(sessiond.model, () => {
      const s = sessiond.model.sessions.get(result.session.id);
      return s?.kind === 'side' && s.parent === main.id && (s.turns ?? 0) >= 1 ? s : undefined;
    }, 'the side chat in the model with its parent and its turn');
    assert.equal(side.recap, 'the answer is 42');
    assert.deepEqual(sessiond.model.childSessions(main.id).map((s) => s.id), [side.id]);

    // Under its parent, not beside it under the agent.
    const agentNode = { type: 'agent', agent: 'demo' } as const;
    const topLevel = children(sessiond.model, agentNode).map((n) => (n.type === 'session' ? n.session : ''));
    assert.ok(topLevel.includes(main.id));
    assert.ok(!topLevel.includes(side.id), `the side chat is not a top-level session: ${topLevel.join(', ')}`);
    const mainNode = { type: 'session', session: main.id } as const;
    assert.deepEqual(children(sessiond.model, mainNode).filter((n) => n.type === 'session'), [{ type: 'session', session: side.id }]);
    assert.notEqual(describeNode(sessiond.model, mainNode).collapsible, 'none');
    assert.deepEqual(parent(sessiond.model, { type: 'session', session: side.id }), mainNode);
    assert.match(describeNode(sessiond.model, { type: 'session', session: side.id }).description ?? '', /^s\d+ · side chat · idle/);

    // The main session is untouched: still its own one turn.
    const info = await sessiond.request(Methods.sessionGet, { session: main.id });
    assert.equal(info.turns, 1);
    assert.equal(info.recap, 'ready');
  });

  it('a suggested task reaches the model, is accepted and runs (running, then done)', async () => {
    const main = await open('suggester');
    const statuses: string[] = [];
    const listener = sessiond.model.onEvent((e: Event) => {
      const task = e.kind === 'task.changed' ? (e.data?.task as TaskInfo | undefined) : undefined;
      if (task) statuses.push(`${task.id}:${task.status}`);
    });
    const suggested = await suggest(main.id, 'Say done', 'say task done');
    assert.equal(suggested.status, 'suggested');

    // Through task.changed, not by hand.
    await waitFor(sessiond.model, () => sessiond.model.tasks.get(suggested.id)?.status === 'suggested', 'the task.changed event of the suggestion');
    assert.ok(children(sessiond.model).some((n) => n.type === 'tasks'), 'a "Suggested tasks" node at the top');
    assert.ok(children(sessiond.model, { type: 'tasks' }).some((n) => n.type === 'task' && n.task === suggested.id));
    assert.equal(describeNode(sessiond.model, { type: 'task', task: suggested.id }).contextValue, 'task-suggested');
    assert.ok(taskPickItems(sessiond.model).some((item) => item.task === suggested.id));

    const accepted = await sessiond.acceptTask(suggested.id);
    assert.ok(['queued', 'running'].includes(accepted.status), accepted.status);
    const done = await waitFor(sessiond.model, () => {
      const t = sessiond.model.tasks.get(suggested.id);
      return t?.status === 'done' || t?.status === 'failed' ? t : undefined;
    }, 'the task to finish');
    listener.dispose();
    assert.equal(done.status, 'done', `task failed: ${done.reason ?? ''}`);
    const seen = statuses.filter((s) => s.startsWith(`${suggested.id}:`)).map((s) => s.split(':')[1]);
    assert.ok(seen.indexOf('running') !== -1 && seen.indexOf('running') < seen.indexOf('done'), `statuses seen: ${seen.join(', ')}`);
    assert.ok(done.session, 'the task names its session');

    // Its session is a task of the suggesting session, under it in the tree; it is out of the inbox.
    const taskSession = await waitFor(sessiond.model, () => {
      const s = sessiond.model.sessions.get(done.session!);
      return s && (s.turns ?? 0) >= 1 ? s : undefined;
    }, 'the task session in the model');
    assert.equal(taskSession.kind, 'task');
    assert.equal(taskSession.parent, main.id);
    assert.equal(taskSession.recap, 'task done');
    assert.ok(children(sessiond.model, { type: 'session', session: main.id }).some((n) => n.type === 'session' && n.session === taskSession.id));
    assert.ok(!sessiond.model.suggestedTasks().some((t) => t.id === suggested.id));
  });

  it('a suggested task is dismissed with a reason', async () => {
    const main = await open('dismisser');
    const suggested = await suggest(main.id, 'Rewrite everything', 'say no');
    await waitFor(sessiond.model, () => sessiond.model.tasks.get(suggested.id), 'the suggestion in the model');
    const dismissed = await sessiond.dismissTask(suggested.id, 'not now');
    assert.equal(dismissed.status, 'dismissed');
    assert.equal(dismissed.reason, 'not now');
    // Another client sees it too, from task/list when it connects.
    const other = liveClient(daemon, {}, 'other');
    try {
      await other.whenConnected();
      const seen = other.model.tasks.get(suggested.id);
      assert.equal(seen?.status, 'dismissed');
      assert.equal(seen?.reason, 'not now');
      assert.ok(!other.model.suggestedTasks().some((t) => t.id === suggested.id));
    } finally {
      await other.dispose();
    }
    assert.ok(!children(sessiond.model, { type: 'tasks' }).some((n) => n.type === 'task' && n.task === suggested.id));
    // Dismissing twice is refused.
    await assert.rejects(sessiond.dismissTask(suggested.id, 'again'), /dismissed/);
  });
});
