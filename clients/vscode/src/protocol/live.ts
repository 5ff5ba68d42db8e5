/**
 * A live view of the daemon: one connection (re-made when it drops), one
 * subscription to the event log, one `FleetModel` kept current, and the
 * permission requests and work-done progress of this client.
 *
 * Replay: the model remembers the last seq it reflects; after a dropped
 * connection or a daemon restart the subscription is made again with
 * `since` set to it, so the model sees every later event once, in order.
 */
import { CancellationToken, Emitter, ResponseError, type Event as Listen } from 'vscode-jsonrpc/node';
import { SessiondClient, type ClientOptions, type EventsNotice, type ProgressNotice } from './client';
import { Coalescer } from './coalesce';
import { describeError, ErrorCodes, isError } from './errors';
import { Methods } from './methods';
import { FleetModel, type PendingPermission } from './model';
import { DaemonStoppedError, type StartRule, type Transport } from './transport';
import type {
  DaemonStatus,
  MergeEntry,
  MergeParams,
  StopResult,
  MethodName,
  ParamsOf,
  PermissionRequestParams,
  PermissionRequestResult,
  ResultOf,
  SessionInfo,
  SessionStatus,
  SideResult,
  TaskInfo,
  TurnResult,
} from './types';

/**
 * `idle`: not started (waiting for a daemon, the view or a command); `starting`: the first
 * attempt; `disconnected`: the connection dropped or failed and is being made again;
 * `stopped`: the daemon was stopped on purpose (`sessiond stop`): connects to one that starts,
 * starts none until asked (`startDaemon()`).
 */
export type ConnectionState = 'idle' | 'starting' | 'connected' | 'disconnected' | 'stopped' | 'disposed';

export interface ReconnectOptions {
  /** First delay after a failed or dropped connection; it grows by half each time. */
  minDelayMs?: number;
  maxDelayMs?: number;
  /** Awaited before each new attempt after a drop (tests hold the client away with it). */
  beforeAttempt?: () => Promise<void>;
}

const STOPPED = 'the extension stopped its connection to sessiond';

/** How one connection attempt ended: connected (the model loaded), or why not. */
interface AttemptOutcome {
  attempt: number;
  client?: SessiondClient;
  error?: string;
}

export interface SessiondOptions {
  /** A new byte stream to the daemon; `start` says whether it may start one (see StartRule). */
  openTransport: (start: StartRule) => Promise<Transport>;
  client: ClientOptions;
  reconnect?: ReconnectOptions;
  /** Model changes are delivered at most this often. */
  coalesceMs?: number;
  /** Sessions marked stale are refetched after this delay, together. */
  refreshDelayMs?: number;
}

/** A restart of the daemon that went through: what `daemon/stop` answered, and the new daemon's pid. */
export interface DaemonRestart {
  /** The stopped daemon's pid and the turns (running or queued) its stop cancelled. */
  stopped: StopResult;
  /** The pid of the daemon this client is connected to now. */
  pid: number;
}

/**
 * Where a restart stopped: `notConnected` (nothing was asked), `stop` (daemon/stop was not
 * answered or refused: nothing was stopped), `close` (the daemon said it stops but kept the
 * connection open), `reconnect` (it stopped; no new daemon answered).
 */
export type RestartStage = 'notConnected' | 'stop' | 'close' | 'reconnect';

export interface RestartFailure {
  stage: RestartStage;
  /** What went wrong, in a sentence without a final period. */
  reason: string;
  /** daemon/stop's answer, once there was one (stages `close` and `reconnect`). */
  stopped?: StopResult;
}

export class DaemonRestartError extends Error implements RestartFailure {
  constructor(
    readonly stage: RestartStage,
    readonly reason: string,
    readonly stopped?: StopResult,
  ) {
    super(`restarting the daemon failed (${stage}): ${reason}`);
    this.name = 'DaemonRestartError';
  }
}

/** How long each step of a restart may take: a daemon gets 45 s to stop, `sessiond stdio` 15 s to start one. */
const RESTART_STEP_MS = 60_000;

/** Past this many stale sessions one listing is cheaper than a session/get apiece. */
const LIST_INSTEAD_OF_GETS = 100;
const LIST_PAGE = 1000;

