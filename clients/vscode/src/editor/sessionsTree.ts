import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { Coalescer } from '../protocol/coalesce';
import { offlineOf } from '../ui/status';
import { children, describe, gone, nodeKey, parent, shown, TreeRefresh, type DescribeOptions, type TreeNode } from '../ui/tree';

// Long enough for the first refresh to have been drawn on a busy machine, short enough to go unseen.
const REDRAW_AGAIN_MS = 500;
// A row is redrawn on its own only once VS Code has not asked for any children this long, and at
// the latest after this many waits: a row refreshed while VS Code reads its parent's children
// anew is refreshed on the row VS Code is replacing, and never shows.
const QUIET_MS = 300;
const MOST_WAITS = 5;
// A row redrawn again while VS Code never went quiet is redrawn again, up to this many times in all.
const AGAIN_ROUNDS = 3;
// VS Code gathers a view's refreshes until none came for 200 ms (each one starts the 200 ms again):
// refreshes closer together than that, as while a session reports progress every 0.1 s, are held
// back until they stop, and the whole view showed what it showed when they began (a new session
// kept "idle" for its whole turn). Refreshes go at most this often, each on its own.
const TREE_GAP_MS = 350;

/**
 * The "Sessions" view: a thin adapter from ui/tree's descriptions to TreeItems. Nodes are kept
 * as one object per key (VS Code finds the rows to redraw by the object), and a model change
 * redraws only the rows whose look or children changed (TreeRefresh).
 */
