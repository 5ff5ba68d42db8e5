/**
 * One local model of the daemon's agents, sessions and suggested tasks, kept
 * current from the event log. No I/O: `Sessiond` (live.ts) feeds it lists, snapshots and
 * events; the UI reads it. Changes are coalesced into one `onDidChange` per
 * `coalesceMs`, naming what changed.
 *
 * Events carry state (a status, a plan) and are applied as "set" operations,
 * so applying an event whose effect a listing already showed does no harm.
 * Counters (turns, recap, usage) are not derived from events: an event that
 * implies them marks the session stale, and Sessiond refetches it.
 */
import { Emitter, type Event as Listen } from 'vscode-jsonrpc/node';
import { Coalescer, type Scheduler } from './coalesce';
import { EventKinds } from './methods';
import type {
  AgentInfo,
  Attention,
  Changes,
  ContextFill,
  Event,
  Fleet,
  MergeEntry,
  PermissionOption,
  Plan,
  SessionInfo,
  SessionStatus,
  SessionUsage,
  Snapshot,
  TaskInfo,
  ToolCallView,
} from './types';

export type TaskStatus = TaskInfo['status'];
/** `main`, or a side chat, task or thread of its `parent`. */
export type SessionKind = NonNullable<SessionInfo['kind']>;

/** A permission request waiting for a person. */
export interface PendingPermission {
  id: string;
  session: string;
  agent?: string;
  turn?: string;
  toolCall: ToolCallView;
  options: PermissionOption[];
  /** Came as a `session/requestPermission` request (else only as a `permission.asked` event). */
  viaRequest: boolean;
}

export interface ModelChange {
  /** Sessions whose state changed (or appeared, or went). */
  sessions: Set<string>;
  agents: boolean;
  permissions: boolean;
  /** Suggested tasks (task/list, task.changed). */
  tasks: boolean;
  /** The merge queue (merge/list, merge.step). */
  merges: boolean;
  /** The whole model was replaced (first load, resync). */
  reset: boolean;
}

/** What applying an event asks of whoever feeds the model. */
export interface ApplyResult {
  applied: boolean;
  /** Sessions to refetch with session/get (their counters moved, or the event's data was not understood). */
  staleSessions: string[];
  staleAgents: boolean;
  /** The merge queue moved (a merge.step): list it again for everyone's position. */
  staleMerges: boolean;
}

/** A session's merge as this client knows it: the daemon's entry and the last step it heard of. */
export interface KnownMerge extends MergeEntry {
  /** The last merge.step (`queued`, `started`, `gate-started`, …). */
  step?: string;
}

/** A merge that has ended (merged, failed, cancelled). */
export function mergeDone(entry: MergeEntry): boolean {
  return entry.status !== 'queued' && entry.status !== 'running';
}

/** Statuses in which a session has a turn in hand; stepping "3 of 12" moves among these. */
export const ACTIVE_STATUSES: ReadonlySet<SessionStatus> = new Set<SessionStatus>(['working', 'needs_you']);

const ALL_STATUSES: SessionStatus[] = ['idle', 'queued', 'working', 'needs_you', 'failed', 'stopped', 'closed'];

/**
 * A Map that also files its values under one or more fields of theirs (a session under its
 * parent and its agent, a permission under its session), kept in step on set, delete and clear:
 * who is under what is read without going through every value. Within a group, values keep
 * the Map's order as long as a value set again stays in its group (else it goes last in its new one).
 * An indexed field must not be changed in place (the model only changes a session's status so):
 * set the value again.
 */
export class IndexedMap<V, I extends string> extends Map<string, V> {
  private readonly groups = new Map<I, Map<string, Map<string, V>>>();

  constructor(private readonly fields: Record<I, (value: V) => string | null | undefined>) {
    super();
  }

  /** The values whose `index` field is `group`, in the Map's order. */
  under(index: I, group: string): V[] {
    const values = this.groups.get(index)?.get(group)?.values();
    return values ? [...values] : [];
  }

  override set(key: string, value: V): this {
    const old = super.get(key);
    for (const index of Object.keys(this.fields) as I[]) {
      const field = this.fields[index];
      const from = old === undefined ? undefined : field(old);
      const to = field(value);
      let byGroup = this.groups.get(index);
      if (!byGroup) this.groups.set(index, (byGroup = new Map<string, Map<string, V>>()));
      if (from !== undefined && from !== null && from !== to) this.ungroup(byGroup, from, key);
      if (to === undefined || to === null) continue;
      let group = byGroup.get(to);
      if (!group) byGroup.set(to, (group = new Map<string, V>()));
      group.set(key, value);
    }
    return super.set(key, value);
  }

