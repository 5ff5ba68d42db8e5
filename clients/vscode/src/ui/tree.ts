/**
 * The "Sessions" tree: suggested tasks (when there are any), then agents →
 * sessions → the session's pending permissions, its side chats, tasks and
 * threads (sessions whose `parent` it is, nested the same way), plan entries
 * and changed files. `children` and `describe` are pure
 * functions of the model; the extension turns a `TreeNodeView` into a
 * `vscode.TreeItem` field by field.
 */
import type { ChangedFile, SessionInfo } from '../protocol/types';
import { byCreation } from '../protocol/model';
import {
  ATTENTION_LABELS,
  CHANGE_LETTERS,
  clockTime,
  fileLabel,
  formatLines,
  formatPercent,
  planProgress,
  plural,
  PLAN_MARKS,
  KIND_LABELS,
  sessionName,
  STATUS_COLORS,
  STATUS_ICONS,
  STATUS_LABELS,
} from './format';
import { taskDescription, taskTooltip } from './around';
import { MERGE_ICONS, mergeEntryDescription, mergeQueueDescription, mergeRowLabel, mergeTooltip } from './merge';
import { START_COMMAND } from './daemon';
import { OFFLINE_LABELS, RECONNECT_COMMAND, type Offline } from './status';
import { queuedNote, turnsInHand, turnsLabel } from './turns';
import type { ModelView } from './view';

export type TreeNode =
  | { type: 'tasks' }
  | { type: 'task'; task: string }
  | { type: 'merges' }
  | { type: 'merge'; session: string }
  | { type: 'agent'; agent: string }
  | { type: 'session'; session: string }
  | { type: 'permission'; session: string; permission: string }
  | { type: 'plan'; session: string }
  | { type: 'planEntry'; session: string; index: number }
  | { type: 'changes'; session: string }
  | { type: 'file'; session: string; path: string };

export interface TreeNodeView {
  id: string;
  label: string;
  description?: string;
  tooltip?: string;
  icon?: { id: string; color?: string };
  /** Matched by `viewItem` in package.json's menus. */
  contextValue: string;
  collapsible: 'none' | 'collapsed' | 'expanded';
  command?: { command: string; title: string; arguments: unknown[] };
}

/** Command ids the tree's clicks run (registered by the extension, contributed in package.json). */
export const TreeCommands = {
  openTranscript: 'sessiond.openTranscript',
  openChangedFile: 'sessiond.openChangedFile',
  answerPermission: 'sessiond.answerPermission',
  showMergeOutcome: 'sessiond.showMergeOutcome',
} as const;

export function children(model: ModelView, node?: TreeNode): TreeNode[] {
  if (!node) {
    const open = model.openSessions();
    const names = new Set(model.agents.keys());
    for (const session of open) names.add(session.agent);
    const agents: TreeNode[] = [...names]
      .sort((a, b) => (a === 'demo' ? -1 : b === 'demo' ? 1 : a.localeCompare(b)))
      .map((agent) => ({ type: 'agent', agent }));
    const top: TreeNode[] = [];
    if (model.suggestedTasks().length) top.push({ type: 'tasks' });
    if (model.merges.size) top.push({ type: 'merges' });
    // Nothing open anywhere: no rows, so the view's welcome says so (and offers New Session…).
    if (!top.length && !open.length) return [];
    return [...top, ...agents];
  }
  switch (node.type) {
    case 'merges':
      return model.mergeQueue().map((entry) => ({ type: 'merge', session: entry.session }));
    case 'tasks':
      return model.suggestedTasks().map((task) => ({ type: 'task', task: task.id }));
    case 'agent':
      return needsYouFirst(
        model,
        model.agentSessions(node.agent).filter((session) => session.status !== 'closed' && !parentSession(model, session)),
      ).map((session) => ({ type: 'session', session: session.id }));
    case 'session': {
      const session = model.sessions.get(node.session);
      if (!session) return [];
      const out: TreeNode[] = model
        .permissionsOf(session.id)
        .map((permission) => ({ type: 'permission', session: session.id, permission: permission.id }));
      for (const child of needsYouFirst(model, model.childSessions(session.id))) out.push({ type: 'session', session: child.id });
      if (session.plan?.entries?.length) out.push({ type: 'plan', session: session.id });
      if (session.changes?.files?.length) out.push({ type: 'changes', session: session.id });
      return out;
    }
    case 'plan':
      return (model.sessions.get(node.session)?.plan?.entries ?? []).map((_, index) => ({
        type: 'planEntry',
        session: node.session,
        index,
      }));
    case 'changes':
      return (model.sessions.get(node.session)?.changes?.files ?? []).map((file) => ({
        type: 'file',
        session: node.session,
        path: file.path,
      }));
    default:
      return [];
  }
}

