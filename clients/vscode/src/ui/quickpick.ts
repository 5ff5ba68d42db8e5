/** Quick pick entries for choosing a session: those with a turn in hand first. */
import { ACTIVE_STATUSES } from '../protocol/model';
import type { SessionInfo, SessionStatus } from '../protocol/types';
import { formatPercent, KIND_LABELS, planProgress, STATUS_ICONS, STATUS_LABELS } from './format';
import { queuedNote } from './turns';
import type { ModelView } from './view';

export interface SessionPickItem {
  label: string;
  description: string;
  detail?: string;
  session: string;
}

const RANK: Record<SessionStatus, number> = {
  needs_you: 0,
  working: 1,
  queued: 2,
  failed: 3,
  stopped: 4,
  idle: 5,
  closed: 6,
};

/**
 * Open sessions: `current` (the session last opened or picked) first, marked so; then needs you,
 * working, queued, the rest; within a rank the most recently active first.
 */
export function sessionPickItems(model: ModelView, current?: string): SessionPickItem[] {
  const rank = (session: SessionInfo): number => (session.id === current ? -1 : RANK[session.status]);
  return model
    .openSessions()
    .sort((a, b) => rank(a) - rank(b) || activity(b).localeCompare(activity(a)))
    .map((session) => pickItem(session, model.lastPrompts.get(session.id), session.id === current));
}

/**
 * A session's entry: its name and status; the detail line (a line of its own, as wide as the
 * pick) has its last prompt whole, its line breaks shown as ⏎, else its last reply or plan step.
 */
export function pickItem(session: SessionInfo, lastPrompt?: string, current = false): SessionPickItem {
  const plan = planProgress(session.plan);
  const percent = formatPercent(session.context);
  return {
    label: `$(${STATUS_ICONS[session.status]}) ${session.title || session.id}`,
    description: [
      current ? 'current' : undefined,
      session.title ? session.id : undefined,
      session.agent,
      session.kind && session.kind !== 'main' ? `${KIND_LABELS[session.kind]}${session.parent ? ` of ${session.parent}` : ''}` : undefined,
      STATUS_LABELS[session.status],
      queuedNote(session),
      plan ? `plan ${plan}` : undefined,
      percent,
    ]
      .filter(Boolean)
      .join(' · '),
    detail: lastPrompt?.trim() ? `› ${oneLine(lastPrompt)}` : (session.recap ?? session.plan?.current ?? undefined),
    session: session.id,
  };
}

/** A prompt on one line, whole: line breaks as " ⏎ ". */
export function oneLine(text: string): string {
  return text
    .trim()
    .split(/\r\n|\r|\n/)
    .map((line) => line.trim())
    .join(' ⏎ ');
}

function activity(session: SessionInfo): string {
  return session.lastActivity ?? session.statusSince;
}

/** Sessions with a turn in hand, in the stable order stepping walks them. */
export function activeSessions(model: ModelView): SessionInfo[] {
  return model.openSessions().filter((session) => ACTIVE_STATUSES.has(session.status));
}

export interface Step {
  session: SessionInfo;
  /** 1-based. */
  position: number;
  total: number;
  /** "3 of 12 working". */
  label: string;
}

/**
 * The next (or previous) working session after `current`, wrapping around.
 * When `current` is not itself working, the one after it in creation order.
 */
export function step(model: ModelView, current: string | undefined, direction: 1 | -1): Step | undefined {
  const active = activeSessions(model);
  if (!active.length) return undefined;
  let index = current ? active.findIndex((session) => session.id === current) : -1;
  if (index === -1 && current) {
    const all = model.openSessions();
    const at = all.findIndex((session) => session.id === current);
    const after = active.findIndex((session) => all.indexOf(session) > at);
    index = direction === 1 ? (after === -1 ? active.length : after) - 1 : after === -1 ? active.length : after;
  } else if (index === -1) {
    index = direction === 1 ? -1 : active.length;
  }
  const next = (index + direction + active.length) % active.length;
  const total = active.length;
  return { session: active[next], position: next + 1, total, label: `${next + 1} of ${total} working` };
}