  override delete(key: string): boolean {
    const old = super.get(key);
    if (old !== undefined) {
      for (const index of Object.keys(this.fields) as I[]) {
        const from = this.fields[index](old);
        const byGroup = this.groups.get(index);
        if (byGroup && from !== undefined && from !== null) this.ungroup(byGroup, from, key);
      }
    }
    return super.delete(key);
  }

  override clear(): void {
    this.groups.clear();
    super.clear();
  }

  private ungroup(byGroup: Map<string, Map<string, V>>, from: string, key: string): void {
    const group = byGroup.get(from);
    if (!group) return;
    group.delete(key);
    if (!group.size) byGroup.delete(from);
  }
}

export class FleetModel {
  readonly agents = new Map<string, AgentInfo>();
  /** Every session, filed under its parent and its agent (see childSessions, agentSessions). */
  readonly sessions = new IndexedMap<SessionInfo, 'parent' | 'agent'>({
    parent: (session) => session.parent,
    agent: (session) => session.agent,
  });
  /** Pending permission requests, filed under their session (see permissionsOf). */
  readonly permissions = new IndexedMap<PendingPermission, 'session'>({ session: (permission) => permission.session });
  /** Every task the daemon told of (task/list, task.changed), by id: suggested, running, done or dismissed. */
  readonly tasks = new Map<string, TaskInfo>();
  /** The last merge asked for, per session (merge/list, merge.step, merge/request answers). */
  readonly merges = new Map<string, KnownMerge>();
  /** The seq of the last merge.step applied, per session. */
  private readonly mergeSeqs = new Map<string, number>();
  /** The last prompt asked of each session, as far as this client saw it (turn.queued, or sent here). */
  readonly lastPrompts = new Map<string, string>();
  /** The daemon's own fleet summary, when it sends one (fleet.summary, snapshots). */
  daemonFleet: Fleet | undefined;
  /** The newest event seq reflected in this model. */
  lastSeq = 0;
  /** Whether a full state (listing or snapshot) has been loaded. */
  loaded = false;

  private readonly changeEmitter = new Emitter<ModelChange>();
  private readonly eventEmitter = new Emitter<Event>();
  private readonly permissionAddedEmitter = new Emitter<PendingPermission>();
  private readonly permissionRemovedEmitter = new Emitter<string>();
  private readonly coalescer: Coalescer<string>;

  /** Coalesced: at most once per coalesceMs. */
  readonly onDidChange: Listen<ModelChange> = this.changeEmitter.event;
  /** Every event applied, in seq order, at once (transcripts follow these). */
  readonly onEvent: Listen<Event> = this.eventEmitter.event;
  /** A permission request appeared (from an event or a request), at once. */
  readonly onDidAddPermission: Listen<PendingPermission> = this.permissionAddedEmitter.event;
  /** A permission request was answered, here or elsewhere, or its turn ended. */
  readonly onDidRemovePermission: Listen<string> = this.permissionRemovedEmitter.event;

  constructor(coalesceMs = 100, scheduler?: Scheduler) {
    this.coalescer = new Coalescer<string>(coalesceMs, (keys) => {
      this.changeEmitter.fire(toChange(keys));
    }, scheduler);
  }

  // ---------------------------------------------------------------- loading

  setAgents(agents: AgentInfo[]): void {
    this.agents.clear();
    for (const agent of agents) this.agents.set(agent.name, agent);
    this.touch('agents');
  }

  /** Replace every session with a full listing (or snapshot) that reflects the log up to `head`. */
  replaceSessions(sessions: SessionInfo[], head: number): void {
    this.sessions.clear();
    for (const session of sessions) this.sessions.set(session.id, withPercent(session));
    for (const permission of [...this.permissions.values()]) {
      if (this.sessions.get(permission.session)?.status !== 'needs_you') this.removePermission(permission.id);
    }
    this.lastSeq = head;
    this.loaded = true;
    this.touch('reset');
  }

  applySnapshot(snapshot: Snapshot): void {
    this.daemonFleet = snapshot.fleet;
    this.replaceSessions(snapshot.sessions, snapshot.head);
  }

  /** Sessions as a listing gave them, keeping those it left out (it may leave closed ones out). */
  mergeSessions(sessions: SessionInfo[]): void {
    for (const session of sessions) this.upsertSession(session);
  }

