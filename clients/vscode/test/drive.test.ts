/**
 * Driving sessions from VS Code (issue 15): merging a worktree session back (its place in the
 * queue and its outcome, from merge.step events and merge/list), a new session with a placement,
 * prompts composed in an editor of their own, and quick picks that show a session's last prompt
 * whole. Pure functions of the model, then a merge against a real daemon with the demo agent.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it, test } from 'node:test';
import type { Sessiond } from '../src/protocol/live';
import { Methods } from '../src/protocol/methods';
import type { SessionInfo } from '../src/protocol/types';
import { composeFileName, composeHint, lastPromptOf, placementItems, sentMessage, sessionOfComposeName } from '../src/ui/compose';
import {
  failureKind,
  gateOutputText,
  mergeableSessions,
  mergeOutcome,
  mergeProgressMessage,
  mergeQueueDescription,
  mergeRowLabel,
} from '../src/ui/merge';
import { pickItem, sessionPickItems } from '../src/ui/quickpick';
import { children, describe as describeNode } from '../src/ui/tree';
import { startDaemon, EXTENSION_DIR, type Daemon } from './helpers/daemon';
import { agent, event, modelWith, session } from './helpers/fixtures';
import { gitRepo, liveClient } from './helpers/live';
import { waitFor } from './helpers/wait';

const step = (session: string, data: Record<string, unknown>) => event('merge.step', { session, data: { branch: `sessiond/${session}-1`, ...data } });

test('merge steps move a session\'s merge through the queue to its outcome, on its row and in the "Merge queue" node', () => {
  const model = modelWith([session('s1', { placement: 'worktree', title: 'port parser' }), session('s2', { placement: 'worktree' }), session('s3')]);
  assert.deepEqual(mergeableSessions(model).map((s) => s.id), ['s1', 's2']);
  assert.deepEqual(children(model).map((node) => node.type), ['agent'], 'no queue node before any merge');

  model.apply(step('s2', { step: 'queued', position: 1 }));
  model.apply(step('s2', { step: 'started', base: 'main', strategy: 'merge', gate: 'sleep 5' }));
  model.apply(step('s1', { step: 'queued', position: 1 }));
  const s1 = model.merges.get('s1')!;
  assert.equal(s1.status, 'queued');
  assert.equal(mergeProgressMessage(s1), 'queued: next in the merge queue');
  assert.equal(mergeRowLabel(s1), 'merge queued');
  model.setMerges(
    [
      { session: 's2', branch: 'sessiond/s2-1', base: 'main', strategy: 'merge', gate: 'sleep 5', status: 'running', position: 0 },
      { session: 's1', branch: 'sessiond/s1-1', base: 'main', strategy: 'rebase', status: 'queued', position: 1 },
    ],
    model.lastSeq,
  );
  assert.equal(model.merges.get('s1')?.strategy, 'rebase', 'merge/list fills in what the steps did not say');
  // The root has the queue node; it lists the one merging first.
  const roots = children(model);
  assert.deepEqual(roots.map((node) => node.type), ['merges', 'agent']);
  assert.equal(describeNode(model, roots[0]).description, '1 merging · 1 waiting');
  const rows = children(model, roots[0]).map((node) => describeNode(model, node));
  assert.deepEqual(rows.map((row) => row.label), ['s2', 'port parser']);
  assert.equal(rows[0].description, 'merging now · sessiond/s2-1 → main');
  assert.equal(rows[1].description, 's1 · next in the merge queue · sessiond/s1-1 → main');

  model.apply(step('s2', { step: 'gate-started', command: 'sleep 5' }));
  assert.equal(mergeProgressMessage(model.merges.get('s2')!), 'merging now: running the gate `sleep 5`');
  assert.equal(describeNode(model, { type: 'session', session: 's2' }).description, 'idle · merging: gate running');

  // s2's gate fails: its output is kept; the row and the notification say so.
  model.apply(step('s2', { step: 'gate-failed', command: 'sleep 5', exitCode: 3, output: 'E   assert 1 == 2\n1 failed' }));
  model.apply(step('s2', { step: 'failed', reason: 'the gate `sleep 5` failed (exit code 3) on the merged result', conflicts: [], gateOutput: 'E   assert 1 == 2\n1 failed' }));
  const failed = model.merges.get('s2')!;
  assert.equal(failed.status, 'failed');
  assert.equal(failureKind(failed), 'gate');
  assert.equal(describeNode(model, { type: 'session', session: 's2' }).description, 'idle · merge failed: gate');
  const outcome = mergeOutcome(failed, model.sessions.get('s2'));
  assert.equal(outcome.severity, 'error');
  assert.equal(outcome.gateOutput, true);
  assert.match(outcome.message, /^sessiond: merging s2 failed: the gate `sleep 5` failed \(exit code 3\) on the merged result\. main and the working copy are as they were\.$/);
  assert.match(gateOutputText(failed, undefined), /\$ sleep 5\n[^]*E {3}assert 1 == 2\n1 failed/);
  // A merge/list answer asked for before the failure does not bring it back to "running".
  model.setMerges([{ session: 's2', branch: 'sessiond/s2-1', base: 'main', strategy: 'merge', status: 'running', position: 0 }], 0);
  assert.equal(model.merges.get('s2')?.status, 'failed');

  // s1 starts, has a conflict.
  model.apply(step('s1', { step: 'started', base: 'main', strategy: 'rebase' }));
  model.apply(step('s1', { step: 'conflict', files: ['a.txt', 'b.txt'], base: 'main' }));
  model.apply(step('s1', { step: 'failed', reason: 'sessiond/s1-1 conflicts with main in a.txt, b.txt', conflicts: ['a.txt', 'b.txt'], gateOutput: null }));
  assert.equal(mergeRowLabel(model.merges.get('s1')!), 'merge conflict');
  assert.equal(mergeOutcome(model.merges.get('s1')!, model.sessions.get('s1')).gateOutput, false);
  assert.match(describeNode(model, { type: 'session', session: 's1' }).tooltip ?? '', /merge failed: sessiond\/s1-1 conflicts with main in a\.txt, b\.txt\nconflicts: a\.txt, b\.txt/);

  // Asked again: a new merge starts over, and lands.
  model.apply(step('s1', { step: 'queued', position: 1 }));
  assert.equal(model.merges.get('s1')?.status, 'queued');
  assert.deepEqual(model.merges.get('s1')?.conflicts, []);
  model.apply(step('s1', { step: 'started', base: 'main', strategy: 'merge' }));
  model.apply(step('s1', { step: 'merged', base: 'main', commit: '0123456789abcdef' }));
  const merged = model.merges.get('s1')!;
  assert.equal(mergeOutcome(merged, model.sessions.get('s1')).message, 'sessiond: merged port parser (s1) into main (0123456789).');
  assert.equal(describeNode(model, { type: 'merges' }).description, '1 merged · 1 failed'); // s1 landed, s2's gate said no
  assert.equal(describeNode(model, { type: 'merge', session: 's1' }).description, 's1 · merged 0123456 · sessiond/s1-1 → main');
  assert.equal(describeNode(model, { type: 'merge', session: 's1' }).icon?.id, 'git-merge');
});

test('merge/request\'s answer does not undo steps that came before it', () => {
  const model = modelWith([session('s1', { placement: 'worktree' })]);
  model.forgetMerge('s1');
  model.apply(step('s1', { step: 'queued', position: 3 }));
  model.upsertMerge({ session: 's1', branch: 'sessiond/s1-1', base: 'main', strategy: 'rebase', gate: 'make test', status: 'queued' });
  const entry = model.merges.get('s1')!;
  assert.equal(entry.position, 3);
  assert.equal(entry.gate, 'make test');
  assert.equal(mergeRowLabel(entry), 'merge queued (3rd)');
  assert.equal(mergeQueueDescription(model.mergeQueue()), '1 waiting');
});

test('only worktree sessions offer "Merge Session…" in their context menu; Ctrl+Enter sends a compose editor', () => {
  const model = modelWith([session('s1', { placement: 'worktree', status: 'working' }), session('s2')]);
  const manifest = JSON.parse(readFileSync(path.join(EXTENSION_DIR, 'package.json'), 'utf8')) as {
    contributes: {
      commands: { command: string; title: string }[];
      menus: Record<string, { command: string; when: string }[]>;
      keybindings: { command: string; key: string; mac: string; when: string }[];
    };
  };
  const menu = manifest.contributes.menus['view/item/context'];
  const whenOf = (command: string) => menu.filter((item) => item.command === command).map((item) => new RegExp(/viewItem =~ \/(.*)\/$/.exec(item.when)![1]));
  const worktree = describeNode(model, { type: 'session', session: 's1' }).contextValue;
  const here = describeNode(model, { type: 'session', session: 's2' }).contextValue;
  assert.equal(worktree, 'session-working-worktree');
  assert.ok(whenOf('sessiond.merge').every((re) => re.test(worktree) && !re.test(here)));
  assert.ok(whenOf('sessiond.cancel').every((re) => re.test(worktree) && !re.test(here)), 'a working worktree session can still be cancelled');
  const titles = Object.fromEntries(manifest.contributes.commands.map((command) => [command.command, command.title]));
  assert.equal(titles['sessiond.merge'], 'Merge Session…');
  assert.equal(titles['sessiond.newSession'], 'New Session…');
  const key = manifest.contributes.keybindings.find((binding) => binding.command === 'sessiond.sendComposed');
  assert.deepEqual([key?.key, key?.mac, key?.when], ['ctrl+enter', 'cmd+enter', 'editorTextFocus && sessiond.composing']);
  assert.ok(manifest.contributes.menus['editor/title'].some((item) => item.command === 'sessiond.sendComposed'));
});

test('a new session offers every placement, the agent\'s default first', () => {
  assert.deepEqual(placementItems(agent('demo')).map((item) => item.placement), ['here', 'worktree', 'sandbox', 'container', 'ssh']);
  const items = placementItems(agent('claude', { options: { defaultPlacement: 'worktree' } }));
  assert.deepEqual(items.map((item) => item.placement), ['worktree', 'here', 'sandbox', 'container', 'ssh']);
  assert.match(items[0].description, /the agent's default$/);
});

test('a compose editor names its target; the last prompt of a transcript; quick picks show a last prompt whole', () => {
  const fix = session('s3', { title: 'Fix a/b tests', status: 'working', recap: 'Done.' });
  assert.equal(composeFileName(fix, 's3'), 'Prompt for Fix a b tests (s3).md');
  assert.equal(composeFileName(undefined, 's9'), 'Prompt for s9.md');
  // A compose editor VS Code restored after a reload still knows its session, by its name.
  assert.equal(sessionOfComposeName(composeFileName(fix, 's3')), 's3');
  assert.equal(sessionOfComposeName(composeFileName(session('s5', { title: 'a (b) c' }), 's5')), 's5');
  assert.equal(sessionOfComposeName('Prompt for s9.md'), 's9');
  assert.equal(sessionOfComposeName('notes.md'), undefined);
  assert.equal(composeHint(fix, 's3', 'linux'), 'sessiond: write the prompt for Fix a/b tests (s3); Ctrl+Enter or the send button sends it');
  assert.equal(sentMessage(fix, 's3', 'say one\nsay two\n'), 'sessiond: sent a prompt of 2 lines to Fix a/b tests (s3)');
  assert.equal(
    lastPromptOf([
      { role: 'user', turn: 't1', text: 'old' },
      { role: 'agent', turn: 't1', text: 'reply' },
      { role: 'user', turn: 't2', text: 'plan A | B' },
      { role: 'user', turn: 't2', text: 'say two' },
      { role: 'agent', turn: 't2', text: 'two' },
    ]),
    'plan A | B\nsay two',
  );
  assert.equal(lastPromptOf([{ role: 'agent', text: 'hi' }]), undefined);

  const long = `Refactor the parser ${'so that every rule has its own function '.repeat(4)}\nthen run the tests`;
  const item = pickItem(fix, long);
  assert.equal(item.detail, `› ${long.split('\n')[0].trim()} ⏎ then run the tests`, 'whole, on the detail line');
  assert.ok(!item.label.includes('Refactor'), 'the label stays the session');
  assert.equal(pickItem(fix).detail, 'Done.', 'no prompt known: its last reply');
  // From turn.queued events, as another client's prompt arrives.
  const model = modelWith([fix, session('s4')]);
  model.apply(event('turn.queued', { session: 's4', turn: 't9', data: { prompt: 'say a\nsay b' } }));
  const items = sessionPickItems(model);
  assert.deepEqual(items.map((entry) => [entry.session, entry.detail]), [['s3', 'Done.'], ['s4', '› say a ⏎ say b']]);
});

describe('merging a worktree session against a real daemon', () => {
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

  async function worktreeSession(title: string, script: string): Promise<SessionInfo> {
    const { sessions } = await sessiond.request(Methods.sessionOpen, { agent: 'demo', root: repo, placement: 'worktree', title });
    await sessiond.prompt(sessions[0].id, script);
    return sessions[0];
  }

  it('a failing gate leaves the base as it was, with its output; merged once the gate passes; merge/list agrees', async () => {
    const s = await worktreeSession('notes', 'write NOTES.md from the worktree');
    const queued = await sessiond.merge({ session: s.id, gate: 'echo the gate says no; exit 3' });
    assert.equal(queued.session, s.id);
    assert.match(queued.branch, /^sessiond\//);
    const failed = await waitFor(sessiond.model, () => {
      const entry = sessiond.model.merges.get(s.id);
      return entry?.status === 'failed' ? entry : undefined;
    }, 'the merge to fail on its gate');
    assert.equal(failureKind(failed), 'gate');
    assert.match(failed.gateOutput ?? '', /the gate says no/);
    assert.match(mergeOutcome(failed, sessiond.model.sessions.get(s.id)).message, /failed \(exit code 3\)/);
    assert.throws(() => execFileSync('git', ['cat-file', '-e', 'main:NOTES.md'], { cwd: repo, stdio: 'pipe' }));

    await sessiond.merge({ session: s.id, strategy: 'rebase', gate: 'test -f NOTES.md' });
    const merged = await waitFor(sessiond.model, () => {
      const entry = sessiond.model.merges.get(s.id);
      return entry?.status === 'merged' ? entry : undefined;
    }, 'the merge to land');
    assert.equal(mergeRowLabel(merged), 'merged');
    assert.equal(execFileSync('git', ['show', 'main:NOTES.md'], { cwd: repo, encoding: 'utf8' }), 'from the worktree');
    // merge/list (refetched after the steps) says the same, and the tree's queue node shows it.
    const listed = await sessiond.request(Methods.mergeList, {});
    assert.equal(listed.entries.find((entry) => entry.session === s.id)?.status, 'merged');
    await waitFor(sessiond.model, () => describeNode(sessiond.model, { type: 'merge', session: s.id }).description?.startsWith('s'), 'the queue node');
    assert.match(describeNode(sessiond.model, { type: 'merge', session: s.id }).description ?? '', /merged [0-9a-f]{7} · sessiond\/.* → main$/);
  });

  const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' }).trim();
  /** A commit's parents. */
  const parents = (commit: string) => git('rev-list', '--parents', '-n', '1', commit).split(' ').slice(1);
  const worktrees = () => git('worktree', 'list', '--porcelain');

  async function landed(id: string): Promise<NonNullable<ReturnType<typeof sessiond.model.merges.get>>> {
    return waitFor(sessiond.model, () => {
      const entry = sessiond.model.merges.get(id);
      return entry?.status === 'merged' || entry?.status === 'failed' ? entry : undefined;
    }, `the merge of ${id} to end`);
  }

  it('strategy "merge" lands a merge commit and removes the worktree; "rebase" with keep lands a straight line and keeps them', async () => {
    const merged = await worktreeSession('with a merge commit', 'write M.md merged');
    const rebased = await worktreeSession('in a straight line', 'write R.md rebased');
    const rebasedRoot = (await sessiond.request(Methods.sessionGet, { session: rebased.id })).where?.root ?? '';
    assert.match(rebasedRoot, /sessiond-worktrees/);

    await sessiond.merge({ session: merged.id, strategy: 'merge', keep: false });
    const first = await landed(merged.id);
    assert.equal(first.status, 'merged', JSON.stringify(first));
    const mergeCommit = git('rev-parse', 'main');
    assert.equal(parents(mergeCommit).length, 2, 'a merge commit: the base and the session\'s branch');
    assert.ok(first.commit && mergeCommit.startsWith(first.commit.slice(0, 7)), `${first.commit} is main (${mergeCommit})`);
    const listed = async (id: string) => (await sessiond.request(Methods.mergeList, {})).entries.find((entry) => entry.session === id);
    assert.equal((await listed(merged.id))?.kept, false, 'merge/list: removed');
    assert.equal(git('branch', '--list', first.branch), '', 'its branch is gone');
    assert.ok(!worktrees().includes(first.branch), 'its worktree is gone');

    await sessiond.merge({ session: rebased.id, strategy: 'rebase', keep: true });
    const second = await landed(rebased.id);
    assert.equal(second.status, 'merged', JSON.stringify(second));
    const tip = git('rev-parse', 'main');
    assert.deepEqual(parents(tip), [mergeCommit], 'rebased onto the base: one parent, the base as it was');
    assert.equal(git('rev-list', '--merges', `${mergeCommit}..main`), '', 'no merge commit for a rebase');
    assert.equal(git('show', 'main:R.md'), 'rebased');
    assert.equal(git('show', 'main:M.md'), 'merged');
    assert.equal((await listed(rebased.id))?.kept, true, 'merge/list: kept as asked');
    assert.equal(git('rev-parse', second.branch), tip, 'the kept branch is the landed commit');
    assert.ok(worktrees().includes(`branch refs/heads/${second.branch}`), 'its worktree is kept');
    assert.ok(existsSync(rebasedRoot), `${rebasedRoot} is still there`);
  });

  it('with "hand a failure back", a failing gate becomes the session\'s next prompt', async () => {
    const s = await worktreeSession('handed back', 'write H.md handed back');
    const turnsBefore = sessiond.model.sessions.get(s.id)?.turns ?? 0;
    await sessiond.merge({ session: s.id, gate: 'echo the gate wants more tests; exit 4', handBack: true });
    const failed = await landed(s.id);
    assert.equal(failed.status, 'failed');
    await waitFor(sessiond.model, () => {
      const info = sessiond.model.sessions.get(s.id);
      return info && (info.turns ?? 0) > turnsBefore && info.status === 'idle' ? info : undefined;
    }, 'the handed-back turn to run');
    const page = await sessiond.request(Methods.sessionTranscript, { session: s.id, limit: 50 });
    const prompt = lastPromptOf(page.lines) ?? '';
    assert.match(prompt, /^Merging your branch sessiond\/\S+ into main was stopped by the gate `echo the gate wants more tests; exit 4`/);
    assert.match(prompt, /the gate wants more tests/);
    // Without the option nothing is sent: the failure stays with the merge entry.
    const quiet = await worktreeSession('not handed back', 'write Q.md quiet');
    await sessiond.merge({ session: quiet.id, gate: 'exit 5', handBack: false });
    assert.equal((await landed(quiet.id)).status, 'failed');
    // A handed-back prompt is queued as the merge fails, so before this one: it would be in between.
    await sessiond.prompt(quiet.id, 'say after the merge');
    const lines = (await sessiond.request(Methods.sessionTranscript, { session: quiet.id, limit: 50 })).lines;
    assert.deepEqual(lines.filter((line) => line.role === 'user').map((line) => line.text), ['write Q.md quiet', 'say after the merge']);
  });

  it('the daemon\'s refusal of a session that is not in a worktree is its own sentence', async () => {
    const { sessions } = await sessiond.request(Methods.sessionOpen, { agent: 'demo', root: repo });
    await assert.rejects(sessiond.merge({ session: sessions[0].id }), /works here, not in a worktree: there is no branch to merge/);
    await assert.rejects(
      sessiond.request(Methods.sessionOpen, { agent: 'demo', root: daemon.home + '/run', placement: 'worktree' }),
      /is not in a git repository/,
    );
  });
});