/** How the view is drawn besides the model: stale while not connected; `now` for relative times. */
export interface DescribeOptions {
  /** Not connected (and why): rows show the last known state, marked so in the status bar's words. */
  offline?: Offline;
  now?: number;
}

/** Why each row's state is only the last known one, and how to get the live one. */
const OFFLINE_NOTES: Record<Offline, string> = {
  stopped: `the sessiond daemon was stopped: as last known; run "${START_COMMAND}"`,
  notConnected: `not connected to sessiond: as last known; run "${RECONNECT_COMMAND}"`,
};

export function describe(model: ModelView, node: TreeNode, options: DescribeOptions = {}): TreeNodeView {
  const view = describeNode(model, node, options.now);
  const { offline } = options;
  if (!offline || (node.type !== 'agent' && node.type !== 'session')) return view;
  // Not connected: say so on the rows whose state may have moved on since.
  return {
    ...view,
    description: node.type === 'agent' ? `${OFFLINE_LABELS[offline]} · last known: ${view.description ?? ''}` : `${view.description ?? ''} · stale`,
    tooltip: `${view.tooltip ? `${view.tooltip}\n` : ''}(${OFFLINE_NOTES[offline]})`,
    icon: node.type === 'session' ? { id: 'question' } : view.icon,
  };
}

