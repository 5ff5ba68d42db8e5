/**
 * Restarting the daemon, as told to a person: the warning before, the message
 * after, the error when a step failed. Pure functions; no `vscode` import.
 */
import type { DaemonRestart, RestartFailure } from '../protocol/live';
import type { StopResult, SessionStatus } from '../protocol/types';
import { RECONNECT_COMMAND } from './status';
import type { ModelView } from './view';

const RECONNECT = `"${RECONNECT_COMMAND}"`;
const SHOW_LOG = '"sessiond: Show Log"';

/** Statuses of a session with a turn in hand, which a stop cancels. */
const IN_HAND = new Set<SessionStatus>(['working', 'queued', 'needs_you']);

/** "; 2 running or queued turns were cancelled", or nothing when none were. */
function cancelledTurns(stopped: StopResult): string {
  const n = stopped.cancelledTurns;
  if (!n) return '';
  return n === 1 ? '; 1 running or queued turn was cancelled' : `; ${n} running or queued turns were cancelled`;
}

/** "sessiond: restarted the daemon (pid 41 → 42); 2 running or queued turns were cancelled" */
export function restartedMessage(restart: DaemonRestart): string {
  return `sessiond: restarted the daemon (pid ${restart.stopped.pid} → ${restart.pid})${cancelledTurns(restart.stopped)}`;
}

/**
 * The question to ask before restarting, when sessions have turns in hand (for every client of
 * the daemon, not only this window); undefined when nothing would be cancelled.
 */
export function restartWarning(model: ModelView): string | undefined {
  const busy = [...model.sessions.values()].filter((session) => IN_HAND.has(session.status)).length;
  if (!busy) return undefined;
  const sessions = busy === 1 ? '1 session is' : `${busy} sessions are`;
  return `${sessions} working, queued or waiting on you: restarting the daemon cancels their turns, for every editor and script using it.`;
}

/** After the reconnect command: "sessiond: connected through socket /run/…/sessiond.sock". */
export function reconnectedMessage(description: string): string {
  return `sessiond: connected through ${description}`;
}

/** The reconnect command's attempt failed: why, and that the extension keeps trying. */
export function reconnectFailedMessage(reason: string): string {
  return `sessiond: could not connect: ${reason.replace(/\.$/, '')}. The extension keeps trying; ${SHOW_LOG} has each attempt.`;
}

/** What happened and what to do, for each step a restart can fail at. */
export function restartFailedMessage(failure: RestartFailure): string {
  const { stage, reason, stopped } = failure;
  switch (stage) {
    case 'notConnected':
      return `sessiond: could not restart the daemon: ${reason}. Nothing was stopped. Run ${RECONNECT} first; ${SHOW_LOG} says why it is not connected.`;
    case 'stop':
      return (
        `sessiond: could not restart the daemon: ${reason}. Nothing was stopped. To restart it by hand, run ` +
        `\`sessiond stop\` (or end its process), then ${RECONNECT}.`
      );
    case 'close': {
      const pid = stopped ? ` (pid ${stopped.pid})` : '';
      return (
        `sessiond: the daemon${pid} is stopping, but ${reason}. It may be stuck: see daemon.log in its state ` +
        `directory, end the process${stopped ? ` (kill ${stopped.pid})` : ''} if it hangs, then run ${RECONNECT}.`
      );
    }
    case 'reconnect': {
      const what = stopped ? ` (pid ${stopped.pid}${cancelledTurns(stopped)})` : '';
      return (
        `sessiond: stopped the daemon${what}, but could not connect to a new one: ${reason}. The extension keeps ` +
        'trying. Check the settings sessiond.path and sessiond.startDaemon (on: the extension starts the daemon), ' +
        `or start one with \`sessiond serve\`; ${SHOW_LOG} has the details.`
      );
    }
  }
}
