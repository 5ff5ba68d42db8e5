/**
 * Not a test: how long drawing the whole Sessions tree takes with many sessions.
 * `npx tsc -p . && node out/test/bench/tree.bench.js [sessions…]` (default 300 and 3000).
 */
import { FleetModel } from '../../src/protocol/model';
import type { SessionInfo } from '../../src/protocol/types';
import { children, describe, TreeRefresh, type TreeNode } from '../../src/ui/tree';
import { agent, event, ManualScheduler, session } from '../helpers/fixtures';

/** `count` sessions over 4 agents: every third one a side chat of an earlier one, every tenth needing you with a permission. */
function fleet(count: number): FleetModel {
  const model = new FleetModel(100, new ManualScheduler());
  model.setAgents(['demo', 'claude', 'codex', 'gemini'].map((name) => agent(name)));
  const sessions: SessionInfo[] = [];
  for (let i = 1; i <= count; i++) {
    const parent = i % 3 === 0 ? `s${Math.max(1, i - 2 - (i % 7))}` : null;
    const status = i % 10 === 0 ? 'needs_you' : i % 2 === 0 ? 'working' : 'idle';
    sessions.push(session(`s${i}`, { agent: ['demo', 'claude', 'codex', 'gemini'][i % 4], parent, kind: parent ? 'side' : 'main', status }));
  }
  model.replaceSessions(sessions, 0);
  for (const s of sessions) {
    if (s.status === 'needs_you') {
      model.addPermission({ id: `p-${s.id}`, session: s.id, toolCall: { title: `run ${s.id}` }, options: [], viaRequest: false });
    }
  }
  return model;
}

/** Every row, as VS Code asks with every node expanded: its children, then its look. */
function drawAll(model: FleetModel, refresh: TreeRefresh): number {
  let rows = 0;
  const walk = (node: TreeNode | undefined): void => {
    refresh.noteChildren(model, node);
    for (const child of children(model, node)) {
      describe(model, child);
      refresh.noteItem(model, child);
      rows++;
      walk(child);
    }
  };
  walk(undefined);
  return rows;
}

function time(run: () => void): number {
  const start = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

const sizes = process.argv.slice(2).map(Number).filter(Boolean);
for (const count of sizes.length ? sizes : [300, 3000]) {
  const model = fleet(count);
  const refresh = new TreeRefresh();
  let rows = 0;
  drawAll(model, refresh); // warm up
  refresh.reset();
  const draw = time(() => (rows = drawAll(model, refresh)));
  // One session changes status: which rows to redraw (every drawn row is looked at again).
  model.apply(event('session.status', { session: 's5', seq: 10 ** 9, data: { status: 'working' } }));
  const change = time(() => refresh.changes(model));
  console.log(`${count} sessions, ${rows} rows: draw all ${draw.toFixed(1)} ms, rows to redraw after a change ${change.toFixed(1)} ms`);
}