function describeNode(model: ModelView, node: TreeNode, now?: number): TreeNodeView {
  switch (node.type) {
    case 'tasks': {
      const count = model.suggestedTasks().length;
      return {
        id: 'tasks',
        label: 'Suggested tasks',
        description: String(count),
        tooltip: `${count} task${count === 1 ? '' : 's'} suggested by sessions, waiting to be accepted or dismissed`,
        icon: { id: 'lightbulb' },
        contextValue: 'tasks',
        collapsible: 'expanded',
      };
    }
    case 'task': {
      const task = model.tasks.get(node.task);
      if (!task) return { id: `task:${node.task}`, label: node.task, description: 'gone', contextValue: 'gone', collapsible: 'none' };
      return {
        id: `task:${task.id}`,
        label: task.title,
        description: taskDescription(task),
        tooltip: taskTooltip(task),
        icon: { id: task.status === 'suggested' ? 'lightbulb' : task.status === 'dismissed' ? 'circle-slash' : 'tasklist' },
        contextValue: `task-${task.status}`,
        collapsible: 'none',
      };
    }
    case 'merges': {
      const entries = model.mergeQueue();
      return {
        id: 'merges',
        label: 'Merge queue',
        description: mergeQueueDescription(entries),
        tooltip: 'Worktree sessions merging into their base branch, one at a time per repository (merge/list), and how the last merge of each ended',
        icon: { id: 'git-merge' },
        contextValue: 'merges',
        collapsible: 'expanded',
      };
    }
    case 'merge': {
      const entry = model.merges.get(node.session);
      const session = model.sessions.get(node.session);
      if (!entry) return { id: `merge:${node.session}`, label: node.session, description: 'gone', contextValue: 'gone', collapsible: 'none' };
      return {
        id: `merge:${node.session}`,
        label: session?.title || node.session,
        description: session?.title ? `${node.session} · ${mergeEntryDescription(entry)}` : mergeEntryDescription(entry),
        tooltip: mergeTooltip(entry),
        icon: { id: MERGE_ICONS[entry.status], color: entry.status === 'failed' ? 'errorForeground' : undefined },
        contextValue: `merge-${entry.status}`,
        collapsible: 'none',
        command: { command: TreeCommands.showMergeOutcome, title: 'Show the Merge', arguments: [node.session] },
      };
    }
    case 'agent': {
      const agent = model.agents.get(node.agent);
      const open = model.agentSessions(node.agent).filter((s) => s.status !== 'closed');
      const working = open.filter((s) => s.status === 'working').length;
      const state = agent?.process.state;
      return {
        id: `agent:${node.agent}`,
        label: node.agent,
        description: [`${open.length} open`, working ? `${working} working` : undefined, state && state !== 'stopped' ? state : undefined]
          .filter(Boolean)
          .join(' · '),
        tooltip: agent ? `${agent.command.join(' ')}${agent.process.note ? `\n${agent.process.note}` : ''}` : undefined,
        icon: { id: state === 'crashed' ? 'warning' : 'hubot' },
        contextValue: 'agent',
        collapsible: 'expanded',
      };
    }
    case 'session': {
      const session = model.sessions.get(node.session);
      if (!session) return goneView(node.session);
      const plan = planProgress(session.plan);
      const percent = formatPercent(session.context);
      const kind = session.kind && session.kind !== 'main' ? KIND_LABELS[session.kind] : undefined;
      const merge = model.merges.get(session.id);
      const turns = turnsLabel(session);
      const waiting = waitingBelow(model, session.id);
      const description = [
        kind,
        STATUS_LABELS[session.status],
        waiting.length ? `${waitingLabel(waiting)} needs you` : undefined,
        queuedNote(session),
        merge ? mergeRowLabel(merge) : undefined,
        plan ? `plan ${plan}` : undefined,
        percent,
        session.changes?.files?.length ? plural(session.changes.files.length, 'file') : undefined,
      ]
        .filter(Boolean)
        .join(' · ');
      const tooltip = [
        sessionName(session),
        kind && session.parent ? `${kind} of ${session.parent}` : undefined,
        `${STATUS_LABELS[session.status]} since ${clockTime(session.statusSince, now)}${turns ? ` · turns: ${turns}` : ''}`,
        ...waiting.map((child) => `${KIND_LABELS[child.kind as keyof typeof KIND_LABELS] ?? 'session'} ${sessionName(child)} needs you${waitingQuestion(model, child.id)}`),
        session.statusDetail ?? undefined,
        `${session.placement} in ${session.root}`,
        merge ? mergeTooltip(merge) : undefined,
        session.plan?.current && turnsInHand(session).running ? `now: ${session.plan.current}` : undefined,
        session.lastError ? `last error: ${session.lastError}` : undefined,
        session.recap ? `last reply: ${session.recap}` : undefined,
        ...(session.attention ?? []).filter((flag) => flag !== 'needs_you').map((flag) => `note: ${ATTENTION_LABELS[flag] ?? flag}`),
      ]
        .filter(Boolean)
        .join('\n');
      const hasChildren =
        model.permissionsOf(session.id).length ||
        model.childSessions(session.id).length ||
        session.plan?.entries?.length ||
        session.changes?.files?.length;
      return {
        id: `session:${session.id}`,
        label: session.title || session.id,
        description: session.title ? `${session.id} · ${description}` : description,
        tooltip,
        // A side chat or thread under it waits for a person: the bell shows on the row that is seen.
        icon: waiting.length && session.status !== 'needs_you'
          ? { id: STATUS_ICONS.needs_you, color: STATUS_COLORS.needs_you }
          : { id: STATUS_ICONS[session.status], color: STATUS_COLORS[session.status] },
        contextValue: `session-${session.status}${session.placement === 'worktree' ? '-worktree' : ''}`,
        collapsible: hasChildren ? (session.status === 'needs_you' ? 'expanded' : 'collapsed') : 'none',
        command: { command: TreeCommands.openTranscript, title: 'Open Transcript', arguments: [session.id] },
      };
    }
    case 'permission': {
      const permission = model.permissions.get(node.permission);
      const title = permission?.toolCall.title ?? 'a permission request';
      return {
        id: `permission:${node.permission}`,
        label: `Needs you: ${title}`,
        description: permission?.options.map((option) => option.name).join(' / '),
        icon: { id: 'bell-dot', color: STATUS_COLORS.needs_you },
        contextValue: 'permission',
        collapsible: 'none',
        command: { command: TreeCommands.answerPermission, title: 'Answer', arguments: [node.permission] },
      };
    }
    case 'plan': {
      const plan = model.sessions.get(node.session)?.plan;
      return {
        id: `plan:${node.session}`,
        label: 'Plan',
        description: [planProgress(plan), plan?.current ?? undefined].filter(Boolean).join(' · '),
        icon: { id: 'checklist' },
        contextValue: 'plan',
        collapsible: 'expanded',
      };
    }
    case 'planEntry': {
      const entry = model.sessions.get(node.session)?.plan?.entries?.[node.index];
      const status = entry?.status ?? 'pending';
      return {
        id: `plan:${node.session}:${node.index}`,
        label: entry?.content ?? '',
        description: status === 'in_progress' ? 'in progress' : status === 'completed' ? 'done' : undefined,
        tooltip: `${PLAN_MARKS[status]} ${entry?.content ?? ''} (${entry?.priority ?? 'medium'} priority)`,
        icon: { id: status === 'completed' ? 'pass' : status === 'in_progress' ? 'play-circle' : 'circle-large-outline' },
        contextValue: 'planEntry',
        collapsible: 'none',
      };
    }
    case 'changes': {
      const changes = model.sessions.get(node.session)?.changes;
      return {
        id: `changes:${node.session}`,
        label: 'Changed files',
        description: `${plural(changes?.files?.length ?? 0, 'file')} · ${formatLines(changes?.added, changes?.removed)}`,
        tooltip: changes?.base ? `against ${changes.base}` : undefined,
        icon: { id: 'diff' },
        contextValue: 'changes',
        collapsible: 'expanded',
      };
    }
    case 'file': {
      const file = model.sessions.get(node.session)?.changes?.files?.find((f) => f.path === node.path);
      return {
        id: `file:${node.session}:${node.path}`,
        label: file ? fileLabel(file) : node.path,
        description: file ? fileDescription(file) : undefined,
        tooltip: file ? fileTooltip(file) : node.path,
        icon: { id: file?.kind === 'added' ? 'diff-added' : file?.kind === 'deleted' ? 'diff-removed' : file?.kind === 'renamed' ? 'diff-renamed' : 'diff-modified' },
        contextValue: 'changedFile',
        collapsible: 'none',
        command: { command: TreeCommands.openChangedFile, title: 'Open Changes', arguments: [node.session, node.path] },
      };
    }
  }
}

