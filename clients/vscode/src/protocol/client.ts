/**
 * One JSON-RPC connection to the daemon, typed by the generated schema.
 *
 * It does the LSP lifecycle (`initialize`/`initialized`, `shutdown`/`exit`),
 * answers `window/workDoneProgress/create`, and hands the daemon's
 * notifications and requests to whoever listens. It knows nothing of a model
 * or a UI; `Sessiond` (live.ts) builds those on top.
 */
import {
  CancellationToken,
  createMessageConnection,
  Emitter,
  ErrorCodes as RpcErrorCodes,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
  type Event,
  type Message,
  type MessageConnection,
  type MessageWriter,
} from 'vscode-jsonrpc/node';
import { ErrorCodes } from './errors';
import { ClientRequests, Lsp, Methods, Notifications } from './methods';
import type { Transport } from './transport';
import type {
  DaemonStatus,
  StopResult,
  EventsNotifyParams,
  MethodName,
  ParamsOf,
  PermissionRequestParams,
  PermissionRequestResult,
  ResultOf,
} from './types';

export interface ClientOptions {
  /** Sent as initializationOptions.clientName. */
  clientName: string;
  /** Ask the daemon to send this client `session/requestPermission`. */
  answersPermissions?: boolean;
  /** Declare window.workDoneProgress, so the daemon reports this client's turns through `$/progress`. */
  workDoneProgress?: boolean;
  /** The daemon's TCP token (TCP only). */
  token?: string;
}

/** A `$/progress` value of LSP work-done progress. */
export interface WorkDoneProgressValue {
  kind: 'begin' | 'report' | 'end';
  title?: string;
  message?: string;
  percentage?: number;
  cancellable?: boolean;
}

export interface ProgressNotice {
  token: string | number;
  value: WorkDoneProgressValue;
}

/** The old daemon's way of saying a subscription fell behind; newer daemons send `resync`. */
export type EventsNotice = EventsNotifyParams & { overflow?: string };

export type PermissionHandler = (
  params: PermissionRequestParams,
  token: CancellationToken,
) => Promise<PermissionRequestResult>;

/** What answers the daemon's requests from the first message on (see `SessiondClient.connect`). */
export interface ConnectHandlers {
  /** Answers `session/requestPermission`; without one the daemon is told this client has none. */
  permissions?: PermissionHandler;
}

export interface ServerInfo {
  name?: string;
  version?: string;
  /** The methods the daemon says it serves. */
  methods: string[];
}

interface InitializeResult {
  serverInfo?: { name?: string; version?: string };
  capabilities?: { experimental?: { sessiond?: { methods?: string[] } } };
}

/** After the connection ends, how long answers already received have to reach their requests. */
const ANSWERS_GRACE_MS = 1000;

export class SessiondClient {
  private readonly closeEmitter = new Emitter<void>();
  private readonly eventsEmitter = new Emitter<EventsNotice>();
  private readonly progressEmitter = new Emitter<ProgressNotice>();
  private permissionHandler: PermissionHandler | undefined;
  private closed = false;
  private resolveClosed!: () => void;
  /** Fails each request still waiting for its answer: vscode-jsonrpc leaves them pending when the stream ends. */
  private readonly inFlight = new Set<() => void>();
  server: ServerInfo = { methods: [] };

  /** The connection ended: the daemon stopped, the socket broke, or `dispose` was called. */
  readonly onClose: Event<void> = this.closeEmitter.event;
  /** Resolves once the connection has ended (at once, when it already has): `onClose` as a promise that cannot be missed. */
  readonly whenClosed: Promise<void> = new Promise((resolve) => (this.resolveClosed = resolve));
  /** `events/notify` from the daemon. */
  readonly onEvents: Event<EventsNotice> = this.eventsEmitter.event;
  /** `$/progress` for this client's turns. */
  readonly onProgress: Event<ProgressNotice> = this.progressEmitter.event;

  private constructor(
    private readonly connection: MessageConnection,
    private readonly transport: Transport,
    handlers: ConnectHandlers,
  ) {
    // Set before the connection listens: the daemon sends the permission requests already
    // waiting right after `initialize`, before connect() has even returned.
    this.permissionHandler = handlers.permissions;
    connection.onNotification(Notifications.eventsNotify, (params: EventsNotice) => {
      this.eventsEmitter.fire(params);
    });
    connection.onUnhandledProgress((params) => {
      this.progressEmitter.fire({ token: params.token, value: params.value as WorkDoneProgressValue });
    });
    // Tokens are the daemon's to choose; accepting them is all that is asked.
    connection.onRequest(Lsp.workDoneProgressCreate, () => null);
    connection.onRequest(
      ClientRequests.requestPermission,
      async (params: PermissionRequestParams, token: CancellationToken) => {
        if (!this.permissionHandler) {
          return new ResponseError(ErrorCodes.METHOD_NOT_FOUND, 'this client has no permission handler');
        }
        return this.permissionHandler(params, token);
      },
    );
    connection.onClose(() => this.markClosed());
    connection.onError(() => undefined);
    transport.input.once('close', () => this.markClosed());
    transport.input.once('end', () => this.markClosed());
    connection.listen();
  }

