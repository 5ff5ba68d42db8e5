import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { Sessiond, type SessiondOptions } from '../../src/protocol/live';
import { connectSocket } from '../../src/protocol/transport';
import type { Daemon } from './daemon';

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
