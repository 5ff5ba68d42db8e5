/**
 * How a client reaches the daemon: its unix socket, or `sessiond stdio`, which
 * relays to that socket and starts the daemon first when none runs.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Readable, Writable } from 'node:stream';

/** An open byte stream to the daemon. */
export interface Transport {
  readonly input: Readable;
  readonly output: Writable;
  /** For messages to a person: "socket /run/…/sessiond.sock" or "sessiond stdio (pid 42)". */
  readonly description: string;
  /** It started a daemon in place of one that died (its socket left behind, refusing connections). */
  readonly replacedDeadDaemon?: boolean;
  dispose(): void;
}

/**
 * When a connection attempt may start a daemon (through `sessiond stdio`) if none answers:
 * `ifSet` as the setting sessiond.startDaemon says (the first connection); `afterCrash` only in
 * place of one that died, its socket file left behind, never where a daemon was stopped (a daemon
 * that stops removes its socket): after a dropped connection; `now` whatever the setting (the
 * person asked: "Start the Daemon", "Restart the Daemon").
 */
export type StartRule = 'ifSet' | 'afterCrash' | 'now';

/** No daemon runs and none may be started: the one there was stopped (its socket removed). */
export class DaemonStoppedError extends Error {
  constructor(readonly socket: string) {
    super(`the sessiond daemon was stopped (no socket at ${socket}); the extension starts none until asked`);
    this.name = 'DaemonStoppedError';
  }
}

export interface TransportOptions {
  /** The daemon's unix socket; default: where the daemon puts it (see `defaultSocketPath`). */
  socket?: string;
  /** The `sessiond` executable, spawned as `sessiond stdio` when the socket does not answer. */
  sessiondPath?: string;
  /** Whether to start the daemon (through `sessiond stdio`) when nothing answers at the socket (the setting). */
  startDaemon?: boolean;
  /** When this attempt may start one (default `ifSet`); see StartRule. */
  start?: StartRule;
  env?: NodeJS.ProcessEnv;
  /** Lines the spawned `sessiond stdio` writes to stderr. */
  onStderr?: (line: string) => void;
}

/** Where the daemon listens by default, as sessiond.protocol.paths computes it. */
export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SESSIOND_SOCKET) return env.SESSIOND_SOCKET;
  if (env.SESSIOND_HOME) return path.join(env.SESSIOND_HOME, 'run', 'sessiond.sock');
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime && existsSync(runtime)) return path.join(runtime, 'sessiond', 'sessiond.sock');
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  return path.join(os.tmpdir(), `sessiond-${uid}`, 'sessiond.sock');
}

/** Connect to a unix socket; rejects with the socket error (ENOENT, ECONNREFUSED) when nobody listens. */
export function connectSocket(socketPath: string): Promise<Transport> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    const onError = (error: Error): void => {
      socket.destroy();
      reject(error);
    };
    socket.once('error', onError);
    socket.once('connect', () => {
      socket.off('error', onError);
      // Later errors surface as the connection closing; keep them from becoming uncaught.
      socket.on('error', () => socket.destroy());
      resolve({
        input: socket,
        output: socket,
        description: `socket ${socketPath}`,
        dispose: () => socket.destroy(),
      });
    });
  });
}

/** Spawn `sessiond stdio [--socket PATH]` and talk through its stdin/stdout. */
export function spawnStdio(options: TransportOptions): Promise<Transport> {
  const command = options.sessiondPath || 'sessiond';
  const args = ['stdio', ...(options.socket ? ['--socket', options.socket] : [])];
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    child.once('error', (error) =>
      reject(new Error(`could not run \`${command} stdio\`: ${error.message}; set sessiond.path to the sessiond executable`)),
    );
    let pending = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) options.onStderr?.(line);
    });
    child.once('spawn', () =>
      resolve({
        input: child.stdout,
        output: child.stdin,
        description: `${command} stdio (pid ${child.pid})`,
        dispose: () => {
          child.stdin.end();
          if (child.exitCode === null) child.kill('SIGTERM');
        },
      }),
    );
  });
}

const NOBODY_THERE = new Set(['ENOENT', 'ECONNREFUSED']);

/**
 * The socket when a daemon answers there; otherwise `sessiond stdio` when allowed to start one
 * (it starts the daemon and relays; see StartRule); otherwise an error saying what to do
 * (a `DaemonStoppedError` when the daemon was stopped and may not be started again now).
 */
export async function openTransport(options: TransportOptions): Promise<Transport> {
  const socketPath = options.socket || defaultSocketPath(options.env);
  const rule = options.start ?? 'ifSet';
  let code: string;
  try {
    return await connectSocket(socketPath);
  } catch (error) {
    code = (error as NodeJS.ErrnoException).code ?? '';
    if (!NOBODY_THERE.has(code)) throw error;
  }
  if (rule === 'afterCrash' && code === 'ENOENT') throw new DaemonStoppedError(socketPath);
  if (rule !== 'now' && !options.startDaemon) {
    throw new Error(
      `no sessiond daemon answers at ${socketPath} (${code}); start one with \`sessiond serve\`, ` +
        'or enable the setting sessiond.startDaemon',
    );
  }
  const transport = await spawnStdio({ ...options, socket: options.socket || undefined });
  return rule === 'afterCrash' ? { ...transport, replacedDeadDaemon: true } : transport;
}
