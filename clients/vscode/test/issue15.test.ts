/**
 * What a day in a real VS Code turned up (issue 15), as pure functions of the model: the
 * disconnected state, grammar and relative times, progress while a permission waits, turn
 * endings in transcripts, and which tree rows a change redraws.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appendEventLines, endingLine } from '../src/protocol/transcripts';
import type { TranscriptLine } from '../src/protocol/types';
import { ago, plural } from '../src/ui/format';
import { progressSession, progressTitle, waitingMessage } from '../src/ui/permissions';
import { RECONNECT_COMMAND, statusBar } from '../src/ui/status';
import { renderTranscript } from '../src/ui/transcript';
import { describe, nodeKey, TreeRefresh, type TreeNode } from '../src/ui/tree';
import { event, modelWith, session } from './helpers/fixtures';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { EXTENSION_DIR } from './helpers/daemon';

const NOW = Date.parse('2026-11-29T10:00:00Z');

test('"1 file", "2 files"; relative times', () => {
  assert.equal(plural(1, 'file'), '1 file');
  assert.equal(plural(2, 'file'), '2 files');
  assert.equal(ago(NOW - 2_000, NOW), 'just now');
  assert.equal(ago(NOW - 40_000, NOW), '40 s ago');
  assert.equal(ago('2026-11-29T09:57:00Z', NOW), '3 min ago');
  assert.equal(ago(NOW - 5 * 3600_000, NOW), '5 h ago');
  assert.equal(ago(NOW - 4 * 86400_000, NOW), '4 days ago');
});

test('a session row says "1 file" and its tooltip "idle since 09:57:00" (a clock time: right however late it is read), no ISO time', () => {
  const model = modelWith([
    session('s1', {
      statusSince: '2026-11-29T09:57:00Z',
      changes: { files: [{ path: 'a.py', kind: 'modified', added: 1, removed: 1 }], added: 1, removed: 1 },
    }),
  ]);
  const view = describe(model, { type: 'session', session: 's1' }, { now: NOW });
  assert.equal(view.description, 'idle · 1 file');
  const local = new Date('2026-11-29T09:57:00Z');
  const clock = [local.getHours(), local.getMinutes(), local.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
  assert.ok(view.tooltip?.includes(`idle since ${clock}`), view.tooltip);
  // The same tooltip drawn a minute later says the same: no "3 min ago" frozen in it.
  assert.equal(describe(model, { type: 'session', session: 's1' }, { now: NOW + 60_000 }).tooltip, view.tooltip);
  assert.doesNotMatch(view.tooltip ?? '', /\d{4}-\d\d-\d\dT/);
  const changes = describe(model, { type: 'changes', session: 's1' });
  assert.equal(changes.description, '1 file · +1 −1');
});

test('disconnected: the status bar names a command that exists and says since when; rows are marked stale', () => {
  const model = modelWith([session('s1'), session('s2', { status: 'working' })]);
  const view = statusBar(model, 'disconnected', undefined, { lastError: 'ECONNREFUSED', disconnectedSince: NOW - 180_000, now: NOW });
  assert.equal(view.text, '$(debug-disconnect) sessiond: not connected');
  assert.match(view.tooltip, /since 3 min ago: ECONNREFUSED/);
  assert.match(view.tooltip, /last known state of 2 open sessions, marked stale/);
  assert.ok(view.tooltip.includes(`"${RECONNECT_COMMAND}"`));
  // The command named is one the extension contributes, by its palette title.
  const manifest = JSON.parse(readFileSync(path.join(EXTENSION_DIR, 'package.json'), 'utf8')) as {
    contributes: { commands: { title: string; category: string }[] };
  };
  const titles = manifest.contributes.commands.map((command) => `${command.category}: ${command.title}`);
  assert.ok(titles.includes(RECONNECT_COMMAND), `${RECONNECT_COMMAND} among ${titles.join(', ')}`);
  // Connected again: no error from before is shown.
  assert.doesNotMatch(statusBar(model, 'connected', undefined, { lastError: 'ECONNREFUSED' }).tooltip, /ECONNREFUSED/);
  // Not started (no daemon, startDaemon off): says what it waits for, not "connecting".
  assert.match(statusBar(model, 'idle', undefined, { socket: '/run/s.sock' }).tooltip, /No sessiond daemon runs at \/run\/s\.sock/);

  const row = describe(model, { type: 'session', session: 's2' }, { offline: 'notConnected' });
  assert.equal(row.description, 'working · stale');
  assert.equal(row.icon?.id, 'question');
  assert.match(row.tooltip ?? '', /not connected to sessiond: as last known/);
  assert.match(describe(model, { type: 'agent', agent: 'demo' }, { offline: 'notConnected' }).description ?? '', /^not connected · last known: 2 open/);
});

test('a turn\'s progress says "needs you: …" while its session waits for a permission', () => {
  const model = modelWith([session('s4', { status: 'working' })]);
  assert.equal(progressSession('sessiond s4'), 's4');
  assert.equal(progressSession('something else'), undefined);
  assert.equal(progressTitle(model, 'sessiond s4'), 'sessiond s4', 'no title: the id');
  assert.equal(progressTitle(modelWith([session('s4', { title: 'Push it' })]), 'sessiond s4'), 'sessiond Push it (s4)');
  assert.equal(progressTitle(model, 'sessiond s99'), 'sessiond s99', 'unknown: as the daemon said');
  assert.equal(progressTitle(model, undefined), 'sessiond');
  assert.equal(waitingMessage(model, 's4'), undefined);
  model.apply(event('session.status', { session: 's4', data: { status: 'needs_you' } }));
  model.apply(event('permission.asked', { session: 's4', data: { permission: 'p-1', toolCall: { title: 'Push to main?' }, options: [] } }));
  assert.equal(waitingMessage(model, 's4'), 'needs you: Push to main?');
  model.apply(event('session.status', { session: 's4', data: { status: 'working' } }));
  assert.equal(waitingMessage(model, 's4'), undefined);
});

test('cancelled, failed and interrupted turns leave a mark in the transcript', () => {
  assert.equal(endingLine({ outcome: 'interrupted', error: 'interrupted: the daemon stopped' }), 'interrupted: the daemon stopped');
  assert.equal(endingLine({ outcome: 'failed', error: 'agent crashed' }), 'failed: agent crashed');
  assert.equal(endingLine({ outcome: 'cancelled', stopReason: 'cancelled', cancelledBy: 'by a client' }), 'cancelled by a client');
  assert.equal(endingLine({ outcome: 'completed', stopReason: 'end_turn' }), undefined);
  // A daemon's own `status` lines render with a mark that stands out.
  const lines = [
    { n: 0, role: 'user', turn: 't1', text: 'sleep 300' },
    { n: 1, role: 'status', turn: 't1', text: 'interrupted: the daemon stopped while this turn was running; send it again' },
  ] as unknown as TranscriptLine[];
  const text = renderTranscript(lines, { session: undefined, sessionId: 's1', total: 2, shown: 2, live: true });
  assert.match(text, /^■ turn interrupted: the daemon stopped/m);
  // Without session/transcript (older daemons), the event itself leaves the mark.
  const appended = appendEventLines([], event('turn.ended', { session: 's1', turn: 't1', data: { outcome: 'interrupted', error: 'interrupted: x' } }), 100);
  assert.deepEqual(appended.map((line) => [line.role, line.text]), [['status', 'interrupted: x']]);
});

test('a change redraws only the rows whose look or children changed', () => {
  const seen = { lastActivity: '2026-11-29T09:00:00Z' };
  const model = modelWith([session('s1', { title: 'one', ...seen }), session('s2', { title: 'two', ...seen })]);
  const refresh = new TreeRefresh();
  const agent: TreeNode = { type: 'agent', agent: 'demo' };
  const s1: TreeNode = { type: 'session', session: 's1' };
  const s2: TreeNode = { type: 'session', session: 's2' };
  // What VS Code asked for: the root, the agent, both sessions (each row and its children).
  const drawn = (...nodes: TreeNode[]): void => {
    for (const node of nodes) {
      refresh.noteItem(model, node);
      refresh.noteChildren(model, node);
    }
  };
  refresh.noteChildren(model, undefined);
  drawn(agent, s1, s2);
  assert.deepEqual(refresh.changed(model), [], 'nothing changed, nothing redrawn');

  // A transcript chunk changes no row.
  model.apply(event('turn.chunk', { session: 's1', data: { text: 'hello' } }));
  assert.deepEqual(refresh.changed(model), []);

  // A plan on s1: its row (description, children) only; the agent's counts did not move.
  model.apply(event('session.plan', { session: 's1', data: { plan: { entries: [{ content: 'Read', status: 'pending' }] } } }));
  assert.deepEqual(refresh.changed(model).map((node) => nodeKey(node!)), [nodeKey(s1)]);
  drawn(s1);

  // A row's children read after a change say nothing of its look: it was drawn before the change
  // (a "Merge queue" row kept "1 merging" when its children were read just after the merge failed).
  model.apply(event('session.plan', { session: 's1', data: { plan: { entries: [{ content: 'Read', status: 'completed' }] } } }));
  refresh.noteChildren(model, s1);
  assert.deepEqual(refresh.changed(model).map((node) => nodeKey(node!)), [nodeKey(s1)], 'its look still to be redrawn');
  refresh.noteItem(model, s1);
  assert.deepEqual(refresh.changed(model), [], 'drawn anew');

  // s2 starts working: the agent's description ("1 working") changes; s2 is inside it.
  model.apply(event('session.status', { session: 's2', data: { status: 'working' } }));
  assert.deepEqual(refresh.changed(model).map((node) => nodeKey(node!)), [nodeKey(agent)]);
  // ...and is redrawn on its own besides (VS Code does not always show a row redrawn through its parent).
  assert.deepEqual(refresh.changes(model).inside.map(nodeKey), [nodeKey(s2)]);
  drawn(agent, s1, s2);

  // A new agent: the root's children change, the whole tree is redrawn.
  model.setAgents([...model.agents.values(), { name: 'other', command: ['x'], envKeys: [], options: {}, process: { state: 'stopped' } }]);
  assert.deepEqual(refresh.changed(model), [undefined]);
});
