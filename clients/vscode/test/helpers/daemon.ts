/**
 * A real sessiond daemon with the demo agent, in a SESSIOND_HOME of its own,
 * started the way the brief verified: `python -m sessiond.daemon --socket PATH`.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, watch } from 'node:fs';
import * as path from 'node:path';

/**
 * The extension's folder (clients/vscode), from this file's place in it: src and test compile to
 * out/src and out/test, so this file runs as out/test/helpers/daemon.js.
 */
export const EXTENSION_DIR = path.resolve(__dirname, '..', '..', '..');

/** The repository root: two folders above the extension (clients/vscode), as laid out in git. */
export const REPO_ROOT = path.resolve(EXTENSION_DIR, '..', '..');

/** The daemon's JSON Schema: $SESSIOND_SCHEMA, else protocol/schema/ of the repository. */
export const SCHEMA_FILE =
  process.env.SESSIOND_SCHEMA ?? path.join(REPO_ROOT, 'protocol', 'schema', 'sessiond.schema.json');

/** The python and `sessiond` of the repository's .venv (./dev test makes it), unless set. */
export const PYTHON = process.env.SESSIOND_PYTHON ?? path.join(REPO_ROOT, '.venv', 'bin', 'python');
export const SESSIOND = process.env.SESSIOND_BIN ?? path.join(REPO_ROOT, '.venv', 'bin', 'sessiond');

export interface Daemon {
  home: string;
  socket: string;
  env: NodeJS.ProcessEnv;
  /** SIGTERM, and wait for the process to exit. */
  stop(): Promise<void>;
  /** Start it again with the same home (same store, same event log). */
  restart(): Promise<void>;
  /** Stop it and remove its home. */
  destroy(): Promise<void>;
  /** Everything it wrote to stderr, for failure messages. */
  log(): string;
  /** The pid of the process started last. */
  pid(): number;
  /** Resolves with the exit code once the process started last has exited (however it was stopped). */
  exited(): Promise<number | null>;
}

/** A short home under /tmp: unix socket paths must stay under 108 bytes. */
export function tempHome(prefix = 'sdv-'): string {
  return mkdtempSync(path.join('/tmp', prefix));
}

export async function startDaemon(home = tempHome()): Promise<Daemon> {
  const socket = path.join(home, 'run', 'sessiond.sock');
  const env: NodeJS.ProcessEnv = { ...process.env, SESSIOND_HOME: home };
  delete env.SESSIOND_SOCKET;
  let child: ChildProcess | undefined;
  let pid = 0;
  let exited: Promise<number | null> = Promise.resolve(null);
  let stderr = '';

  async function launch(): Promise<void> {
    if (!existsSync(PYTHON)) throw new Error(`${PYTHON} is missing: run \`./dev test\` (or set SESSIOND_PYTHON) first`);
    const proc = spawn(PYTHON, ['-m', 'sessiond.daemon', '--socket', socket], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    child = proc;
    pid = proc.pid ?? 0;
    exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the daemon did not serve within 30 s; its stderr:\n${stderr}`)), 30_000);
      proc.stderr.setEncoding('utf8');
      proc.stderr.on('data', (chunk: string) => {
        stderr += chunk;
        if (stderr.includes('sessiond: serving on')) {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the daemon exited with ${code} before serving; its stderr:\n${stderr}`));
      });
    });
  }

  async function stop(): Promise<void> {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGTERM');
    // A daemon slow to stop is a daemon bug worth a stack: say so, then kill it.
    const slow = setTimeout(() => reportSlowStop(proc.pid!), 5_000);
    const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(slow);
    clearTimeout(timer);
  }

  await launch();
  return {
    home,
    socket,
    env,
    stop,
    restart: async () => {
      await stop();
      stderr += '--- restart ---\n';
      await launch();
    },
    destroy: async () => {
      await stop();
      rmSync(home, { recursive: true, force: true });
    },
    log: () => stderr,
    pid: () => pid,
    exited: () => exited,
  };
}

/**
 * Resolves once `file` no longer exists (a stopping daemon removes its socket last), watching
 * its folder; rejects after `timeoutMs`. For daemons that are not our children (started by
 * `sessiond stdio`), whose exit we cannot wait on.
 */
export function whenRemoved(file: string, timeoutMs = 60_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const watcher = watch(path.dirname(file), () => check());
    const timer = setTimeout(() => finish(new Error(`${file} was still there after ${timeoutMs} ms`)), timeoutMs);
    let done = false;
    function finish(error?: Error): void {
      if (done) return;
      done = true;
      clearTimeout(timer);
      watcher.close();
      if (error) reject(error);
      else resolve();
    }
    function check(): void {
      if (!existsSync(file)) finish();
    }
    check();
  });
}

function reportSlowStop(pid: number): void {
  const pySpy = path.join(path.dirname(PYTHON), 'py-spy');
  const header = `sessiond test helper: daemon pid ${pid} has not stopped 5 s after SIGTERM (it is killed at 20 s)`;
  if (!existsSync(pySpy)) {
    process.stderr.write(`${header}\n`);
    return;
  }
  execFile(pySpy, ['dump', '--pid', String(pid)], (error, stdout, stderr) => {
    process.stderr.write(`${header}; its stack:\n${error ? `${error.message}\n${stderr}` : stdout}\n`);
  });
}