function fileDescription(file: ChangedFile): string {
  const dir = file.path.includes('/') ? file.path.slice(0, file.path.lastIndexOf('/')) : '';
  return [CHANGE_LETTERS[file.kind], formatLines(file.added, file.removed), dir, file.outsideRoot ? 'outside root' : '', sharedLabel(file)]
    .filter(Boolean)
    .join(' · ');
}

function fileTooltip(file: ChangedFile): string {
  const line = `${file.path} (${file.kind})${file.oldPath ? ` from ${file.oldPath}` : ''}`;
  if (!file.shared) return line;
  const others = file.sharedWith ?? [];
  const whose =
    others.length === 0
      ? 'another session\'s command'
      : others.length === 1
        ? `${others[0]}'s command`
        : `the commands of ${others.slice(0, -1).join(', ')} and ${others[others.length - 1]}`;
  return `${line}\nAlso changed while ${whose} ran in the same working copy: it may be theirs as well.`;
}

/** "shared with s2, s3", the first 3 sessions then "+N": a shared file may be another session's too. */
function sharedLabel(file: ChangedFile): string {
  if (!file.shared) return '';
  const others = file.sharedWith ?? [];
  if (!others.length) return 'shared';
  const more = others.length > 3 ? ` +${others.length - 3}` : '';
  return `shared with ${others.slice(0, 3).join(', ')}${more}`;
}

/**
 * Whether `session` waits for a person, or any session started from it at any depth does (closed
 * ones in between too): only its own sessions are looked at, through the model's index of
 * sessions by parent (going through every session for each row made a redraw O(rows × sessions)).
 */
