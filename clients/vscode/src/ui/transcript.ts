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
  /** Lines in the whole transcript (0: not known, as from a daemon without session/transcript). */
  total: number;
  /** Lines passed to be shown (the last ones of the transcript). */
  shown: number;
  live: boolean;
  /** Connected to the daemon (absent: taken as connected). Not connected, a followed document says it is not live. */
  connected?: boolean;
  note?: string;
  /** The permission requests the session waits on now (their questions), marked at the end. */
  waiting?: string[];
}

/**
 * "the 500 lines before these are not shown", or '' when the whole transcript is. Only what is left
 * out is counted: a count of the lines shown never matched the editor's (the header, the rules
 * between turns and the marks are lines too), and an older daemon gives no total at all.
 */
function leftOut(header: TranscriptHeader): string {
  const hidden = header.total - header.shown;
  if (hidden <= 0) return '';
  return hidden === 1 ? 'the line before these is not shown' : `the ${hidden} lines before these are not shown`;
}

/** The line between two turns. */
export const TURN_SEPARATOR = '─'.repeat(40);

/** A transcript's first line: the session's name, agent and status. */
export function transcriptHead(session: SessionInfo | undefined, sessionId: string): string {
  return `# ${session ? sessionName(session) : sessionId}${session ? ` · ${session.agent} · ${STATUS_LABELS[session.status]}` : ''}`;
}

/** Said instead of "following live" while the daemon is not connected. */
export const NOT_CONNECTED_NOTE = 'not connected: shown as it was; it follows live again once connected';

export function renderTranscript(lines: TranscriptLine[], header: TranscriptHeader): string {
  const head = [transcriptHead(header.session, header.sessionId)];
  const left = leftOut(header);
  if (header.live && header.connected === false) head.push(left ? `# ${NOT_CONNECTED_NOTE}; ${left}` : `# ${NOT_CONNECTED_NOTE}`);
  else if (header.live) head.push(left ? `# following live; ${left}` : '# following live');
  else head.push(...(left ? [`# ${left}`] : []), '# no longer following: run "sessiond: Open Transcript" again to catch up');
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
