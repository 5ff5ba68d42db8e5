/**
 * What a changed file held at its session's base: the git tree the daemon
 * recorded when the session first ran (`Changes.base`). Read with the git CLI
 * in the session's root; no `vscode` import, so node tests run it.
 */
import { execFile } from 'node:child_process';

export interface BaseQuery {
  root: string;
  base: string | null;
  /** Relative to the root, or absolute; null for a file the session added. */
  path: string | null;
}

export async function readBaseContent(query: BaseQuery): Promise<string> {
  if (query.path === null) return ''; // added by the session: nothing at the base
  if (!query.base) return '';
  if (query.base === 'snapshot') {
    throw new Error(
      'this session is not in a git repository: the daemon counted its changes against a snapshot, ' +
        'whose content it does not offer to editors',
    );
  }
  // `./path` is relative to the root when the base is a tree of the whole repository; a tree
  // of the root itself takes the plain path.
  if (query.path.startsWith('/')) {
    throw new Error(`${query.path} is outside the session's root: the daemon keeps no base content for it`);
  }
  const candidates = [`./${query.path}`, query.path];
  let lastError: unknown;
  for (const candidate of candidates) {
    try {
      return await git(query.root, ['show', `${query.base}:${candidate}`]);
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`could not read ${query.path} at base ${query.base} in ${query.root}: ${String(lastError)}`);
}

function git(cwd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(stderr.trim() || error.message));
      else resolve(stdout);
    });
  });
}
