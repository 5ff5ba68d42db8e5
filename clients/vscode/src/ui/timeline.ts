/**
 * The run's timeline (`sessiond runs R --html`, or the last hour through `sessiond trace --html`):
 * which command line writes it, and what its tab is called. Pure: no `vscode` here.
 */
import type { SessionInfo } from '../protocol/types';

/** The run to draw: the session's, when it has one; else none (the last hour). */
export function timelineRun(session: SessionInfo | undefined): string | undefined {
  return session?.run ?? undefined;
}

/** `sessiond` arguments that write the timeline of `run` (or of the last hour) as HTML to `file`. */
export function timelineArgs(run: string | undefined, file: string, socket?: string): string[] {
  const where = socket ? ['--socket', socket] : [];
  return run ? ['runs', run, '--html', file, ...where] : ['trace', '--last', '1h', '--html', file, ...where];
}

/** The tab's title: "sessiond timeline · r-1f2e" or "sessiond timeline · last hour". */
export function timelineTitle(run: string | undefined): string {
  return `sessiond timeline · ${run ?? 'last hour'}`;
}
