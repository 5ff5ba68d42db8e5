/** The transcript as a read-only text document. */
import type { SessionInfo, TranscriptLine } from '../protocol/types';
import { sessionName, STATUS_LABELS } from './format';

export const TRANSCRIPT_SCHEME = 'sessiond-transcript';

/** The document path of a session's transcript: `/s1/fix tests.transcript`. */
export function transcriptPath(session: string, title?: string | null): string {
  const name = (title || session).replace(/[/\\]/g, '_');
  return `/${encodeURIComponent(session)}/${name}.transcript`;
}

/** The session id from a transcript document path. */
export function sessionOfTranscriptPath(path: string): string | undefined {
  const match = /^\/([^/]+)\//.exec(path);
  return match ? decodeURIComponent(match[1]) : undefined;
}

/** Each role's mark; `status` (a daemon's line for a turn that did not complete) stands out. */
const PREFIX: Record<string, string> = {
  user: '> ',
  agent: '',
  thought: '  … ',
  tool: '  ⚙ ',
  status: '■ turn ',
};

export interface TranscriptHeader {
  session: SessionInfo | undefined;
  sessionId: string;
  total: number;
  shown: number;
  live: boolean;
  note?: string;
  /** The permission requests the session waits on now (their questions), marked at the end. */
  waiting?: string[];
}

/** The line between two turns. */
export const TURN_SEPARATOR = '─'.repeat(40);

export function renderTranscript(lines: TranscriptLine[], header: TranscriptHeader): string {
  const { session } = header;
  const head = [
    `# ${session ? sessionName(session) : header.sessionId}${session ? ` · ${session.agent} · ${STATUS_LABELS[session.status]}` : ''}`,
    header.total > header.shown
      ? `# the last ${header.shown} of ${header.total} lines${header.live ? ', following live' : ''}`
      : `# ${header.total} lines${header.live ? ', following live' : ''}`,
  ];
  if (!header.live) head.push('# no longer following: run "sessiond: Open Transcript" again to catch up');
  if (header.note) head.push(`# ${header.note}`);
  const body: string[] = [];
  let turn: string | null | undefined;
  for (const line of lines) {
    if (line.role === 'user' && line.turn !== turn && body.length) body.push('', TURN_SEPARATOR);
    turn = line.turn;
    body.push((PREFIX[line.role] ?? '') + line.text);
  }
  for (const question of header.waiting ?? []) {
    body.push('', `⏸ waiting for you: ${question} (answer from its notification or its row in the Sessions view)`);
  }
  return [...head, '', ...body, ''].join('\n');
}