export class Sessiond {
  readonly model: FleetModel;
  private client: SessiondClient | undefined;
  private subscription: string | undefined;
  /** Notices that arrived before their subscription's id (or the initial listing) was known. */
  private buffered: EventsNotice[] | undefined;
  private stateValue: ConnectionState = 'idle';
  private disconnectedAt: number | undefined;
  private lastErrorValue: string | undefined;
  private readonly stateEmitter = new Emitter<ConnectionState>();
  private readonly progressEmitter = new Emitter<ProgressNotice>();
  private readonly pendingRequests = new Map<string, (result: PermissionRequestResult) => void>();
  private readonly staleSessions: Coalescer<string>;
  /**
   * Sessions marked stale while no connection was open: refetched once the next one has subscribed
   * (replay does not mark them again: their events were seen before the close).
   */
  private readonly refetchOnReconnect = new Set<string>();
  private readonly staleAgents: Coalescer<'agents'>;
  private readonly staleMerges: Coalescer<'merges'>;
  private connected: Promise<void>;
  private resolveConnected!: () => void;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  /** The next pause between attempts is skipped (reconnect() asked for an attempt now). */
  private attemptNow = false;
  /**
   * Whether the next attempt may start a daemon: as the setting says until the first connection;
   * after that only in place of one that died; whatever the setting once the person asks.
   */
  private startRule: StartRule = 'ifSet';
  /** Connection attempts begun so far, and whether one is under way (not yet connected or failed). */
  private attemptsBegun = 0;
  private attempting = false;
  private readonly attemptEmitter = new Emitter<AttemptOutcome>();

  readonly onDidChangeState: Listen<ConnectionState> = this.stateEmitter.event;
  /** `$/progress` of this client's turns (the daemon reports them when asked for workDoneProgress). */
  readonly onProgress: Listen<ProgressNotice> = this.progressEmitter.event;

  constructor(private readonly options: SessiondOptions) {
    this.model = new FleetModel(options.coalesceMs ?? 100);
    this.staleSessions = new Coalescer(options.refreshDelayMs ?? 150, (ids) => void this.refreshSessions(ids));
    this.staleAgents = new Coalescer(options.refreshDelayMs ?? 150, () => void this.refreshAgents());
    this.staleMerges = new Coalescer(options.refreshDelayMs ?? 150, () => void this.refreshMerges());
    this.connected = new Promise((resolve) => (this.resolveConnected = resolve));
    this.model.onDidRemovePermission((id) => {
      // Answered elsewhere, or its turn ended: our request's answer no longer matters.
      this.pendingRequests.get(id)?.({ optionId: null });
      this.pendingRequests.delete(id);
    });
  }

  private get disposed(): boolean {
    return this.stateValue === 'disposed';
  }

  get state(): ConnectionState {
    return this.stateValue;
  }

  /** Why the last connection attempt failed or the last connection dropped. */
  get lastError(): string | undefined {
    return this.lastErrorValue;
  }

  get connection(): SessiondClient | undefined {
    return this.client;
  }

  /** When the connection last dropped (ms since the epoch), while disconnected or stopped. */
  get disconnectedSince(): number | undefined {
    return this.stateValue === 'disconnected' || this.stateValue === 'stopped' ? this.disconnectedAt : undefined;
  }

  /** Whether start() was called. */
  get started(): boolean {
    return this.loop !== undefined;
  }

  /** Start connecting (and reconnecting whenever the connection drops). */
  start(): void {
    if (this.loop || this.disposed) return;
    this.setState('starting');
    this.loop = this.run();
  }

  /** Resolves once connected and the model is loaded; rejects after `timeoutMs`. */
  whenConnected(timeoutMs = 30_000): Promise<void> {
    if (this.stateValue === 'connected') return Promise.resolve();
    return withTimeout(this.connected, timeoutMs, () => `not connected to sessiond within ${timeoutMs} ms: ${this.lastErrorValue ?? 'still trying'}`);
  }