function waitingAtOrBelow(model: ModelView, session: SessionInfo, seen = new Set<string>()): boolean {
  if (seen.has(session.id)) return false;
  seen.add(session.id);
  if (session.status === 'needs_you') return true;
  return model.sessionsUnder(session.id).some((child) => waitingAtOrBelow(model, child, seen));
}

/** Sessions that wait for a person (or have one below that does) first; creation order otherwise. */
function needsYouFirst(model: ModelView, sessions: SessionInfo[]): SessionInfo[] {
  const rank = new Map(sessions.map((session) => [session.id, waitingAtOrBelow(model, session) ? 0 : 1]));
  return [...sessions].sort((a, b) => rank.get(a.id)! - rank.get(b.id)! || byCreation(a, b));
}

/** The open sessions started from `session`, at any depth, that wait for a person. */
export function waitingBelow(model: ModelView, session: string, seen = new Set<string>([session])): SessionInfo[] {
  const out: SessionInfo[] = [];
  for (const child of model.childSessions(session)) {
    if (seen.has(child.id)) continue;
    seen.add(child.id);
    if (child.status === 'needs_you') out.push(child);
    out.push(...waitingBelow(model, child.id, seen));
  }
  return out;
}

/** "side chat s23", "thread s4", "2 sessions under it". */
function waitingLabel(waiting: SessionInfo[]): string {
  if (waiting.length > 1) return `${waiting.length} sessions under it`;
  const [child] = waiting;
  return `${KIND_LABELS[child.kind as keyof typeof KIND_LABELS] ?? 'session'} ${child.id}`;
}

/** ': "Run rm -rf build?"', the question a session waits on, when known. */
function waitingQuestion(model: ModelView, session: string): string {
  const title = model.permissionsOf(session)[0]?.toolCall.title;
  return title ? `: "${title}"` : '';
}

/** The open session `session` was started from, when the model has it (else it shows under its agent). */
function parentSession(model: ModelView, session: SessionInfo): SessionInfo | undefined {
  const parent = session.parent ? model.sessions.get(session.parent) : undefined;
  return parent && parent.status !== 'closed' && parent.id !== session.id ? parent : undefined;
}

/** Whether the node no longer exists in the model (its session closed or went, its task no longer waits). */
export function gone(model: ModelView, node: TreeNode): boolean {
  if (node.type === 'task') return model.tasks.get(node.task)?.status !== 'suggested';
  if (node.type === 'merge') return !model.merges.has(node.session);
  if ('session' in node) {
    const session = model.sessions.get(node.session);
    if (!session || session.status === 'closed') return true;
    if (node.type === 'permission') return !model.permissions.has(node.permission);
  }
  return false;
}

/**
 * Whether the node is a row of the tree now: it and every row above it are there. TreeView.reveal
 * of any other fails inside VS Code ("Cannot resolve tree item"): a session closed, or one whose
 * info has not arrived yet (its parent unknown, VS Code looks for it among the top rows).
 */
export function shown(model: ModelView, node: TreeNode): boolean {
  for (let at: TreeNode | undefined = node; at; at = parent(model, at)) if (gone(model, at)) return false;
  return true;
}

function goneView(id: string): TreeNodeView {
  return { id: `session:${id}`, label: id, description: 'gone', contextValue: 'gone', collapsible: 'none' };
}

/** A stable string key per node, so the extension can find nodes again. */
export function nodeKey(node: TreeNode): string {
  return JSON.stringify(node);
}

/** The parent of a node (for TreeView.reveal). */
export function parent(model: ModelView, node: TreeNode): TreeNode | undefined {
  switch (node.type) {
    case 'tasks':
    case 'merges':
    case 'agent':
      return undefined;
    case 'merge':
      return { type: 'merges' };
    case 'task':
      return { type: 'tasks' };
    case 'session': {
      const session = model.sessions.get(node.session);
      if (!session) return undefined;
      const above = parentSession(model, session);
      return above ? { type: 'session', session: above.id } : { type: 'agent', agent: session.agent };
    }
    case 'permission':
    case 'plan':
    case 'changes':
      return { type: 'session', session: node.session };
    case 'planEntry':
      return { type: 'plan', session: node.session };
    case 'file':
      return { type: 'changes', session: node.session };
  }
}