  upsertSession(session: SessionInfo): void {
    this.sessions.set(session.id, withPercent(session));
    if (session.status !== 'needs_you') this.dropPermissionsOf(session.id);
    this.touch(`session:${session.id}`);
  }

  removeSession(id: string): void {
    if (this.sessions.delete(id)) this.touch(`session:${id}`);
    this.dropPermissionsOf(id);
  }

  /** Replace every task with a task/list answer. */
  setTasks(tasks: TaskInfo[]): void {
    this.tasks.clear();
    for (const task of tasks) this.tasks.set(task.id, task);
    this.touch('tasks');
  }

  /** A task as the daemon gave it (an answer to task/accept or task/dismiss, a task.changed event). */
  upsertTask(task: TaskInfo): void {
    this.tasks.set(task.id, task);
    this.touch('tasks');
  }

  /**
   * The merge queue as a merge/list answer gave it, asked for when the model was at `asOf`:
   * a session whose merge moved (merge.step) since then keeps what its steps said.
   */
  setMerges(entries: MergeEntry[], asOf = Infinity): void {
    const listed = new Set<string>();
    for (const entry of entries) {
      listed.add(entry.session);
      if ((this.mergeSeqs.get(entry.session) ?? 0) > asOf) continue;
      const known = this.merges.get(entry.session);
      this.merges.set(entry.session, { ...entry, step: known?.branch === entry.branch ? known.step : undefined });
      this.touch(`session:${entry.session}`);
    }
    // One it no longer lists as waiting or running has ended unseen (a daemon restart cancels them).
    for (const [session, entry] of this.merges) {
      if (!listed.has(session) && !mergeDone(entry) && (this.mergeSeqs.get(session) ?? 0) <= asOf) {
        this.merges.set(session, { ...entry, status: 'cancelled', position: null, reason: entry.reason ?? 'it is no longer in the merge queue' });
        this.touch(`session:${session}`);
      }
    }
    this.touch('merges');
  }

  /** Forget a session's last merge (a new one is being asked for). */
  forgetMerge(session: string): void {
    this.merges.delete(session);
    this.mergeSeqs.delete(session);
    this.touch('merges');
    this.touch(`session:${session}`);
  }

  /** A merge as the daemon answered merge/request (its steps may have come first: they are newer). */
  upsertMerge(entry: MergeEntry): void {
    const known = this.merges.get(entry.session);
    const merged: KnownMerge =
      known && known.branch === entry.branch
        ? { ...entry, ...known, base: known.base || entry.base, strategy: entry.strategy, gate: entry.gate ?? known.gate, repo: entry.repo ?? known.repo }
        : entry;
    this.merges.set(entry.session, merged);
    this.touch('merges');
    this.touch(`session:${entry.session}`);
  }

  /** The merges waiting or running, the one merging first, then those done (most recent last). */
  mergeQueue(): KnownMerge[] {
    const active = [...this.merges.values()].filter((entry) => !mergeDone(entry));
    active.sort((a, b) => (a.position ?? Infinity) - (b.position ?? Infinity));
    return [...active, ...[...this.merges.values()].filter(mergeDone)];
  }

  /** Called when the daemon's log started over (a new home): everything known is void. */
  forget(): void {
    this.sessions.clear();
    this.tasks.clear();
    this.merges.clear();
    this.mergeSeqs.clear();
    this.lastPrompts.clear();
    this.touch('tasks');
    this.touch('merges');
    for (const id of [...this.permissions.keys()]) this.removePermission(id);
    this.daemonFleet = undefined;
    this.lastSeq = 0;
    this.loaded = false;
    this.touch('reset');
  }

  // ---------------------------------------------------------------- permissions

  addPermission(permission: PendingPermission): boolean {
    const known = this.permissions.get(permission.id);
    if (known) {
      // Known from its permission.asked event; now the request itself is here to answer.
      if (permission.viaRequest && !known.viaRequest) {
        known.viaRequest = true;
        this.touch('permissions');
      }
      return false;
    }
    this.permissions.set(permission.id, permission);
    this.touch('permissions');
    this.permissionAddedEmitter.fire(permission);
    return true;
  }

  removePermission(id: string): boolean {
    const removed = this.permissions.delete(id);
    if (removed) {
      this.touch('permissions');
      this.permissionRemovedEmitter.fire(id);
    }
    return removed;
  }

