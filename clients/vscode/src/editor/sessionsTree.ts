import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { children, describe, parent, type TreeNode } from '../ui/tree';

/** The "Sessions" view: a thin adapter from ui/tree's descriptions to TreeItems. */
export class SessionsTree implements vscode.TreeDataProvider<TreeNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly subscriptions: vscode.Disposable[] = [this.changed];

  constructor(private readonly sessiond: Sessiond) {
    // The model coalesces its changes; one redraw per batch is cheap enough for 10,000 sessions.
    this.subscriptions.push(
      toDisposable(sessiond.model.onDidChange(() => this.changed.fire(undefined))),
      toDisposable(sessiond.onDidChangeState(() => this.changed.fire(undefined))),
    );
  }

  getChildren(node?: TreeNode): TreeNode[] {
    return children(this.sessiond.model, node);
  }

  getParent(node: TreeNode): TreeNode | undefined {
    return parent(this.sessiond.model, node);
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const view = describe(this.sessiond.model, node);
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