  /**
   * Drop the current connection at once and make a new one now, without waiting out the back-off
   * (the model stays, replay fills the gap). Resolves with the connection that attempt made, once
   * the model is loaded; rejects with why it failed (the loop keeps trying after either).
   */
  reconnect(): Promise<SessiondClient> {
    if (this.disposed) return Promise.reject(new Error(STOPPED));
    this.start(); // when not started: its first attempt begins now, and is the one asked for
    // An attempt under way that has no connection yet is the one asked for; one that has a
    // connection is dropped here, so the next attempt is.
    const ours = this.attempting && !this.client ? this.attemptsBegun : this.attemptsBegun + 1;
    const outcome = new Promise<SessiondClient>((resolve, reject) => {
      const subscription = this.attemptEmitter.event((ended) => {
        if (ended.attempt < ours) return;
        subscription.dispose();
        if (ended.client) resolve(ended.client);
        else reject(new Error(ended.error ?? 'the attempt failed'));
      });
    });
    if (ours > this.attemptsBegun) this.attemptNow = true;
    this.client?.dispose();
    this.wake?.();
    return outcome;
  }

  /**
   * Start a daemon (through `sessiond stdio`, whatever the setting sessiond.startDaemon) unless one
   * answers, and connect to it now: the person asked. Resolves as `reconnect()` does.
   */
  startDaemon(): Promise<SessiondClient> {
    this.startRule = 'now';
    return this.reconnect();
  }

  /**
   * Restart the daemon: `daemon/stop` (its turns end cancelled), wait until it has closed this
   * connection, then let the connection loop reconnect as after any drop: to the socket, else
   * through `sessiond stdio`, which starts a new daemon when none runs (with the setting
   * sessiond.startDaemon). Resolves once connected to a daemon with another pid and subscribed
   * again (replay brings the model what the stop changed); rejects with a `DaemonRestartError`
   * saying which step failed. Each step may take `stepTimeoutMs`.
   */
  async restartDaemon(stepTimeoutMs = RESTART_STEP_MS): Promise<DaemonRestart> {
    const client = this.client;
    if (!client || this.stateValue !== 'connected') {
      throw new DaemonRestartError('notConnected', `not connected to sessiond (${this.lastErrorValue ?? 'connecting'})`);
    }
    const { methods, version } = client.server;
    if (methods.length && !methods.includes(Methods.daemonStop)) {
      throw new DaemonRestartError('stop', `this daemon${version ? ` (${version})` : ''} has no ${Methods.daemonStop}: it is older than this extension`);
    }
    let stopped: StopResult;
    try {
      stopped = await client.stopDaemon();
    } catch (error) {
      throw new DaemonRestartError('stop', describeError(Methods.daemonStop, error));
    }
    // The person asked for a new one: the reconnect after this stop starts it (as the setting allows).
    this.startRule = 'ifSet';
    const seconds = Math.round(stepTimeoutMs / 1000);
    try {
      await withTimeout(client.whenClosed, stepTimeoutMs, () => `it had not closed the connection ${seconds} s after answering ${Methods.daemonStop}`);
    } catch (error) {
      throw new DaemonRestartError('close', errorText(error), stopped);
    }
    // The loop in run() reconnects on its own; wait for a connection to a daemon that is not the stopped one.
    const deadline = Date.now() + stepTimeoutMs;
    let previous = client;
    for (;;) {
      let next: SessiondClient;
      try {
        next = await this.nextConnection(previous, deadline - Date.now());
      } catch (error) {
        throw new DaemonRestartError('reconnect', `no daemon answered within ${seconds} s: ${errorText(error)}`, stopped);
      }
      let status: DaemonStatus | undefined;
      try {
        // A connection that drops before answering (undefined): wait for the next one.
        status = await Promise.race([next.daemonStatus(), next.whenClosed.then(() => undefined)]);
      } catch (error) {
        if (!next.isClosed) throw new DaemonRestartError('reconnect', `connected again, but ${describeError(Methods.daemonStatus, error)}`, stopped);
      }
      if (status && status.pid !== stopped.pid) return { stopped, pid: status.pid };
      previous = next;
    }
  }

  /** The first connection (made by run(), the model loaded) other than `previous`. */
  private nextConnection(previous: SessiondClient, timeoutMs: number): Promise<SessiondClient> {
    let subscription: { dispose(): void } | undefined;
    const connected = new Promise<SessiondClient>((resolve, reject) => {
      const check = (): void => {
        if (this.disposed) reject(new Error(STOPPED));
        else if (this.stateValue === 'connected' && this.client && this.client !== previous) resolve(this.client);
      };
      subscription = this.onDidChangeState(check);
      check();
    });
    return withTimeout(connected, Math.max(0, timeoutMs), () => this.lastErrorValue ?? 'still trying').finally(() => subscription?.dispose());
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.setState('disposed');
    this.wake?.();
    const client = this.client;
    this.client = undefined;
    await client?.close();
    this.staleSessions.dispose();
    this.staleAgents.dispose();
    this.staleMerges.dispose();
    this.model.dispose();
    this.attemptEmitter.fire({ attempt: Infinity, error: STOPPED });
    this.attemptEmitter.dispose();
    this.stateEmitter.dispose();
    this.progressEmitter.dispose();
  }