  /** The requests pending in `session`, in the order they came. */
  permissionsOf(session: string): PendingPermission[] {
    return this.permissions.under('session', session);
  }

  // ---------------------------------------------------------------- events

  /** Apply one event of the log. Events at or below lastSeq are duplicates and are ignored. */
  apply(event: Event): ApplyResult {
    const result: ApplyResult = { applied: false, staleSessions: [], staleAgents: false, staleMerges: false };
    if (event.seq <= this.lastSeq) return result;
    this.lastSeq = event.seq;
    result.applied = true;
    const data = event.data ?? {};
    const id = event.session ?? undefined;
    const session = id ? this.sessions.get(id) : undefined;
    const stale = (): void => {
      if (id) result.staleSessions.push(id);
    };
    if (session && id && event.kind.startsWith('turn.')) session.lastActivity = event.time;

    switch (event.kind) {
      case EventKinds.agentCreated:
      case EventKinds.agentUpdated:
        result.staleAgents = true;
        break;
      case EventKinds.agentRemoved:
        if (event.agent && this.agents.delete(event.agent)) this.touch('agents');
        break;
      case EventKinds.agentProcess: {
        const agent = event.agent ? this.agents.get(event.agent) : undefined;
        const state = data.state;
        if (agent && typeof state === 'string') {
          agent.process = { ...agent.process, state: state as AgentInfo['process']['state'] };
          this.touch('agents');
        }
        break;
      }
      case EventKinds.sessionOpened:
        if (id && !session) {
          const created = event.time;
          this.sessions.set(id, {
            id,
            agent: event.agent ?? 'demo',
            root: str(data.root) ?? '',
            placement: 'here',
            title: str(data.title) ?? null,
            kind: isKind(data.sessionKind) ? data.sessionKind : 'main',
            parent: str(data.parent) ?? null,
            status: 'idle',
            statusSince: created,
            createdAt: created,
            lastActivity: created,
          });
          this.touch(`session:${id}`);
        }
        break;
      case EventKinds.sessionStatus:
        if (session && isStatus(data.status)) {
          session.status = data.status;
          session.statusSince = timeOf(data.since) ?? event.time;
          session.statusDetail = typeof data.detail === 'string' ? data.detail : null;
          if (data.status !== 'needs_you') this.dropPermissionsOf(session.id);
        } else {
          stale();
        }
        break;
      case EventKinds.sessionReopened:
        // Open again, as it was: the whole SessionInfo (a window that never saw it takes it too).
        if (id && data.info && typeof data.info === 'object') this.upsertSession(data.info as SessionInfo);
        break;
      case EventKinds.sessionClosed:
        if (session) {
          session.status = 'closed';
          session.statusSince = event.time;
          this.dropPermissionsOf(session.id);
        }
        break;
      case EventKinds.sessionPlan: {
        const plan = planOf(data);
        if (session && plan) session.plan = plan;
        else stale();
        break;
      }
      case EventKinds.sessionUsage: {
        const context = contextOf(data);
        const usage = obj(data.usage) as SessionUsage | undefined;
        if (session && (context || usage)) {
          if (context) session.context = context;
          if (usage) session.usage = usage;
        } else {
          stale();
        }
        break;
      }
      case EventKinds.sessionChanges: {
        const changes = changesOf(data);
        if (session && changes) session.changes = changes;
        else stale();
        break;
      }
      case EventKinds.sessionTitled:
        if (session && typeof data.title === 'string') session.title = data.title;
        else stale();
        break;
      case EventKinds.sessionAttention: {
        const attention = Array.isArray(data.attention) ? (data.attention as Attention[]) : undefined;
        if (session && attention) session.attention = attention;
        else stale();
        break;
      }
      case EventKinds.taskChanged: {
        const task = obj(data.task) as TaskInfo | undefined;
        if (task && typeof task.id === 'string' && typeof task.status === 'string') this.upsertTask(task);
        break;
      }
      case EventKinds.fleetSummary: {
        const fleet = (obj(data.fleet) ?? data) as unknown as Fleet;
        if (typeof fleet.open === 'number') {
          this.daemonFleet = fleet;
          this.touch('fleet');
        }
        break;
      }
      case EventKinds.mergeStep:
        if (id) {
          this.applyMergeStep(id, data);
          this.mergeSeqs.set(id, event.seq);
          result.staleMerges = true;
          this.touch(`session:${id}`);
        }
        break;
      case EventKinds.turnQueued:
        if (id && typeof data.prompt === 'string') this.lastPrompts.set(id, data.prompt);
        stale();
        break;
      case EventKinds.turnStarted:
      case EventKinds.turnEnded:
        stale();
        break;
      case EventKinds.permissionAsked: {
        const permission = str(data.permission);
        if (permission && id) {
          this.addPermission({
            id: permission,
            session: id,
            agent: event.agent ?? undefined,
            turn: event.turn ?? undefined,
            toolCall: (obj(data.toolCall) ?? {}),
            options: Array.isArray(data.options) ? (data.options as PermissionOption[]) : [],
            viaRequest: false,
          });
        }
        break;
      }
      case EventKinds.permissionAnswered: {
        const permission = str(data.permission);
        if (permission) this.removePermission(permission);
        break;
      }
      default:
        break;
    }
    if (id) this.touch(`session:${id}`);
    this.eventEmitter.fire(event);
    return result;
  }

