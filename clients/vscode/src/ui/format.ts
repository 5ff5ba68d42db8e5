/** Small formatting shared by the views. Pure; no `vscode` import. */
import type { Attention, ChangedFile, ContextFill, Plan, SessionInfo, SessionStatus } from '../protocol/types';
import type { InputPrompt } from './around';

/** Codicon id per status ("sync~spin" spins). */
export const STATUS_ICONS: Record<SessionStatus, string> = {
  idle: 'circle-outline',
  queued: 'clock',
  working: 'sync~spin',
  needs_you: 'bell-dot',
  failed: 'error',
  stopped: 'debug-stop',
  closed: 'close',
};

/** Theme colour id per status, where one helps. */
export const STATUS_COLORS: Partial<Record<SessionStatus, string>> = {
  needs_you: 'notificationsWarningIcon.foreground',
  failed: 'errorForeground',
  working: 'charts.blue',
};

export const STATUS_LABELS: Record<SessionStatus, string> = {
  idle: 'idle',
  queued: 'queued',
  working: 'working',
  needs_you: 'needs you',
  failed: 'failed',
  stopped: 'stopped',
  closed: 'closed',
};

/** The daemon's attention flags, in words for a tooltip. */
export const ATTENTION_LABELS: Record<Attention, string> = {
  needs_you: 'a permission request waits for you',
  plan_stalled: 'its plan step has been in progress a long time',
  context_high: 'its context window is over 80% full',
  turn_long: 'its turn has run past half its time limit',
  agent_silent: 'its agent has said nothing for a while',
};

/** What a session started from another one is, in words (`main` sessions say nothing). */
export const KIND_LABELS: Record<'side' | 'task' | 'thread', string> = {
  side: 'side chat',
  task: 'task',
  thread: 'thread',
};

export function sessionName(session: SessionInfo): string {
  return session.title ? `${session.title} (${session.id})` : session.id;
}

/** The input box that renames a session: its title to edit (its first prompt's words, say). */
export function renamePrompt(session: SessionInfo | undefined, id: string): InputPrompt {
  return {
    title: `Rename ${id}`,
    prompt: 'Its title in every list; neither its first prompt nor its agent names it after this.',
    value: session?.title ?? '',
  };
}

/** An input box's complaint about a title: undefined when it will do. */
export function titleProblem(title: string): string | undefined {
  return title.trim() ? undefined : 'Give it a name with words in it.';
}

/** "2/5" plan entries done, or undefined without a plan. */
export function planProgress(plan: Plan | null | undefined): string | undefined {
  if (!plan || !plan.entries?.length) return undefined;
  const total = plan.total ?? plan.entries.length;
  const done = plan.done ?? plan.entries.filter((entry) => entry.status === 'completed').length;
  return `${done}/${total}`;
}

export function contextPercent(context: ContextFill | null | undefined): number | undefined {
  if (!context) return undefined;
  if (typeof context.percent === 'number') return context.percent;
  return context.size > 0 ? (100 * context.used) / context.size : undefined;
}

/** "42%", "~42%" when estimated. */
export function formatPercent(context: ContextFill | null | undefined): string | undefined {
  const percent = contextPercent(context);
  if (percent === undefined) return undefined;
  return `${context?.estimated ? '~' : ''}${Math.round(percent)}%`;
}

export function formatCost(amount: number | undefined, currency = 'USD'): string | undefined {
  if (amount === undefined || amount === 0) return undefined;
  const symbol = currency === 'USD' ? '$' : `${currency} `;
  return `${symbol}${amount < 0.01 ? amount.toFixed(4) : amount.toFixed(2)}`;
}

export function formatTokens(tokens: number): string {
  if (tokens >= 1_000_000) return `${(tokens / 1_000_000).toFixed(1)}M`;
  if (tokens >= 1000) return `${Math.round(tokens / 1000)}k`;
  return String(tokens);
}

/** "+12 −3". */
export function formatLines(added = 0, removed = 0): string {
  return `+${added} −${removed}`;
}

export function fileLabel(file: ChangedFile): string {
  return file.path.split('/').pop() || file.path;
}

export const CHANGE_LETTERS: Record<ChangedFile['kind'], string> = {
  added: 'A',
  modified: 'M',
  deleted: 'D',
  renamed: 'R',
};

export const PLAN_MARKS: Record<'pending' | 'in_progress' | 'completed', string> = {
  pending: '○',
  in_progress: '▸',
  completed: '✓',
};

/** "1 file", "3 files". */
export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

/** "just now", "40 s ago", "3 min ago", "2 h ago", "3 days ago"; an ISO time or ms since the epoch. */
export function ago(time: string | number | null | undefined, now = Date.now()): string {
  if (time === null || time === undefined) return 'at an unknown time';
  const at = typeof time === 'number' ? time : Date.parse(time);
  if (Number.isNaN(at)) return String(time);
  const seconds = Math.max(0, Math.round((now - at) / 1000));
  if (seconds < 5) return 'just now';
  if (seconds < 60) return `${seconds} s ago`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return `${Math.round(hours / 24)} days ago`;
}

/** One formatter for every row: `toLocaleString` with options makes a new one each call (most of a redraw's time). */
const MONTH = new Intl.DateTimeFormat('en', { month: 'short' });

/**
 * A moment as a clock shows it, in local time: "14:02:07" today, "Nov 29 14:02" another day. A
 * tooltip is made when its row is drawn and shown much later: "17 s ago" would be wrong by then.
 */
export function clockTime(time: string | number | null | undefined, now = Date.now()): string {
  if (time === null || time === undefined) return 'an unknown time';
  const at = new Date(typeof time === 'number' ? time : Date.parse(time));
  if (Number.isNaN(at.getTime())) return String(time);
  const two = (n: number): string => String(n).padStart(2, '0');
  const today = new Date(now).toDateString() === at.toDateString();
  if (today) return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
  const month = MONTH.format(at);
  return `${month} ${at.getDate()} ${two(at.getHours())}:${two(at.getMinutes())}`;
}
