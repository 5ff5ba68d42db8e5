/** The status bar item: the fleet at a glance and the current session's context fill. */
import type { ConnectionState } from '../protocol/live';
import type { SessionInfo } from '../protocol/types';
import { ago, clockTime, formatCost, formatLines, formatPercent, formatTokens, plural, PLAN_MARKS, sessionName, STATUS_LABELS } from './format';
import type { ModelView } from './view';

export interface StatusBarView {
  text: string;
  /** Markdown. */
  tooltip: string;
  /** Whether to draw it in the warning colours (someone needs you, or we are not connected). */
  warning: boolean;
}

/**
 * Why the extension shows only the last known state: the daemon was stopped on purpose, or the
 * connection is lost (the daemon died, or cannot be reached).
 */
export type Offline = 'stopped' | 'notConnected';

/** The word for each, the same in the status bar and on the Sessions view's agent rows. */
export const OFFLINE_LABELS: Record<Offline, string> = { stopped: 'stopped', notConnected: 'not connected' };

/** Which `Offline` a connection state is; undefined while connected, or before it was started. */
export function offlineOf(state: ConnectionState, started = true): Offline | undefined {
  if (!started || state === 'connected') return undefined;
  return state === 'stopped' ? 'stopped' : 'notConnected';
}

/** The palette title of the command that reconnects now (contributed in package.json). */
export const RECONNECT_COMMAND = 'sessiond: Reconnect to the Daemon';

/** What the status bar knows of the connection besides its state. */
export interface ConnectionView {
  /** Why the last attempt failed or the connection dropped (only shown while not connected). */
  lastError?: string;
  /** When the connection dropped (ms since the epoch). */
  disconnectedSince?: number;
  /** The socket it waits for, when not started (see ConnectionState `idle`). */
  socket?: string;
  now?: number;
}

/** "$(sync~spin) 3 working · $(bell-dot) 1 needs you · 200 open · 42%". */
export function statusBar(
  model: ModelView,
  state: ConnectionState,
  current: SessionInfo | undefined,
  connection: ConnectionView | string = {},
): StatusBarView {
  const { lastError, disconnectedSince, socket, now } = typeof connection === 'string' ? { lastError: connection } : connection;
  if (state === 'idle') {
    return {
      text: '$(debug-disconnect) sessiond: no daemon',
      tooltip:
        `No sessiond daemon runs${socket ? ` at ${socket}` : ''}, and the setting sessiond.startDaemon is off. ` +
        'The extension connects when one starts (`sessiond serve`), when the Sessions view opens, or when a sessiond command runs.',
      warning: false,
    };
  }
  if (state !== 'connected') {
    if (state === 'starting' || state === 'disposed') return { text: '$(loading~spin) sessiond', tooltip: 'Connecting to sessiond…', warning: false };
    const since = disconnectedSince ? ` since ${ago(disconnectedSince, now)}` : '';
    const open = model.fleet().open;
    const stale = model.sessions.size ? ` The Sessions view shows the last known state of ${plural(open, 'open session')}, marked stale.` : '';
    if (state === 'stopped') {
      return {
        text: `$(debug-stop) sessiond: ${OFFLINE_LABELS.stopped}`,
        tooltip:
          `The sessiond daemon was stopped${since} (\`sessiond stop\`, or by another editor). The extension does not ` +
          `start it again by itself: click to start it, or start one with \`sessiond serve\` (it connects when one runs).${stale}`,
        warning: true,
      };
    }
    return {
      text: `$(debug-disconnect) sessiond: ${OFFLINE_LABELS.notConnected}`,
      tooltip:
        `Not connected to sessiond${since}${lastError ? `: ${lastError}` : ''}.${stale} ` +
        `Retrying; run "${RECONNECT_COMMAND}" to try now, or click for more.`,
      warning: true,
    };
  }
  const fleet = model.fleet();
  const parts: string[] = [];
  if (fleet.working) parts.push(`$(sync~spin) ${fleet.working} working`);
  if (fleet.needsYou) parts.push(`$(bell-dot) ${fleet.needsYou} needs you`);
  parts.push(`${fleet.working || fleet.needsYou ? '' : '$(server-process) '}${fleet.open} open`);
  const percent = current ? formatPercent(current.context) : undefined;
  if (percent) parts.push(percent);
  return {
    text: parts.join(' · '),
    tooltip: tooltip(model, current, now),
    warning: (fleet.needsYou ?? 0) > 0,
  };
}

function tooltip(model: ModelView, current: SessionInfo | undefined, now?: number): string {
  const fleet = model.fleet();
  const counts = Object.entries(fleet.byStatus ?? {})
    .filter(([, count]) => count)
    .map(([status, count]) => `${count} ${STATUS_LABELS[status as keyof typeof STATUS_LABELS] ?? status}`);
  const lines = [`**sessiond**: ${fleet.open} open${counts.length ? ` (${counts.join(', ')})` : ''}`];
  const cost = formatCost(fleet.cost);
  if (cost) lines.push(`Cost so far: ${cost}`);
  if (!current) {
    lines.push('', 'Click to pick a session.');
    return lines.join('\n\n');
  }
  lines.push(
    '',
    `**${escape(sessionName(current))}**: ${STATUS_LABELS[current.status]} since ${clockTime(current.statusSince, now)} · ${current.agent} · ${escape(current.root)}`,
  );
  const context = current.context;
  if (context) {
    const fill = `Context ${formatPercent(context)}: ${formatTokens(context.used)} of ${formatTokens(context.size)} tokens`;
    const sessionCost = formatCost(context.cost?.amount, context.cost?.currency);
    lines.push(sessionCost ? `${fill}, ${sessionCost}` : fill);
  }
  const plan = current.plan;
  if (plan?.entries?.length) {
    const done = plan.done ?? plan.entries.filter((entry) => entry.status === 'completed').length;
    lines.push(
      `Plan ${done} of ${plan.total ?? plan.entries.length}:` +
        plan.entries.map((entry) => `\n- ${PLAN_MARKS[entry.status ?? 'pending']} ${escape(entry.content)}`).join(''),
    );
  }
  const changes = current.changes;
  if (changes?.files?.length) {
    lines.push(
      `Changed files (${plural(changes.files.length, 'file')}, ${formatLines(changes.added, changes.removed)}):` +
        changes.files.map((file) => `\n- ${escape(file.path)} ${formatLines(file.added, file.removed)}`).join(''),
    );
  }
  if (current.recap) lines.push(`Last reply: ${escape(current.recap)}`);
  for (const permission of model.permissionsOf(current.id)) {
    lines.push(`Needs you: ${escape(permission.toolCall.title ?? 'a permission request')}`);
  }
  lines.push('', 'Click to pick a session.');
  return lines.join('\n\n');
}

/** Keep user text from being read as markdown. */
export function escape(text: string): string {
  return text.replace(/([\\`*_{}[\]()#+\-.!|<>])/g, '\\$1');
}
