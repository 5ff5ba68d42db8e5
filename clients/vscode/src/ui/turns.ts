/**
 * A session's turns in hand (running and queued), and the questions and messages of the
 * commands that stop them or close the session. Pure; no `vscode` import.
 */
import type { SessionInfo } from '../protocol/types';
import { plural, sessionName } from './format';

export interface TurnsInHand {
  running: number;
  queued: number;
}

/** The turn running now (working, or waiting on a person) and those asked for and not started. */
export function turnsInHand(session: SessionInfo): TurnsInHand {
  const running = session.status === 'working' || session.status === 'needs_you' ? 1 : 0;
  const queued = session.queuedTurns ?? (session.status === 'queued' ? 1 : 0);
  return { running, queued };
}

/** "1 running, 2 queued", "1 running", "2 queued"; undefined with none. */
export function turnsLabel(session: SessionInfo): string | undefined {
  const { running, queued } = turnsInHand(session);
  const parts = [running ? `${running} running` : undefined, queued ? `${queued} queued` : undefined].filter(Boolean);
  return parts.length ? parts.join(', ') : undefined;
}

/** For a row or pick entry: "1 running, 2 queued" when turns wait (the status alone says "working"). */
export function queuedNote(session: SessionInfo): string | undefined {
  return turnsInHand(session).queued ? turnsLabel(session) : undefined;
}

/** "the running turn and 2 queued turns", "the running turn", "2 queued turns". */
function turnsPhrase({ running, queued }: TurnsInHand): string {
  const queuedPart = queued ? plural(queued, 'queued turn') : '';
  if (!running) return queuedPart;
  return queuedPart ? `its running turn and ${queuedPart}` : 'its running turn';
}

/**
 * The question before cancelling: always from the palette (the session was picked, not seen on a
 * row), from a row only when queued turns would go too. Undefined: cancel without asking.
 */
export function cancelQuestion(session: SessionInfo, fromPalette: boolean): string | undefined {
  const turns = turnsInHand(session);
  if (!fromPalette && !turns.queued) return undefined;
  const total = turns.running + turns.queued;
  return `Cancel ${plural(total, 'turn')} of ${sessionName(session)}: ${turnsPhrase(turns)}?`;
}

/** Said when a session picked to cancel has nothing to cancel. */
export function nothingToCancel(session: SessionInfo): string {
  return `sessiond: ${sessionName(session)} has no running or queued turn`;
}

/** After session/cancel: "sessiond: told 3 turns of Fix tests (s3) to stop". */
export function cancelledMessage(session: SessionInfo | undefined, id: string, cancelled: number): string {
  const name = session ? sessionName(session) : id;
  return cancelled ? `sessiond: told ${plural(cancelled, 'turn')} of ${name} to stop` : `sessiond: ${name} had no turn to stop`;
}

/**
 * The question before closing: from the palette always (naming the session), from a row only
 * while it has turns in hand. Undefined: close without asking.
 */
export function closeQuestion(session: SessionInfo, fromPalette: boolean): string | undefined {
  const turns = turnsInHand(session);
  const busy = turns.running + turns.queued;
  if (!fromPalette && !busy) return undefined;
  const cancels = busy ? `: closing it cancels ${turnsPhrase(turns)}` : '';
  return `Close ${sessionName(session)}${cancels}? It leaves the Sessions view; "sessiond: Reopen Session…" brings it back.`;
}