export class SessionsTree implements vscode.TreeDataProvider<TreeNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<TreeNode | TreeNode[] | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  /** What to redraw (`undefined`: the whole tree), handed to VS Code at most every TREE_GAP_MS. */
  private readonly redraws = new Coalescer<TreeNode | undefined>(TREE_GAP_MS, (nodes) => this.fire(nodes), undefined, {
    leading: true,
  });
  private readonly subscriptions: vscode.Disposable[] = [this.changed, this.redraws];
  private readonly nodes = new Map<string, TreeNode>();
  private readonly refresh = new TreeRefresh();
  private readonly again = new Set<TreeNode>();
  private againTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly insideAgain = new Set<TreeNode>();
  private insideTimer: ReturnType<typeof setTimeout> | undefined;
  private childrenAskedAt = 0;

  constructor(private readonly sessiond: Sessiond) {
    this.subscriptions.push(
      toDisposable(sessiond.model.onDidChange(() => this.update())),
      toDisposable(sessiond.onDidChangeState(() => this.update())),
    );
  }

  private get options(): DescribeOptions {
    return { offline: offlineOf(this.sessiond.state, this.sessiond.started) };
  }

  private update(): void {
    const { redraw, inside } = this.refresh.changes(this.sessiond.model, this.options);
    if (!redraw.length) return;
    if (redraw.includes(undefined)) {
      this.refresh.reset();
      this.redraws.add(undefined);
    } else {
      const nodes = redraw.map((node) => this.intern(node!));
      for (const node of nodes) this.redraws.add(node);
      this.redrawAgain(nodes);
    }
    if (inside.length) this.redrawInside(new Set(inside.map((node) => this.intern(node))));
  }

  /**
   * Redraw these rows once more a moment later, once VS Code has stopped reading children (as the
   * rows redrawn inside, below): a refresh fired while VS Code reads their parent's children anew
   * may never be asked for (after a reconnect, sessions kept "stale" with their agent redrawn).
   */
  private redrawAgain(nodes: TreeNode[], rounds = AGAIN_ROUNDS): void {
    for (const node of nodes) this.again.add(node);
    if (this.againTimer) return;
    this.whenQuiet(
      (quiet) => {
        this.againTimer = undefined;
        const model = this.sessiond.model;
        const again = [...this.again].filter((node) => !gone(model, node));
        this.again.clear();
        if (!again.length) return;
        for (const node of again) this.redraws.add(node);
        // Fired while VS Code still read children (it never went quiet): it may have been drawn
        // on a row being replaced, as the first was. Once more, a moment later.
        if (!quiet && rounds > 1) this.redrawAgain(again, rounds - 1);
      },
      (timer) => (this.againTimer = timer),
    );
  }

  /**
   * Call `then` a moment from now, once VS Code has not asked for children for QUIET_MS (or
   * after MOST_WAITS waits; `quiet` says which): a row redrawn while VS Code reads its parent's
   * children anew is redrawn on the row being replaced, and never shows. `keep` is handed each
   * wait's timer.
   */
  private whenQuiet(then: (quiet: boolean) => void, keep: (timer: ReturnType<typeof setTimeout>) => void): void {
    let waits = 0;
    const check = (): void => {
      const quiet = Date.now() - this.childrenAskedAt >= QUIET_MS;
      if (!quiet && waits++ < MOST_WAITS) {
        keep(setTimeout(check, QUIET_MS));
        return;
      }
      then(quiet);
    };
    keep(setTimeout(check, REDRAW_AGAIN_MS));
  }

  /**
   * Redraw on their own, a moment later, rows that changed while a row around them was redrawn.
   * VS Code drops a row from a refresh that holds its parent, reads the parent's children anew
   * and keeps drawing the old row (a new session's row kept "idle" for its whole turn while the
   * status bar counted it working). It gathers the changes of a moment (~200 ms) into one
   * refresh, and a row refreshed while the children around it are read anew is refreshed on the
   * row being replaced: so this waits until VS Code has not asked for children for a while, and
   * goes level by level. Only rows whose look changed: each refresh of a row makes its command
   * anew, and a click on a row VS Code still draws from before finds the old one gone.
   */
  private redrawInside(nodes: Set<TreeNode>): void {
    for (const node of nodes) this.insideAgain.add(node);
    if (this.insideTimer) return;
    const fire = (): void => {
      this.insideTimer = undefined;
      const model = this.sessiond.model;
      const rows = [...this.insideAgain].filter((node) => !gone(model, node));
      this.insideAgain.clear();
      // Level by level: rows whose parent is redrawn with them would again be redrawn through it.
      const keys = new Set(rows.map(nodeKey));
      const outer = rows.filter((node) => {
        const up = parent(model, node);
        return !up || !keys.has(nodeKey(up));
      });
      for (const node of outer) this.redraws.add(node);
      const fired = new Set(outer);
      const deeper = rows.filter((node) => !fired.has(node));
      if (deeper.length) this.redrawInside(new Set(deeper));
    };
    this.whenQuiet(fire, (timer) => (this.insideTimer = timer));
  }

  private fire(nodes: Set<TreeNode | undefined>): void {
    if (nodes.has(undefined)) {
      this.changed.fire(undefined);
      return;
    }
    const model = this.sessiond.model;
    const rows = [...nodes].filter((node): node is TreeNode => node !== undefined && !gone(model, node));
    if (rows.length) this.changed.fire(rows);
  }

  /**
   * Select or show a row, once the model's last changes are handed to VS Code, and only a row the
   * tree has now; false when there is none to show. VS Code looks for the row among the children
   * it has of the row above it, and waits only for refreshes already fired: a reveal right after
   * a change (a session reopened or opened, a side chat asking as it opens, a session closed)
   * looked among the children drawn before it, or for a row that is gone, and failed
   * ("Cannot resolve tree item").
   */
  reveal(view: vscode.TreeView<TreeNode>, node: TreeNode, options: { select: boolean; focus: boolean; expand?: boolean }): boolean {
    this.sessiond.model.flushChanges();
    this.redraws.flushNow();
    if (!view.visible || !shown(this.sessiond.model, node)) return false;
    view.reveal(this.intern(node), options).then(undefined, () => undefined);
    return true;
  }

  /** The one object of this node's key (VS Code knows a tree's elements by identity: reveal needs it). */
  intern(node: TreeNode): TreeNode {
    const key = nodeKey(node);
    let known = this.nodes.get(key);
    if (!known) this.nodes.set(key, (known = node));
    return known;
  }

  getChildren(node?: TreeNode): TreeNode[] {
    this.childrenAskedAt = Date.now();
    const model = this.sessiond.model;
    this.refresh.noteChildren(model, node);
    return children(model, node).map((child) => this.intern(child));
  }

  getParent(node: TreeNode): TreeNode | undefined {
    const up = parent(this.sessiond.model, node);
    return up && this.intern(up);
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const view = describe(this.sessiond.model, node, this.options);
    this.refresh.noteItem(this.sessiond.model, node, this.options);
    const item = new vscode.TreeItem(view.label, COLLAPSIBLE[view.collapsible]);
    item.id = view.id;
    item.description = view.description;
    item.tooltip = view.tooltip;
    item.contextValue = view.contextValue;
    if (view.icon) {
      item.iconPath = new vscode.ThemeIcon(view.icon.id, view.icon.color ? new vscode.ThemeColor(view.icon.color) : undefined);
    }
    if (view.command) item.command = view.command;
    return item;
  }

  dispose(): void {
    if (this.againTimer) clearTimeout(this.againTimer);
    if (this.insideTimer) clearTimeout(this.insideTimer);
    for (const subscription of this.subscriptions) subscription.dispose();
  }
}

const COLLAPSIBLE = {
  none: vscode.TreeItemCollapsibleState.None,
  collapsed: vscode.TreeItemCollapsibleState.Collapsed,
  expanded: vscode.TreeItemCollapsibleState.Expanded,
} as const;

export function toDisposable(disposable: { dispose(): unknown }): vscode.Disposable {
  return new vscode.Disposable(() => disposable.dispose());
}