  /** The daemon says every event up to `seq` has been sent (or superseded): carry on from there. */
  advance(seq: number): void {
    if (seq <= this.lastSeq) return;
    this.lastSeq = seq;
    this.touch('seq');
  }

  // ---------------------------------------------------------------- reading

  /** Open sessions, oldest first (stable while they work: the order "3 of 12" steps in). */
  openSessions(): SessionInfo[] {
    return [...this.sessions.values()].filter((session) => session.status !== 'closed').sort(byCreation);
  }

  /** The open side chats, tasks and threads started from `session`, oldest first. */
  childSessions(session: string): SessionInfo[] {
    return this.sessionsUnder(session)
      .filter((child) => child.status !== 'closed')
      .sort(byCreation);
  }

  /** Every session whose `parent` is `session`, closed ones too, in no particular order. */
  sessionsUnder(session: string): SessionInfo[] {
    return this.sessions.under('parent', session);
  }

  /** Every session of `agent`, closed ones too, in no particular order. */
  agentSessions(agent: string): SessionInfo[] {
    return this.sessions.under('agent', agent);
  }

  /** Tasks waiting in an inbox (`suggested`), newest first, as task/list gives them. */
  suggestedTasks(): TaskInfo[] {
    return [...this.tasks.values()]
      .filter((task) => task.status === 'suggested')
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || naturalCompare(b.id, a.id));
  }

  /** The fleet at a glance, counted from this model; the daemon's cost and timings when it sent them. */
  fleet(): Fleet {
    const byStatus: Record<string, number> = {};
    const attention: Record<string, number> = {};
    let open = 0;
    let cost = 0;
    for (const session of this.sessions.values()) {
      if (session.status === 'closed') continue;
      open += 1;
      byStatus[session.status] = (byStatus[session.status] ?? 0) + 1;
      for (const flag of session.attention ?? []) attention[flag] = (attention[flag] ?? 0) + 1;
      cost += session.context?.cost?.amount ?? 0;
    }
    const daemon = this.daemonFleet;
    return {
      open,
      byStatus,
      working: byStatus.working ?? 0,
      needsYou: byStatus.needs_you ?? 0,
      attention,
      cost: daemon?.cost ?? cost,
      turns: daemon?.turns,
      serialSeconds: daemon?.serialSeconds,
      wallSeconds: daemon?.wallSeconds,
    };
  }

  dispose(): void {
    this.coalescer.dispose();
    this.changeEmitter.dispose();
    this.eventEmitter.dispose();
    this.permissionAddedEmitter.dispose();
    this.permissionRemovedEmitter.dispose();
  }

  /** Deliver pending changes now instead of at the next tick. */
  flushChanges(): void {
    this.coalescer.flushNow();
  }

  /** What a merge.step says of the session's merge (its steps carry only what changed). */
  private applyMergeStep(session: string, data: Record<string, unknown>): void {
    const step = str(data.step);
    const branch = str(data.branch) ?? '';
    const known = this.merges.get(session);
    // A new merge of this session starts over from what its steps say.
    const entry: KnownMerge =
      known && (step !== 'queued' || !mergeDone(known)) && known.branch === branch
        ? { ...known }
        : { session, branch, base: str(data.base) ?? known?.base ?? '', strategy: str(data.strategy) ?? 'merge', status: 'queued' };
    if (step === 'queued') {
      Object.assign(entry, { status: 'queued', position: num(data.position) ?? entry.position ?? null, reason: null, conflicts: [], gateOutput: null, commit: null });
    } else if (step === 'started') {
      Object.assign(entry, { status: 'running', position: 0 });
      if (str(data.base)) entry.base = str(data.base)!;
      if (str(data.strategy)) entry.strategy = str(data.strategy)!;
      if ('gate' in data) entry.gate = str(data.gate) ?? null;
    } else if (step === 'gate-failed') {
      entry.gateOutput = str(data.output) ?? entry.gateOutput ?? null;
    } else if (step === 'conflict') {
      entry.conflicts = Array.isArray(data.files) ? (data.files as string[]) : entry.conflicts;
    } else if (step === 'failed') {
      Object.assign(entry, {
        status: 'failed',
        position: null,
        reason: str(data.reason) ?? entry.reason ?? null,
        conflicts: Array.isArray(data.conflicts) ? (data.conflicts as string[]) : (entry.conflicts ?? []),
        gateOutput: str(data.gateOutput) ?? entry.gateOutput ?? null,
      });
    } else if (step === 'merged') {
      Object.assign(entry, { status: 'merged', position: null, commit: str(data.commit) ?? entry.commit ?? null });
    } else if (step === 'cancelled') {
      Object.assign(entry, { status: 'cancelled', position: null, reason: str(data.reason) ?? null });
    }
    if (step) entry.step = step;
    this.merges.set(session, entry);
    this.touch('merges');
  }

  private dropPermissionsOf(session: string): void {
    for (const permission of this.permissionsOf(session)) this.removePermission(permission.id);
  }

  private touch(key: string): void {
    this.coalescer.add(key);
  }
}

