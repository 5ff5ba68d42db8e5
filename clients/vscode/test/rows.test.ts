/** Side chats closing with their parent, row commands that lost their row, the not-connected notice: pure logic. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { closedMessage, editorsGo, openSideChats } from '../src/ui/around';
import { notConnectedNotice } from '../src/ui/daemon';
import { rowLost, rowLostMessage } from '../src/ui/rows';
import { modelWith, session } from './helpers/fixtures';

test("a side chat's editors go when it or its parent closes; other sessions' stay", () => {
  const model = modelWith([
    session('s1', { title: 'main', status: 'closed' }),
    session('s2', { kind: 'side', parent: 's1' }),
    session('s3', { title: 'open main' }),
    session('s4', { kind: 'side', parent: 's3' }),
    session('s5', { kind: 'side', parent: 's3', status: 'closed' }),
    session('s6', { kind: 'task', parent: 's1' }),
    session('s7', { kind: 'side', parent: 's99' }),
  ]);
  assert.equal(editorsGo(model, 's2'), true); // its parent closed
  assert.equal(editorsGo(model, 's4'), false); // its parent open
  assert.equal(editorsGo(model, 's5'), true); // closed itself
  assert.equal(editorsGo(model, 's6'), false); // a task is work of its own
  assert.equal(editorsGo(model, 's1'), false); // a main session's transcript stays to be read
  assert.equal(editorsGo(model, 's7'), false); // a parent not known: kept
  assert.equal(editorsGo(model, 'nope'), false);
  assert.deepEqual(openSideChats(model, 's3').map((s) => s.id), ['s4']);
  assert.equal(closedMessage(model.sessions.get('s3')!, 2), 'sessiond: closed open main (s3) and its 2 side chats');
  assert.equal(closedMessage(model.sessions.get('s3')!, 1), 'sessiond: closed open main (s3) and its side chat');
  assert.equal(closedMessage(model.sessions.get('s3')!, 0), 'sessiond: closed open main (s3)');
});

test("a row's command whose row VS Code no longer finds is told from one run from the palette", () => {
  assert.equal(rowLost([]), false); // the palette: no arguments
  assert.equal(rowLost([undefined, undefined]), true); // a context menu: the element VS Code lost, then the selection
  assert.equal(rowLost([null]), true);
  assert.equal(rowLost([{ type: 'session', session: 's1' }, undefined]), false);
  assert.equal(rowLost(['s1']), false); // a script, by id
  assert.match(rowLostMessage('Close Session'), /^sessiond: Close Session did nothing: its row is no longer in the Sessions view/);
});

test('the not-connected notice says why, and links to start or reconnect', () => {
  const commands = { start: 'sessiond.startDaemon', reconnect: 'sessiond.reconnect' };
  const stopped = notConnectedNotice('no session can be opened', true, undefined, commands);
  assert.equal(stopped.title, 'sessiond: the daemon was stopped, so no session can be opened');
  assert.match(stopped.message, /\[Start the Daemon\]\(command:sessiond\.startDaemon\)/);
  assert.match(stopped.message, /\[Reconnect\]\(command:sessiond\.reconnect\)/);
  const lost = notConnectedNotice('no session can be opened', false, 'ENOENT.', commands);
  assert.equal(lost.title, 'sessiond: not connected to the sessiond daemon (ENOENT), so no session can be opened');
});
