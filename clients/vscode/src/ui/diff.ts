/** Where the two sides of a changed file's diff come from. */
import * as path from 'node:path';
import type { ChangedFile, SessionInfo } from '../protocol/types';

export const BASE_SCHEME = 'sessiond-base';

export interface DiffTarget {
  /** Absolute path of the file as it is now. */
  current: string;
  /** Query of the base side's virtual document (read by the base content provider). */
  base: { root: string; base: string | null; path: string | null };
  title: string;
  /** The file is gone now: show the right side empty. */
  deleted: boolean;
}

export function diffTarget(session: SessionInfo, file: ChangedFile): DiffTarget {
  const current = path.isAbsolute(file.path) ? file.path : path.join(session.root, file.path);
  const basePath = file.kind === 'added' ? null : (file.oldPath ?? file.path);
  const against = session.changes?.base;
  return {
    current,
    base: { root: session.root, base: against ?? null, path: basePath },
    title: `${path.basename(file.path)} (${session.title || session.id}: ${against ? 'base' : 'empty'} ↔ now)`,
    deleted: file.kind === 'deleted',
  };
}