function toChange(keys: Set<string>): ModelChange {
  const change: ModelChange = { sessions: new Set(), agents: false, permissions: false, tasks: false, merges: false, reset: false };
  for (const key of keys) {
    if (key.startsWith('session:')) change.sessions.add(key.slice('session:'.length));
    else if (key === 'agents') change.agents = true;
    else if (key === 'permissions') change.permissions = true;
    else if (key === 'tasks') change.tasks = true;
    else if (key === 'merges') change.merges = true;
    else if (key === 'reset') change.reset = true;
  }
  return change;
}

export function byCreation(a: SessionInfo, b: SessionInfo): number {
  return a.createdAt.localeCompare(b.createdAt) || naturalCompare(a.id, b.id);
}

/** s2 before s10. */
export function naturalCompare(a: string, b: string): number {
  return a.localeCompare(b, undefined, { numeric: true });
}

function isStatus(value: unknown): value is SessionStatus {
  return typeof value === 'string' && (ALL_STATUSES as string[]).includes(value);
}

const KINDS: SessionKind[] = ['main', 'side', 'task', 'thread'];

function isKind(value: unknown): value is SessionKind {
  return typeof value === 'string' && (KINDS as string[]).includes(value);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' ? value : undefined;
}

function obj(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/** Epoch seconds (as session.status sends `since`) or an ISO string, as ISO. */
function timeOf(value: unknown): string | undefined {
  if (typeof value === 'number') return new Date(value * 1000).toISOString();
  return str(value);
}

function planOf(data: Record<string, unknown>): Plan | undefined {
  const plan = obj(data.plan) ?? data;
  if (!Array.isArray(plan.entries)) return undefined;
  const entries = plan.entries as Plan['entries'] & object[];
  const done = entries.filter((entry) => entry.status === 'completed').length;
  return {
    ...(plan as Plan),
    entries,
    done: typeof plan.done === 'number' ? plan.done : done,
    total: typeof plan.total === 'number' ? plan.total : entries.length,
    current: str(plan.current) ?? entries.find((entry) => entry.status === 'in_progress')?.content ?? null,
  };
}

function contextOf(data: Record<string, unknown>): ContextFill | undefined {
  const context = obj(data.context) ?? data;
  if (typeof context.used !== 'number' || typeof context.size !== 'number') return undefined;
  return withContextPercent(context as unknown as ContextFill);
}

function changesOf(data: Record<string, unknown>): Changes | undefined {
  const changes = obj(data.changes) ?? data;
  return Array.isArray(changes.files) ? (changes) : undefined;
}

function withContextPercent(context: ContextFill): ContextFill {
  if (typeof context.percent === 'number' || context.size <= 0) return context;
  return { ...context, percent: (100 * context.used) / context.size };
}

function withPercent(session: SessionInfo): SessionInfo {
  return session.context ? { ...session, context: withContextPercent(session.context) } : session;
}
