import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { SessiondClient } from '../../src/protocol/client';
import { Sessiond, withTimeout, type SessiondOptions } from '../../src/protocol/live';
import { connectSocket } from '../../src/protocol/transport';
import { whenRemoved, type Daemon } from './daemon';

/** A started Sessiond on the daemon's socket, with short delays so tests run fast. */
export function liveClient(daemon: Daemon, options: Partial<SessiondOptions> = {}, name = 'test'): Sessiond {
  const sessiond = new Sessiond({
    openTransport: () => connectSocket(daemon.socket),
    client: { clientName: name, workDoneProgress: true, answersPermissions: false, ...options.client },
    coalesceMs: 10,
    refreshDelayMs: 20,
    reconnect: { minDelayMs: 50, maxDelayMs: 500, ...options.reconnect },
    ...options,
  });
  sessiond.start();
  return sessiond;
}

/** A git repository with one commit holding a.txt ("hello\n"). */
export function gitRepo(parent: string, name = 'repo'): string {
  const root = path.join(parent, name);
  mkdirSync(root, { recursive: true });
  const git = (...args: string[]) => execFileSync('git', args, { cwd: root, stdio: 'pipe' });
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'test@example.invalid');
  git('config', 'user.name', 'test');
  writeFileSync(path.join(root, 'a.txt'), 'hello\n');
  git('add', 'a.txt');
  git('commit', '-q', '-m', 'base');
  return root;
}

/**
 * Stop whatever daemon serves `daemon.socket` (one `sessiond stdio` started is not our child),
 * wait until it has removed its socket, then remove the home.
 */
export async function destroyAll(daemon: Daemon, timeoutMs = 60_000): Promise<void> {
  if (existsSync(daemon.socket)) {
    try {
      const client = await SessiondClient.connect(await connectSocket(daemon.socket), { clientName: 'cleanup' });
      await client.stopDaemon();
      await withTimeout(client.whenClosed, timeoutMs, () => 'the daemon did not close the connection after daemon/stop');
    } catch (error) {
      if (!['ENOENT', 'ECONNREFUSED'].includes((error as NodeJS.ErrnoException).code ?? '')) throw error;
    }
    await whenRemoved(daemon.socket, timeoutMs);
  }
  await daemon.destroy();
}