  /**
   * Open a connection over `transport` and run the `initialize` handshake. `handlers` are in
   * place before the first message is read, so nothing the daemon sends at once is missed.
   */
  static async connect(transport: Transport, options: ClientOptions, handlers: ConnectHandlers = {}): Promise<SessiondClient> {
    const made: { client?: SessiondClient } = {};
    const connection = createMessageConnection(
      new StreamMessageReader(transport.input),
      new ClosingWriter(new StreamMessageWriter(transport.output), () => made.client?.dispose()),
    );
    const client = (made.client = new SessiondClient(connection, transport, handlers));
    // A `sessiond stdio` that exits before answering (it could not reach or start a daemon; its
    // stderr says why) fails the handshake like any request the end of the stream leaves waiting.
    const closedEarly = (): Error => new Error(`${transport.description} closed the connection before answering initialize`);
    try {
      await client.initialize(options, closedEarly);
    } catch (error) {
      client.dispose();
      // A failed write disposes the connection, which rejects the request with vscode-jsonrpc's words.
      if (error instanceof ResponseError && error.code === RpcErrorCodes.PendingResponseRejected) throw closedEarly();
      throw error;
    }
    return client;
  }

  private async initialize(options: ClientOptions, closedEarly: () => Error): Promise<void> {
    const result = await this.track<InitializeResult>(Lsp.initialize, closedEarly, {
      processId: process.pid,
      clientInfo: { name: options.clientName },
      rootUri: null,
      capabilities: { window: { workDoneProgress: options.workDoneProgress ?? false } },
      initializationOptions: {
        clientName: options.clientName,
        answersPermissions: options.answersPermissions ?? false,
        ...(options.token ? { token: options.token } : {}),
      },
    });
    this.server = {
      name: result.serverInfo?.name,
      version: result.serverInfo?.version,
      methods: result.capabilities?.experimental?.sessiond?.methods ?? [],
    };
    await this.connection.sendNotification(Lsp.initialized, {});
  }

  get isClosed(): boolean {
    return this.closed;
  }

  get description(): string {
    return this.transport.description;
  }

  /** This connection started a daemon in place of one that died (see Transport.replacedDeadDaemon). */
  get replacedDeadDaemon(): boolean {
    return this.transport.replacedDeadDaemon ?? false;
  }

  /** A request of the daemon's, typed by the schema. A cancelled token sends `$/cancelRequest`. */
  request<M extends MethodName>(method: M, params: ParamsOf<M>, token?: CancellationToken): Promise<ResultOf<M>> {
    if (this.closed) return Promise.reject(new Error(`not connected to sessiond (${method})`));
    const lost = () => new Error(`the connection to sessiond closed before it answered ${method}`);
    return this.track<ResultOf<M>>(method, lost, params, token);
  }

  /** Send a request; if the connection ends before its answer, fail it with `lost()`. */
  private track<R>(method: string, lost: () => Error, params: unknown, token?: CancellationToken): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const fail = (): void => reject(lost());
      this.inFlight.add(fail);
      this.connection
        .sendRequest<R>(method, params, token ?? CancellationToken.None)
        .then(resolve, reject)
        .finally(() => this.inFlight.delete(fail));
    });
  }

  /** Who answers `session/requestPermission`; see ClientOptions.answersPermissions. */
  setPermissionHandler(handler: PermissionHandler | undefined): void {
    this.permissionHandler = handler;
  }

  /** `daemon/status`: the daemon's pid, version, socket, what it holds. */
  daemonStatus(): Promise<DaemonStatus> {
    return this.request(Methods.daemonStatus, {});
  }

  /**
   * `daemon/stop`: the daemon answers with its pid and the turns it will cancel, then stops as
   * on SIGTERM (turns cancelled and answered, agents stopped), closes every connection (this
   * one too: await `whenClosed` for that) and exits.
   */
  stopDaemon(): Promise<StopResult> {
    return this.request(Methods.daemonStop, {});
  }

  /** Ask the daemon to cancel the turn behind a work-done progress token. */
  cancelProgress(token: string | number): void {
    if (!this.closed) void this.connection.sendNotification(Lsp.workDoneProgressCancel, { token });
  }

  /** `shutdown` and `exit`, then close; the daemon keeps running for everyone else. */
  async close(): Promise<void> {
    if (!this.closed) {
      try {
        await Promise.race([
          this.connection.sendRequest(Lsp.shutdown),
          new Promise((resolve) => setTimeout(resolve, 2000).unref()),
        ]);
        await this.connection.sendNotification(Lsp.exit);
      } catch {
        // The daemon went away first: nothing left to say goodbye to.
      }
    }
    this.dispose();
  }

  dispose(): void {
    this.markClosed();
    this.connection.dispose();
    this.transport.dispose();
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    // vscode-jsonrpc hands received messages on one per tick, so an answer that came just before
    // the end may still be on its way to its request: fail only what is still waiting a moment later.
    const waiting = [...this.inFlight];
    this.inFlight.clear();
    if (waiting.length) setTimeout(() => waiting.forEach((lost) => lost()), ANSWERS_GRACE_MS);
    this.resolveClosed();
    this.closeEmitter.fire();
  }
}


/**
 * The stream writer, except that a failed write closes the connection instead
 * of rejecting. vscode-jsonrpc 8 rethrows a request's failed write inside an
 * async Promise executor, where no caller can catch it: a write racing the
 * socket's close (the daemon going away, a reconnect) became an unhandled
 * rejection. A write that fails means the connection is gone; disposing it
 * rejects every pending request, as any dropped connection does.
 */
class ClosingWriter implements MessageWriter {
  constructor(
    private readonly inner: MessageWriter,
    private readonly onFailure: (error: unknown) => void,
  ) {}

  get onError(): MessageWriter['onError'] {
    return this.inner.onError;
  }

  get onClose(): MessageWriter['onClose'] {
    return this.inner.onClose;
  }

  write(message: Message): Promise<void> {
    return this.inner.write(message).catch((error: unknown) => this.onFailure(error));
  }

  end(): void {
    this.inner.end();
  }

  dispose(): void {
    this.inner.dispose();
  }
}
