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

/** The palette title of the command that starts a daemon (contributed in package.json). */
export const START_COMMAND = 'sessiond: Start the Daemon';

/** Said once when the daemon was stopped on purpose: the extension leaves it stopped. */
export function stoppedMessage(): string {
  return `${STOPPED_TITLE}. ${STOPPED_DETAIL}`;
}

/**
 * The same as a notification: the title, then a link that starts the daemon, then the rest (a
 * notification shows one line of it: the link first, where it is seen).
 */
export function stoppedNotice(startCommand: string): { title: string; message: string } {
  return { title: STOPPED_TITLE, message: `[Start the Daemon](command:${startCommand}) · ${STOPPED_DETAIL}` };
}

const STOPPED_TITLE = 'sessiond: the daemon was stopped';
const STOPPED_DETAIL = 'The extension does not start it again by itself; it connects when one runs.';

/**
 * Said when a command needs the daemon and is not connected, as a notification that is withdrawn
 * once a daemon is connected (a message notification cannot be: "no session can be opened" stayed
 * beside a connected status bar). The title says why; the message's links start or reconnect.
 */
export function notConnectedNotice(
  what: string,
  stopped: boolean,
  reason: string | undefined,
  commands: { start: string; reconnect: string },
): { title: string; message: string } {
  const why = stopped ? 'the daemon was stopped' : `not connected to the sessiond daemon${reason ? ` (${reason.replace(/\.$/, '')})` : ''}`;
  return {
    title: `sessiond: ${why}, so ${what}`,
    message: `[Start the Daemon](command:${commands.start}) · [Reconnect](command:${commands.reconnect}), then it goes on`,
  };
}

/**
 * Said once after the daemon went away without a stop (killed, crashed) or was restarted
 * elsewhere, and the turns its new run marked interrupted (turn.ended, outcome `interrupted`):
 * each named, to be sent again.
 */
export function daemonLostMessage(replaced: boolean, interrupted: string[], model: ModelView): string {
  const what = replaced
    ? 'the daemon stopped unexpectedly (killed or crashed); the extension started a new one'
    : 'the daemon was restarted';
  if (!interrupted.length) return `sessiond: ${what}.`;
  const names = interrupted.map((id) => {
    const session = model.sessions.get(id);
    return session?.title ? `${session.title} (${id})` : id;
  });
  const turns = interrupted.length === 1 ? '1 turn was' : `${interrupted.length} turns were`;
  return `sessiond: ${what}. ${turns} interrupted: ${names.join(', ')}. Send again what should still run.`;
}