  // ---------------------------------------------------------------- requests

  request<M extends MethodName>(method: M, params: ParamsOf<M>, token?: CancellationToken): Promise<ResultOf<M>> {
    const client = this.client;
    if (!client || this.stateValue !== 'connected') {
      return Promise.reject(new Error(`not connected to sessiond (${this.lastErrorValue ?? 'connecting'}); ${method} was not sent`));
    }
    return client.request(method, params, token);
  }

  /** Run a turn; a cancelled token cancels it (the answer then has stop reason `cancelled`). */
  async prompt(session: string, prompt: string, token?: CancellationToken, turnId?: string): Promise<TurnResult> {
    this.model.lastPrompts.set(session, prompt);
    return this.request(Methods.sessionPrompt, { session, prompt, ...(turnId ? { turnId } : {}) }, token);
  }

  /** Answer a permission request: through our pending `session/requestPermission` if there is one. */
  async answerPermission(id: string, optionId: string | null): Promise<void> {
    const viaRequest = this.pendingRequests.get(id);
    if (viaRequest) {
      this.pendingRequests.delete(id);
      viaRequest({ optionId });
    } else {
      await this.request(Methods.permissionAnswer, { permission: id, optionId });
    }
    this.model.removePermission(id);
  }

  /**
   * Open a side chat beside `session` and ask it `question`: a session of its own
   * (`kind: side`, `parent: session`) whose answer comes back; the main session is untouched.
   */
  async side(session: string, question: string, writable = false, token?: CancellationToken): Promise<SideResult> {
    const result = await this.request(Methods.sessionSide, { session, question, writable }, token);
    this.model.upsertSession(result.session);
    return result;
  }

  /** Accept a suggested task: it runs in a session of its own (`kind: task`); task.changed events follow it. */
  async acceptTask(task: string): Promise<TaskInfo> {
    const info = await this.request(Methods.taskAccept, { task });
    this.model.upsertTask(info);
    return info;
  }

  /** Dismiss a suggested task, saying why. */
  async dismissTask(task: string, reason: string): Promise<TaskInfo> {
    const info = await this.request(Methods.taskDismiss, { task, reason });
    this.model.upsertTask(info);
    return info;
  }

  /**
   * Ask for a worktree session's merge: it joins its repository's merge queue. The answer says it
   * is queued; `merge.step` events (applied to `model.merges`) follow it to its outcome.
   */
  async merge(params: MergeParams): Promise<MergeEntry> {
    this.model.forgetMerge(params.session);
    const entry = await this.request(Methods.mergeRequest, params);
    this.model.upsertMerge(entry);
    this.staleMerges.add('merges');
    return entry;
  }

  cancelProgress(token: string | number): void {
    this.client?.cancelProgress(token);
  }

  // ---------------------------------------------------------------- connecting