/**
 * Which rows to redraw after a model change: only those whose look or children changed, so a
 * click on a row right after an update lands on that row (redrawing the whole tree on every
 * change once turned a click meant to open a transcript into collapsing the agent node).
 * `key`s are `nodeKey`s; the view remembers what it drew last for each node it was asked for.
 */
export class TreeRefresh {
  // Kept apart: VS Code asks for a row (its look) and for its children at different moments, and a
  // row whose children were read after a change still shows the look it was drawn with (a "Merge
  // queue" row kept "1 merging" when its children were read just after its merge failed).
  private readonly looks = new Map<string, string>();
  private readonly kids = new Map<string, string>();

  /** Remember how `node` looked when it was handed over (call from getTreeItem). */
  noteItem(model: ModelView, node: TreeNode, options: DescribeOptions = {}): void {
    this.looks.set(nodeKey(node), look(model, node, options));
  }

  /** Remember which children `node` (the root: undefined) had when they were handed over (call from getChildren). */
  noteChildren(model: ModelView, node: TreeNode | undefined): void {
    this.kids.set(node ? nodeKey(node) : ROOT, kidsOf(model, node));
  }

  /** Forget everything drawn (the whole tree was redrawn). */
  reset(): void {
    this.looks.clear();
    this.kids.clear();
  }

  /**
   * The nodes to redraw, outermost first, none inside another; `undefined` in the list means the
   * whole tree. Candidates: the nodes drawn so far (any of them may have changed).
   */
  changed(model: ModelView, options: DescribeOptions = {}): (TreeNode | undefined)[] {
    return this.changes(model, options).redraw;
  }

  /**
   * `redraw` as `changed` gives it, and `inside`: the changed rows left out of it because a node
   * around them is redrawn (VS Code redraws them only through it, and does not always show them).
   */
  changes(model: ModelView, options: DescribeOptions = {}): { redraw: (TreeNode | undefined)[]; inside: TreeNode[] } {
    const dirty: (TreeNode | undefined)[] = [];
    for (const key of new Set([...this.looks.keys(), ...this.kids.keys()])) {
      const node = key === ROOT ? undefined : (JSON.parse(key) as TreeNode);
      if (node && gone(model, node)) {
        // Its parent's children changed too: redrawing the parent drops this row.
        this.looks.delete(key);
        this.kids.delete(key);
        continue;
      }
      const drawnLook = this.looks.get(key);
      const drawnKids = this.kids.get(key);
      const changed =
        (drawnLook !== undefined && node !== undefined && look(model, node, options) !== drawnLook) ||
        (drawnKids !== undefined && kidsOf(model, node) !== drawnKids);
      if (changed) dirty.push(node);
    }
    const rows = dirty.filter((node): node is TreeNode => node !== undefined);
    if (rows.length < dirty.length) return { redraw: [undefined], inside: rows };
    // Nodes inside another dirty node are redrawn through it: left out of `redraw`, kept in `inside`.
    const keys = new Set(rows.map((node) => nodeKey(node)));
    const redraw: TreeNode[] = [];
    const inside: TreeNode[] = [];
    for (const node of rows) {
      let outer = true;
      for (let up = parent(model, node); up; up = parent(model, up)) if (keys.has(nodeKey(up))) outer = false;
      (outer ? redraw : inside).push(node);
    }
    return { redraw, inside };
  }
}

const ROOT = '<root>';

/** How a node looks (relative times frozen: they age by themselves); '' for one that cannot be described now. */
function look(model: ModelView, node: TreeNode, options: DescribeOptions): string {
  try {
    return JSON.stringify(describe(model, node, { ...options, now: 0 }));
  } catch {
    return '';
  }
}

/** Which children a node (the root: undefined) has. */
function kidsOf(model: ModelView, node: TreeNode | undefined): string {
  try {
    return JSON.stringify(children(model, node).map(nodeKey));
  } catch {
    return '';
  }
}
