/** The views as pure functions of the model (the UI itself has not run inside VS Code here). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TranscriptLine } from '../src/protocol/types';
import { appendEventLines } from '../src/protocol/transcripts';
import { acceptedMessage, dismissPrompt, sideAnswerMessage, sideChatPrompt, taskPickItems } from '../src/ui/around';
import { restartedMessage, restartFailedMessage, restartWarning, stoppedMessage, stoppedNotice } from '../src/ui/daemon';
import { diffTarget } from '../src/ui/diff';
import { renamePrompt, titleProblem } from '../src/ui/format';
import { permissionPrompt } from '../src/ui/permissions';
import { pickItem, sessionPickItems, step } from '../src/ui/quickpick';
import { offlineOf, statusBar } from '../src/ui/status';
import { renderTranscript, sessionOfTranscriptPath, transcriptPath, TURN_SEPARATOR } from '../src/ui/transcript';
import { children, describe, parent, shown } from '../src/ui/tree';
import { event, modelWith, session, task } from './helpers/fixtures';

const busy = () =>
  modelWith([
    session('s1', {
      title: 'fix tests',
      status: 'working',
      plan: { entries: [{ content: 'Read', status: 'completed' }, { content: 'Fix', status: 'in_progress' }, { content: 'Test' }], done: 1, total: 3, current: 'Fix' },
      context: { used: 84000, size: 200000, cost: { amount: 0.25, currency: 'USD' } },
      changes: { files: [{ path: 'src/app.py', kind: 'modified', added: 3, removed: 1 }, { path: 'new.txt', kind: 'added', added: 2 }], added: 5, removed: 1, base: 'abc123' },
      recap: 'All done.',
    }),
    session('s2', { status: 'needs_you' }),
    session('s3'),
    session('s4', { status: 'working' }),
    session('s5', { status: 'closed' }),
  ]);

test('the status bar shows the fleet and the current session\'s context', () => {
  const model = busy();
  const view = statusBar(model, 'connected', model.sessions.get('s1'));
  assert.equal(view.text, '$(sync~spin) 2 working · $(bell-dot) 1 needs you · 4 open · 42%');
  assert.equal(view.warning, true);
  assert.match(view.tooltip, /Plan 1 of 3/);
  assert.match(view.tooltip, /▸ Fix/);
  assert.match(view.tooltip, /src\/app\\\.py \+3 −1/);
  assert.match(view.tooltip, /Context 42%: 84k of 200k tokens, \$0\.25/);

  const quiet = modelWith([session('s1'), session('s2')]);
  assert.equal(statusBar(quiet, 'connected', undefined).text, '$(server-process) 2 open');
  assert.equal(statusBar(quiet, 'disconnected', undefined, 'ECONNREFUSED').text, '$(debug-disconnect) sessiond: not connected');
  // Stopped on purpose: says so, and that a click starts it (the extension does not by itself).
  const stopped = statusBar(quiet, 'stopped', undefined, {});
  assert.equal(stopped.text, '$(debug-stop) sessiond: stopped');
  assert.match(stopped.tooltip, /does not start it again by itself: click to start it/);
  assert.match(statusBar(quiet, 'disconnected', undefined, 'ECONNREFUSED').tooltip, /ECONNREFUSED/);
});

test('the tree goes agents → sessions → permission, plan and changed files', () => {
  const model = busy();
  model.apply(event('permission.asked', { session: 's2', data: { permission: 'p-9', toolCall: { title: 'Push?' }, options: [{ optionId: 'allow_once', name: 'Allow' }] } }));
  const roots = children(model);
  assert.deepEqual(roots, [{ type: 'agent', agent: 'demo' }]);
  const agentView = describe(model, roots[0]);
  assert.equal(agentView.description, '4 open · 2 working');
  // The session that needs you first; creation order otherwise.
  const sessions = children(model, roots[0]);
  assert.deepEqual(sessions.map((n) => (n.type === 'session' ? n.session : '')), ['s2', 's1', 's3', 's4']);

  const s1 = describe(model, sessions[1]);
  assert.equal(s1.label, 'fix tests');
  assert.equal(s1.description, 's1 · working · plan 1/3 · 42% · 2 files');
  assert.equal(s1.contextValue, 'session-working');
  assert.equal(s1.icon?.id, 'sync~spin');
  assert.equal(s1.command?.command, 'sessiond.openTranscript');

  const [plan, changes] = children(model, sessions[1]);
  assert.equal(describe(model, plan).description, '1/3 · Fix');
  const entries = children(model, plan);
  assert.equal(entries.length, 3);
  assert.equal(describe(model, entries[1]).icon?.id, 'play-circle');
  const files = children(model, changes);
  const file = describe(model, files[0]);
  assert.equal(file.label, 'app.py');
  assert.equal(file.description, 'M · +3 −1 · src');
  assert.equal(file.contextValue, 'changedFile');
  assert.deepEqual(file.command?.arguments, ['s1', 'src/app.py']);
  assert.deepEqual(parent(model, files[0]), changes);

  const s2 = children(model, sessions[0]);
  const permission = describe(model, s2[0]);
  assert.equal(permission.label, 'Needs you: Push?');
  assert.equal(permission.contextValue, 'permission');
  assert.equal(describe(model, sessions[0]).collapsible, 'expanded');
  assert.equal(describe(model, sessions[2]).collapsible, 'none');
});

test('a changed file shared with other sessions says so on its row and in its tooltip; a plain one does not', () => {
  const model = modelWith([
    session('s1', {
      changes: {
        files: [
          { path: 'src/app.py', kind: 'modified', added: 3, removed: 1 },
          { path: 'out.txt', kind: 'added', added: 1, shared: true, sharedWith: ['s2'] },
          { path: 'log/run.txt', kind: 'added', added: 2, shared: true, sharedWith: ['s2', 's3'] },
          { path: 'many.txt', kind: 'modified', added: 1, removed: 1, shared: true, sharedWith: ['s2', 's3', 's4', 's5', 's6'] },
          { path: 'who.txt', kind: 'deleted', removed: 4, shared: true, sharedWith: null },
        ],
      },
    }),
  ]);
  const row = (path: string) => describe(model, { type: 'file', session: 's1', path });
  assert.equal(row('src/app.py').description, 'M · +3 −1 · src');
  assert.equal(row('src/app.py').tooltip, 'src/app.py (modified)');
  assert.equal(row('out.txt').description, 'A · +1 −0 · shared with s2');
  assert.equal(row('out.txt').tooltip, 'out.txt (added)\nAlso changed while s2\'s command ran in the same working copy: it may be theirs as well.');
  assert.equal(row('log/run.txt').description, 'A · +2 −0 · log · shared with s2, s3');
  assert.match(row('log/run.txt').tooltip ?? '', /\nAlso changed while the commands of s2 and s3 ran in the same working copy/);
  assert.equal(row('many.txt').description, 'M · +1 −1 · shared with s2, s3, s4 +2');
  assert.match(row('many.txt').tooltip ?? '', /the commands of s2, s3, s4, s5 and s6 ran/, 'the tooltip names them all');
  assert.equal(row('who.txt').description, 'D · +0 −4 · shared');
  assert.match(row('who.txt').tooltip ?? '', /\nAlso changed while another session's command ran/);
  assert.equal(row('who.txt').label, 'who.txt');
});

test('the quick pick puts needs-you and working sessions first', () => {
  const items = sessionPickItems(busy());
  // needs you, then working (most recently active first), then the rest.
  assert.deepEqual(items.map((i) => i.session), ['s2', 's4', 's1', 's3']);
  const fix = items.find((i) => i.session === 's1');
  assert.equal(fix?.label, '$(sync~spin) fix tests');
  assert.equal(fix?.description, 's1 · demo · working · plan 1/3 · 42%');
  assert.equal(fix?.detail, 'All done.');
  assert.ok(!items.some((i) => i.session === 's5'), 'closed sessions are left out');
});

test('stepping walks the working sessions in creation order: "2 of 3 working"', () => {
  const model = busy();
  assert.equal(step(model, undefined, 1)?.label, '1 of 3 working');
  assert.equal(step(model, 's1', 1)?.session.id, 's2');
  assert.equal(step(model, 's2', 1)?.label, '3 of 3 working');
  assert.equal(step(model, 's4', 1)?.session.id, 's1', 'wraps around');
  assert.equal(step(model, 's1', -1)?.session.id, 's4');
  assert.equal(step(model, 's3', 1)?.session.id, 's4', 'from a session that is not working: the next one after it');
  assert.equal(step(model, 's3', -1)?.session.id, 's2', 'and the previous one before it');
  assert.equal(step(modelWith([session('s1')]), undefined, 1), undefined);
});

test('a transcript renders with a header that says how much is shown and whether it follows', () => {
  const lines: TranscriptLine[] = [
    { n: 0, role: 'user', turn: 't1', text: 'say hi' },
    { n: 1, role: 'agent', turn: 't1', text: 'hi' },
    { n: 2, role: 'user', turn: 't2', text: 'ask ok?' },
    { n: 3, role: 'tool', turn: 't2', text: 'ok?' },
  ];
  const text = renderTranscript(lines, { session: session('s1', { title: 'x' }), sessionId: 's1', total: 5000, shown: 4, live: true, waiting: ['ok?'] });
  // Turns apart by a rule; the request the session waits on marked at the end.
  assert.equal(
    text,
    `# x (s1) · demo · idle\n# following live; the 4996 lines before these are not shown\n\n> say hi\nhi\n\n${TURN_SEPARATOR}\n> ask ok?\n  ⚙ ok?\n\n` +
      '⏸ waiting for you: ok? (answer from its notification or its row in the Sessions view)\n',
  );
  assert.match(renderTranscript([], { session: undefined, sessionId: 's9', total: 0, shown: 0, live: false }), /no longer following/);
  assert.equal(sessionOfTranscriptPath(transcriptPath('s1', 'a/b')), 's1');
});

test('a transcript header counts no lines it shows: its count never matched the editor\'s lines', () => {
  const lines: TranscriptLine[] = [
    { n: 0, role: 'user', turn: 't1', text: 'say hi' },
    { n: 1, role: 'agent', turn: 't1', text: 'hi' },
    { n: 2, role: 'user', turn: 't2', text: 'say bye' },
  ];
  const whole = renderTranscript(lines, { session: session('s1', { title: 'x' }), sessionId: 's1', total: 3, shown: 3, live: true });
  // "# 3 lines" over a document of 9 (the header, the blank line, the rule between turns).
  assert.equal(whole.split('\n')[1], '# following live');
  assert.doesNotMatch(whole, /\d+ lines?\b/);
  // An older daemon gives no total: "# 0 lines" was said over the lines seen live.
  const unknown = renderTranscript(lines, { session: undefined, sessionId: 's1', total: 0, shown: 3, live: true, note: 'no session/transcript' });
  assert.doesNotMatch(unknown, /\d+ lines?\b/);
  const frozen = renderTranscript(lines, { session: undefined, sessionId: 's1', total: 4, shown: 3, live: false });
  assert.match(frozen, /^# the line before these is not shown\n# no longer following/m);
});

test('a followed transcript says it is not live while the daemon is not connected', () => {
  const lines: TranscriptLine[] = [{ n: 0, role: 'user', turn: 't1', text: 'say hi' }];
  const header = { session: session('s1', { title: 'x' }), sessionId: 's1', total: 5, shown: 1, live: true };
  const away = renderTranscript(lines, { ...header, connected: false });
  assert.equal(away.split('\n')[1], '# not connected: shown as it was; it follows live again once connected; the 4 lines before these are not shown');
  assert.doesNotMatch(away, /following live/);
  assert.equal(renderTranscript(lines, { ...header, connected: true }).split('\n')[1], '# following live; the 4 lines before these are not shown');
});

test('transcript lines from events, for daemons without session/transcript', () => {
  let lines: TranscriptLine[] = [];
  lines = appendEventLines(lines, event('turn.queued', { session: 's1', turn: 't1', data: { prompt: 'say a\nsay b' } }), 2000);
  lines = appendEventLines(lines, event('turn.chunk', { session: 's1', turn: 't1', data: { text: 'a' } }), 2000);
  lines = appendEventLines(lines, event('turn.chunk', { session: 's1', turn: 't1', data: { text: '\nb' } }), 2000);
  lines = appendEventLines(lines, event('turn.ended', { session: 's1', turn: 't1', data: {} }), 2000);
  assert.deepEqual(lines.map((l) => [l.n, l.role, l.text]), [
    [0, 'user', 'say a'],
    [1, 'user', 'say b'],
    [2, 'agent', 'a'],
    [3, 'agent', 'b'],
  ]);
  assert.equal(appendEventLines(lines, event('turn.chunk', { turn: 't2', data: { text: 'x' } }), 3).length, 3, 'keeps the last maxLines');
});

test('a permission prompt names the session and offers the agent\'s options in order', () => {
  const prompt = permissionPrompt(
    { id: 'p', session: 's1', agent: 'demo', toolCall: { title: 'Push to main?' }, options: [{ optionId: 'allow_once', name: 'Allow' }, { optionId: 'reject_once', name: 'Reject' }], viaRequest: false },
    session('s1', { title: 'release' }),
  );
  assert.equal(prompt.message, 'release (s1): demo asks permission: Push to main?');
  assert.deepEqual(prompt.choices, [
    { title: 'Allow', optionId: 'allow_once' },
    { title: 'Reject', optionId: 'reject_once' },
  ]);
});

test('a changed file diffs its base content against the file now', () => {
  const s = session('s1', { root: '/w/p', changes: { base: 'tree1', files: [] } });
  assert.deepEqual(diffTarget(s, { path: 'src/a.py', kind: 'modified' }), {
    current: '/w/p/src/a.py',
    base: { root: '/w/p', base: 'tree1', path: 'src/a.py' },
    title: 'a.py (s1: base ↔ now)',
    deleted: false,
  });
  assert.equal(diffTarget(s, { path: 'n.txt', kind: 'added' }).base.path, null);
  assert.equal(diffTarget(s, { path: 'b.txt', kind: 'renamed', oldPath: 'a.txt' }).base.path, 'a.txt');
  assert.equal(diffTarget(s, { path: 'gone.txt', kind: 'deleted' }).deleted, true);
});

const family = () => {
  const model = modelWith([
    session('s1', { title: 'main work' }),
    session('s2', { title: 'side of s1', kind: 'side', parent: 's1', recap: 'because of a race' }),
    session('s3', { title: 'Fix the flaky test', kind: 'task', parent: 's1', status: 'working' }),
    session('s4', { title: 'port the parser', kind: 'thread', parent: 's3' }),
    session('s5', { status: 'closed' }),
    session('s6', { title: 'orphan', kind: 'side', parent: 's5' }),
    session('s7', { kind: 'side', parent: 's1', status: 'closed' }),
  ]);
  model.setTasks([
    task('k-1', { title: 'Older idea', fromSession: 's1', why: 'it failed twice', root: '/w/project' }),
    task('k-2', { title: 'Newer idea', fromSession: 's1', prompt: 'say newer\nsay more' }),
    task('k-3', { title: 'Done already', status: 'done', session: 's3' }),
    task('k-4', { title: 'Not wanted', status: 'dismissed', reason: 'not now' }),
  ]);
  return model;
};

test('side chats, tasks and threads show under their parent session, nested', () => {
  const model = family();
  const agentNode = { type: 'agent', agent: 'demo' } as const;
  // Top level: main sessions, and a child whose parent is closed (it must not vanish).
  assert.deepEqual(children(model, agentNode), [{ type: 'session', session: 's1' }, { type: 'session', session: 's6' }]);
  const s1 = { type: 'session', session: 's1' } as const;
  assert.deepEqual(children(model, s1), [{ type: 'session', session: 's2' }, { type: 'session', session: 's3' }], 'closed children are left out');
  assert.deepEqual(children(model, { type: 'session', session: 's3' }), [{ type: 'session', session: 's4' }]);
  assert.equal(describe(model, s1).collapsible, 'collapsed');
  assert.equal(describe(model, agentNode).description, '5 open · 1 working');

  const side = describe(model, { type: 'session', session: 's2' });
  assert.equal(side.label, 'side of s1');
  assert.equal(side.description, 's2 · side chat · idle');
  assert.equal(side.contextValue, 'session-idle', 'the session menus (send prompt, side chat, close) apply');
  assert.match(side.tooltip ?? '', /side chat of s1/);
  assert.equal(describe(model, { type: 'session', session: 's3' }).description, 's3 · task · working');
  assert.equal(describe(model, { type: 'session', session: 's4' }).description, 's4 · thread · idle');

  assert.deepEqual(parent(model, { type: 'session', session: 's4' }), { type: 'session', session: 's3' });
  assert.deepEqual(parent(model, { type: 'session', session: 's2' }), s1);
  assert.deepEqual(parent(model, { type: 'session', session: 's6' }), agentNode);
  assert.deepEqual(parent(model, s1), agentNode);
});

test('suggested tasks: a node at the top, one item each, with accept and dismiss on suggested ones', () => {
  const model = family();
  const roots = children(model);
  assert.deepEqual(roots, [{ type: 'tasks' }, { type: 'agent', agent: 'demo' }]);
  const node = describe(model, roots[0]);
  assert.equal(node.label, 'Suggested tasks');
  assert.equal(node.description, '2');
  assert.equal(node.contextValue, 'tasks');
  const tasks = children(model, roots[0]);
  assert.deepEqual(tasks, [{ type: 'task', task: 'k-2' }, { type: 'task', task: 'k-1' }], 'suggested only, newest first');
  const older = describe(model, tasks[1]);
  assert.equal(older.label, 'Older idea');
  assert.equal(older.description, 'demo · from s1');
  assert.equal(older.contextValue, 'task-suggested');
  assert.equal(older.icon?.id, 'lightbulb');
  assert.equal(older.command, undefined, 'a click does not accept');
  assert.match(older.tooltip ?? '', /why: it failed twice/);
  assert.match(older.tooltip ?? '', /runs in \/w\/project/);
  assert.match(older.tooltip ?? '', /say done$/);
  assert.deepEqual(parent(model, tasks[0]), { type: 'tasks' });
  const done = describe(model, { type: 'task', task: 'k-3' });
  assert.equal(done.contextValue, 'task-done');
  assert.equal(done.description, 'done · demo · in s3');
  assert.equal(describe(model, { type: 'task', task: 'k-9' }).description, 'gone');

  const empty = modelWith([session('s1')]);
  assert.deepEqual(children(empty), [{ type: 'agent', agent: 'demo' }], 'no node while the inbox is empty');
});

test('task quick picks, the dismiss and side chat input boxes, and their messages', () => {
  const model = family();
  assert.deepEqual(taskPickItems(model), [
    { label: '$(lightbulb) Newer idea', description: 'demo · from s1', detail: 'say newer', task: 'k-2' },
    { label: '$(lightbulb) Older idea', description: 'demo · from s1', detail: 'it failed twice', task: 'k-1' },
  ]);
  assert.deepEqual(taskPickItems(modelWith([])), []);

  const dismiss = dismissPrompt(model.tasks.get('k-1'), 'k-1');
  assert.equal(dismiss.title, 'Dismiss "Older idea"');
  assert.equal(dismiss.value, 'not now');
  assert.equal(dismissPrompt(undefined, 'k-9').title, 'Dismiss k-9');

  const rename = renamePrompt(model.sessions.get('s1'), 's1');
  assert.equal(rename.title, 'Rename s1');
  assert.equal(rename.value, 'main work', 'its title, to edit');
  assert.equal(renamePrompt(undefined, 's9').value, '');
  assert.equal(titleProblem('  '), 'Give it a name with words in it.');
  assert.equal(titleProblem('fix it'), undefined);

  const side = sideChatPrompt(model.sessions.get('s1'), 's1');
  assert.equal(side.title, 'Side chat beside main work (s1)');
  assert.match(side.prompt, /untouched/);

  const answer = sideAnswerMessage({
    session: model.sessions.get('s2')!,
    forked: false,
    reply: { session: 's2', turnId: 't1', text: 'because of a race\nand more', stopReason: 'end_turn', startedAt: '', endedAt: '' },
  });
  assert.equal(answer, 'sessiond side chat s2 (from an account of the session): because of a race');

  assert.equal(acceptedMessage(task('k-1', { title: 'X', status: 'running', session: 's8' })), 'Task "X" is running in session s8.');
  assert.match(acceptedMessage(task('k-1', { title: 'X', status: 'queued' })), /queued/);
  assert.equal(acceptedMessage(task('k-1', { title: 'X', status: 'failed', reason: 'no git' })), 'Task "X" is failed: no git.');

  // The session quick pick says what a session around a main one is.
  assert.equal(pickItem(model.sessions.get('s2')!).description, 's2 · demo · side chat of s1 · idle');
});

test('restarting the daemon: the message after, the warning before, the error for each failed step', () => {
  // The message: both pids, and the cancelled turns only when there were any.
  assert.equal(
    restartedMessage({ stopped: { pid: 41, cancelledTurns: 2 }, pid: 42 }),
    'sessiond: restarted the daemon (pid 41 → 42); 2 running or queued turns were cancelled',
  );
  assert.equal(restartedMessage({ stopped: { pid: 41, cancelledTurns: 1 }, pid: 42 }), 'sessiond: restarted the daemon (pid 41 → 42); 1 running or queued turn was cancelled');
  assert.equal(restartedMessage({ stopped: { pid: 41, cancelledTurns: 0 }, pid: 42 }), 'sessiond: restarted the daemon (pid 41 → 42)');

  // Asked first only when a session has a turn in hand (working, queued, waiting on a person).
  assert.equal(
    restartWarning(busy()),
    '3 sessions are working, queued or waiting on you: restarting the daemon cancels their turns, for every editor and script using it.',
  );
  assert.match(restartWarning(modelWith([session('s1', { status: 'queued' }), session('s2')]))!, /^1 session is working, queued/);
  assert.equal(restartWarning(modelWith([session('s1'), session('s2', { status: 'closed' }), session('s3', { status: 'failed' })])), undefined);

  // Each failure says what happened and what to do.
  const notConnected = restartFailedMessage({ stage: 'notConnected', reason: 'not connected to sessiond (connect ENOENT /run/s.sock)' });
  assert.equal(
    notConnected,
    'sessiond: could not restart the daemon: not connected to sessiond (connect ENOENT /run/s.sock). Nothing was stopped. ' +
      'Run "sessiond: Reconnect to the Daemon" first; "sessiond: Show Log" says why it is not connected.',
  );
  const refused = restartFailedMessage({ stage: 'stop', reason: 'sessiond daemon/stop failed (CONFLICT): this daemon cannot be stopped over its socket; signal it' });
  assert.match(refused, /^sessiond: could not restart the daemon: sessiond daemon\/stop failed \(CONFLICT\): .*signal it\. Nothing was stopped\./);
  assert.match(refused, /run `sessiond stop` \(or end its process\), then "sessiond: Reconnect to the Daemon"\.$/);
  const stuck = restartFailedMessage({
    stage: 'close',
    reason: 'it had not closed the connection 60 s after answering daemon/stop',
    stopped: { pid: 41, cancelledTurns: 0 },
  });
  assert.match(stuck, /^sessiond: the daemon \(pid 41\) is stopping, but it had not closed the connection 60 s after answering daemon\/stop\./);
  assert.match(stuck, /end the process \(kill 41\) if it hangs, then run "sessiond: Reconnect to the Daemon"\.$/);
  const gone = restartFailedMessage({
    stage: 'reconnect',
    reason: 'no daemon answered within 60 s: no sessiond daemon answers at /run/s.sock (ENOENT)',
    stopped: { pid: 41, cancelledTurns: 3 },
  });
  assert.match(gone, /^sessiond: stopped the daemon \(pid 41; 3 running or queued turns were cancelled\), but could not connect to a new one: no daemon answered within 60 s: /);
  assert.match(gone, /The extension keeps trying\. Check the settings sessiond\.path and sessiond\.startDaemon .*`sessiond serve`; "sessiond: Show Log" has the details\.$/);
});

test('not connected, the agent row says what the status bar says: "stopped" for a stop on purpose', () => {
  const model = modelWith([session('s1')]);
  for (const [state, word] of [
    ['stopped', 'stopped'],
    ['disconnected', 'not connected'],
  ] as const) {
    const offline = offlineOf(state);
    const agent = describe(model, { type: 'agent', agent: 'demo' }, { offline });
    assert.match(agent.description ?? '', new RegExp(`^${word} · last known: 1 open`), state);
    assert.match(statusBar(model, state, undefined).text, new RegExp(`sessiond: ${word}$`), state);
    assert.match(describe(model, { type: 'session', session: 's1' }, { offline }).description ?? '', / · stale$/, state);
  }
  assert.match(describe(model, { type: 'agent', agent: 'demo' }, { offline: 'stopped' }).tooltip ?? '', /daemon was stopped.*Start the Daemon/);
  assert.equal(offlineOf('connected'), undefined);
  assert.equal(offlineOf('disconnected', false), undefined, 'not started yet: nothing is stale');
});

test('only rows the tree has are revealed: not a closed session, nor a request of a session not known yet', () => {
  const model = modelWith([session('s1'), session('s2', { status: 'closed' }), session('s3', { parent: 's1', kind: 'side' })]);
  assert.ok(shown(model, { type: 'session', session: 's1' }));
  assert.ok(shown(model, { type: 'session', session: 's3' }), 'a side chat under its open parent');
  assert.ok(!shown(model, { type: 'session', session: 's2' }), 'closed: its row went');
  assert.ok(!shown(model, { type: 'session', session: 's9' }), 'not known: VS Code would look among the top rows');
  // A side chat asks at once: its request arrives before the side chat's own info.
  model.apply(event('permission.asked', { session: 's9', data: { permission: 'p-1', toolCall: { title: 'ok?' }, options: [] } }));
  assert.ok(!shown(model, { type: 'permission', session: 's9', permission: 'p-1' }));
  model.apply(event('session.status', { session: 's1', data: { status: 'closed' } }));
  assert.ok(!shown(model, { type: 'session', session: 's1' }), 'closed while selected');
});

test('the stop notice shows its Start link first: a notification shows one line of it', () => {
  const { title, message } = stoppedNotice('sessiond.startDaemon');
  assert.equal(title, 'sessiond: the daemon was stopped');
  assert.match(message, /^\[Start the Daemon\]\(command:sessiond\.startDaemon\) · The extension does not start it again by itself/);
  assert.equal(stoppedMessage(), 'sessiond: the daemon was stopped. The extension does not start it again by itself; it connects when one runs.');
});