  private async run(): Promise<void> {
    const { minDelayMs = 100, maxDelayMs = 5000, beforeAttempt } = this.options.reconnect ?? {};
    let delay = minDelayMs;
    let attempt = 0;
    while (!this.disposed) {
      if (attempt > 0) {
        await this.pause(delay);
        delay = Math.min(maxDelayMs, delay * 1.5);
        if (beforeAttempt) await beforeAttempt();
        if (this.disposed) return;
      }
      attempt += 1;
      this.attemptsBegun += 1;
      this.attempting = true;
      const number = this.attemptsBegun;
      let client: SessiondClient | undefined;
      let stoppedOnPurpose = false;
      try {
        const transport = await this.options.openTransport(this.startRule);
        // The permission handler goes in with the connection: the daemon re-asks what is
        // waiting right after initialize, before connect() returns.
        client = await SessiondClient.connect(transport, this.options.client, {
          permissions: (params, token) => this.onPermissionRequest(params, token),
        });
        const closed = client.whenClosed;
        this.attach(client);
        await this.sync(client);
        if (client.isClosed) throw new Error('the connection closed while loading');
        delay = minDelayMs;
        this.lastErrorValue = undefined;
        // From now on a dropped connection starts a daemon only in place of one that died.
        this.startRule = 'afterCrash';
        this.setState('connected');
        this.resolveConnected();
        this.attempting = false;
        this.attemptEmitter.fire({ attempt: number, client });
        await closed;
        if (!this.disposed) this.lastErrorValue = `the connection to sessiond (${client.description}) closed`;
      } catch (error) {
        this.lastErrorValue = error instanceof Error ? error.message : String(error);
        stoppedOnPurpose = error instanceof DaemonStoppedError;
        client?.dispose();
        this.attempting = false;
        this.attemptEmitter.fire({ attempt: number, error: this.lastErrorValue });
      }
      if (this.client === client) this.client = undefined;
      this.subscription = undefined;
      this.buffered = undefined;
      this.forgetRequests();
      if (!this.disposed) {
        this.setState(stoppedOnPurpose ? 'stopped' : 'disconnected');
        this.connected = new Promise((resolve) => (this.resolveConnected = resolve));
      }
    }
  }

