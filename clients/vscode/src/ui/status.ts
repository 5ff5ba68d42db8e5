/** The status bar item: the fleet at a glance and the current session's context fill. */
import type { ConnectionState } from '../protocol/live';
import type { SessionInfo } from '../protocol/types';
import { formatCost, formatLines, formatPercent, formatTokens, PLAN_MARKS, sessionName, STATUS_LABELS } from './format';
import type { ModelView } from './view';

export interface StatusBarView {
  text: string;
  /** Markdown. */
  tooltip: string;
  /** Whether to draw it in the warning colours (someone needs you, or we are not connected). */
  warning: boolean;
}

/** "$(sync~spin) 3 working · $(bell-dot) 1 needs you · 200 open · 42%". */
export function statusBar(
  model: ModelView,
  state: ConnectionState,
  current: SessionInfo | undefined,
  lastError?: string,
): StatusBarView {
  if (state !== 'connected') {
    const text = state === 'starting' ? '$(loading~spin) sessiond' : '$(debug-disconnect) sessiond';
    const tooltip =
      state === 'starting'
        ? 'Connecting to sessiond…'
        : `Not connected to sessiond${lastError ? `: ${lastError}` : ''}. Retrying; run "sessiond: Reconnect" to try now.`;
    return { text, tooltip, warning: state !== 'starting' };
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
    tooltip: tooltip(model, current),
    warning: (fleet.needsYou ?? 0) > 0,
  };
}

function tooltip(model: ModelView, current: SessionInfo | undefined): string {
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
  lines.push('', `**${escape(sessionName(current))}**: ${STATUS_LABELS[current.status]} · ${current.agent} · ${escape(current.root)}`);
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
      `Changed files (${changes.files.length}, ${formatLines(changes.added, changes.removed)}):` +
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
