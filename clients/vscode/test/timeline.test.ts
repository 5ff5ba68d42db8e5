/** The timeline command (issue 20): which `sessiond` command line draws which run. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { timelineArgs, timelineRun, timelineTitle } from '../src/ui/timeline';
import { session } from './helpers/fixtures';

test("a session's run is drawn; a session outside any run draws the last hour", () => {
  assert.equal(timelineRun(session('s1', { run: 'r-1' })), 'r-1');
  assert.equal(timelineRun(session('s2')), undefined);
  assert.equal(timelineRun(undefined), undefined);
  assert.deepEqual(timelineArgs('r-1', '/tmp/t.html'), ['runs', 'r-1', '--html', '/tmp/t.html']);
  assert.deepEqual(timelineArgs(undefined, '/tmp/t.html', '/run/s.sock'), [
    'trace',
    '--last',
    '1h',
    '--html',
    '/tmp/t.html',
    '--socket',
    '/run/s.sock',
  ]);
  assert.equal(timelineTitle('r-1'), 'sessiond timeline · r-1');
  assert.equal(timelineTitle(undefined), 'sessiond timeline · last hour');
});