  private pause(ms: number): Promise<void> {
    if (this.attemptNow) {
      this.attemptNow = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }

  private attach(client: SessiondClient): void {
    this.client = client;
    client.onEvents((notice) => {
      this.onNotice(notice);
    });
    client.onProgress((notice) => {
      this.progressEmitter.fire(notice);
    });
  }

  /** Subscribe (with replay from the last seq seen), and load the state when there is none yet. */
  private async sync(client: SessiondClient): Promise<void> {
    this.buffered = [];
    const resuming = this.model.loaded;
    const subscribed = await client.request(
      Methods.eventsSubscribe,
      resuming ? { since: this.model.lastSeq } : { snapshot: true },
    );
    if (resuming && subscribed.head < this.model.lastSeq) {
      // The log is younger than what we saw: another daemon (a new home). Start over.
      await client.request(Methods.eventsUnsubscribe, { subscription: subscribed.subscription });
      this.model.forget();
      return this.sync(client);
    }
    this.subscription = subscribed.subscription;
    for (const id of this.refetchOnReconnect) this.staleSessions.add(id);
    this.refetchOnReconnect.clear();
    await this.refreshAgents(client);
    await this.refreshTasks(client);
    await this.refreshMerges(client);
    if (!resuming) {
      if (subscribed.snapshot) this.model.applySnapshot(subscribed.snapshot);
      else this.model.replaceSessions(await this.listSessions(client), subscribed.head);
    }
    const buffered = this.buffered;
    this.buffered = undefined;
    for (const notice of buffered) this.onNotice(notice);
  }

  private onNotice(notice: EventsNotice): void {
    if (this.buffered) {
      this.buffered.push(notice);
      return;
    }
    if (notice.subscription !== this.subscription) return;
    const model = this.model;
    if (notice.resync) {
      // A snapshot has no tasks: list them again.
      model.applySnapshot(notice.resync);
      void this.refreshTasks();
    }
    for (const event of notice.events) {
      const result = model.apply(event);
      for (const id of result.staleSessions) this.staleSessions.add(id);
      if (result.staleAgents) this.staleAgents.add('agents');
      if (result.staleMerges) this.staleMerges.add('merges');
    }
    if (typeof notice.through === 'number') model.advance(notice.through);
    if (notice.overflow) void this.resubscribe();
  }

  /** The daemon ended our subscription (we fell behind): carry on from the last seq we have. */
  private async resubscribe(): Promise<void> {
    const client = this.client;
    if (!client) return;
    this.subscription = undefined;
    // The new subscription's first events may come before its answer: held until we know its id.
    this.buffered = [];
    try {
      const subscribed = await client.request(Methods.eventsSubscribe, { since: this.model.lastSeq });
      this.subscription = subscribed.subscription;
    } catch (error) {
      this.lastErrorValue = `could not subscribe again after falling behind: ${String(error)}`;
      client.dispose();
    } finally {
      const buffered = this.buffered ?? [];
      this.buffered = undefined;
      for (const notice of buffered) this.onNotice(notice);
    }
  }

  private async listSessions(client: SessiondClient, status?: SessionStatus[]): Promise<SessionInfo[]> {
    const sessions: SessionInfo[] = [];
    let cursor: string | null | undefined = null;
    do {
      const page: ResultOf<'session/list'> = await client.request(Methods.sessionList, {
        cursor,
        limit: LIST_PAGE,
        ...(status ? { status } : {}),
      });
      sessions.push(...page.sessions);
      cursor = page.nextCursor;
    } while (cursor);
    return sessions;
  }

  private async refreshAgents(client = this.client): Promise<void> {
    if (!client || client.isClosed) return;
    try {
      this.model.setAgents((await client.request(Methods.agentList, {})).agents);
    } catch (error) {
      if (!client.isClosed) this.lastErrorValue = `agent/list failed: ${String(error)}`;
    }
  }

  /** Every task the daemon keeps (a daemon without task/list has none). */
  private async refreshTasks(client = this.client): Promise<void> {
    if (!client || client.isClosed || !client.server.methods.includes(Methods.taskList)) return;
    try {
      this.model.setTasks((await client.request(Methods.taskList, {})).tasks);
    } catch (error) {
      if (!client.isClosed) this.lastErrorValue = `task/list failed: ${String(error)}`;
    }
  }

  /** The merge queue (a daemon without merge/list has none). */
  private async refreshMerges(client = this.client): Promise<void> {
    if (!client || client.isClosed || !client.server.methods.includes(Methods.mergeList)) return;
    const asOf = this.model.lastSeq;
    try {
      this.model.setMerges((await client.request(Methods.mergeList, {})).entries, asOf);
    } catch (error) {
      if (!client.isClosed) this.lastErrorValue = `merge/list failed: ${String(error)}`;
    }
  }

  private async refreshSessions(ids: Set<string>): Promise<void> {
    const client = this.client;
    if (!client || client.isClosed) {
      for (const id of ids) this.refetchOnReconnect.add(id);
      return;
    }
    try {
      if (ids.size > LIST_INSTEAD_OF_GETS) {
        this.model.mergeSessions(await this.listSessions(client));
        return;
      }
      await Promise.all(
        [...ids].map(async (id) => {
          try {
            this.model.upsertSession(await client.request(Methods.sessionGet, { session: id }));
          } catch (error) {
            if (isError(error, 'SESSION_NOT_FOUND')) this.model.removeSession(id);
            else throw error;
          }
        }),
      );
    } catch (error) {
      // Cut off by the close: again shortly, on the connection after this one if there is one by
      // then (it may have subscribed already), else once one has.
      if (client.isClosed) for (const id of ids) this.staleSessions.add(id);
      else this.lastErrorValue = `refreshing sessions failed: ${String(error)}`;
    }
  }

  private onPermissionRequest(params: PermissionRequestParams, token: CancellationToken): Promise<PermissionRequestResult> {
    const permission: PendingPermission = {
      id: params.permission,
      session: params.session,
      agent: params.agent,
      turn: params.turn ?? undefined,
      toolCall: params.toolCall,
      options: params.options as unknown as PendingPermission['options'],
      viaRequest: true,
    };
    return new Promise((resolve, reject) => {
      this.pendingRequests.set(permission.id, resolve);
      token.onCancellationRequested(() => {
        // Another client answered first. (Or the connection that carried this request went: a
        // request for it again, on the next connection, may be here before that news; it stays.)
        if (this.pendingRequests.get(permission.id) !== resolve) return;
        this.pendingRequests.delete(permission.id);
        this.model.removePermission(permission.id);
        reject(new ResponseError(ErrorCodes.REQUEST_CANCELLED, 'answered by another client'));
      });
      this.model.addPermission(permission);
    });
  }

  /**
   * The connection that carried our `session/requestPermission` requests is gone: answers go
   * through permission/answer from now on (the daemon sends the requests again when we attach).
   */
  private forgetRequests(): void {
    this.pendingRequests.clear();
    for (const permission of this.model.permissions.values()) permission.viaRequest = false;
  }

  private setState(state: ConnectionState): void {
    if (this.stateValue === state) return;
    const away = (s: ConnectionState): boolean => s === 'disconnected' || s === 'stopped';
    if (away(state) && !away(this.stateValue)) this.disconnectedAt = Date.now();
    this.stateValue = state;
    this.stateEmitter.fire(state);
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function withTimeout<T>(promise: Promise<T>, ms: number, message: () => string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(message())), ms);
    timer.unref?.();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
