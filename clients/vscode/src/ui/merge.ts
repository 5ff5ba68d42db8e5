/**
 * Merging a worktree session back: what the "Merge Session…" command asks, and how a merge's
 * place in the queue and its outcome are said (notification, session row, the "Merge queue" node).
 * Pure; no `vscode` import.
 */
import { type KnownMerge } from '../protocol/model';
import type { MergeParams, SessionInfo } from '../protocol/types';
import { sessionName } from './format';
import type { ModelView } from './view';

/** Sessions that can be merged: open, in a worktree. */
export function mergeableSessions(model: ModelView): SessionInfo[] {
  return model.openSessions().filter((session) => session.placement === 'worktree');
}

export interface StrategyItem {
  label: string;
  description: string;
  detail: string;
  strategy: NonNullable<MergeParams['strategy']>;
}

export function strategyItems(base = 'its base branch'): StrategyItem[] {
  return [
    {
      label: 'merge',
      description: 'a merge commit',
      detail: `Merge the session's branch into ${base} with a merge commit (its commits stay as they are).`,
      strategy: 'merge',
    },
    {
      label: 'rebase',
      description: 'a straight line',
      detail: `Rebase the session's commits onto ${base}, then move ${base} to them.`,
      strategy: 'rebase',
    },
  ];
}

export interface MergeOptionItem {
  label: string;
  detail: string;
  option: 'keep' | 'handBack';
  picked: boolean;
}

export function mergeOptionItems(): MergeOptionItem[] {
  return [
    {
      label: 'Hand a failure back to the session',
      detail: 'On a conflict or a failing gate, send the problem to the session as its next prompt.',
      option: 'handBack',
      picked: false,
    },
    {
      label: 'Keep the worktree and branch',
      detail: 'After the merge (else both are removed once merged).',
      option: 'keep',
      picked: false,
    },
  ];
}

/** The gate's input box. */
export function gatePrompt(session: SessionInfo | undefined, id: string, last: string | undefined): { title: string; prompt: string; placeHolder: string; value: string } {
  return {
    title: `Merge ${session ? sessionName(session) : id}: gate`,
    prompt: 'A shell command that must pass on the merged result, run in the session\'s worktree (empty: no gate). Enter to go on.',
    placeHolder: 'e.g. pytest -q',
    value: last ?? '',
  };
}

/** "2nd", "3rd". */
function ordinal(n: number): string {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][n % 10] ?? 'th';
  return `${n}${suffix}`;
}

/** Where a waiting or running merge is: "merging now", "next in the merge queue", "3rd in the merge queue". */
export function mergePosition(entry: KnownMerge): string {
  if (entry.status === 'running' || entry.position === 0) return 'merging now';
  if (entry.position === 1) return 'next in the merge queue';
  if (typeof entry.position === 'number') return `${ordinal(entry.position)} in the merge queue`;
  return 'in the merge queue';
}

/** What a running merge does now, from its last step. */
function runningStep(entry: KnownMerge): string {
  switch (entry.step) {
    case 'gate-started':
    case 'gate-passed':
      return entry.step === 'gate-started' ? `running the gate \`${entry.gate ?? ''}\`` : 'the gate passed';
    case 'committed':
      return 'committed the pending work';
    case 'integrated':
      return `${entry.strategy === 'rebase' ? 'rebased' : 'merged'} on ${entry.base}`;
    case 'landed':
    case 'cleaned':
    case 'kept':
      return `landed on ${entry.base}`;
    default:
      return `into ${entry.base || 'its base'}`;
  }
}

/** Whether a failed merge failed on conflicts, on its gate, or otherwise. */
export function failureKind(entry: KnownMerge): 'conflict' | 'gate' | 'other' {
  if (entry.conflicts?.length) return 'conflict';
  if (entry.gateOutput !== null && entry.gateOutput !== undefined) return 'gate';
  return 'other';
}

/** A few words for the session's row: "merge queued (2nd)", "merging", "merged", "merge failed: gate". */
export function mergeRowLabel(entry: KnownMerge): string {
  switch (entry.status) {
    case 'queued':
      return entry.position && entry.position > 1 ? `merge queued (${ordinal(entry.position)})` : 'merge queued';
    case 'running':
      return entry.step === 'gate-started' ? 'merging: gate running' : 'merging';
    case 'merged':
      return 'merged';
    case 'cancelled':
      return 'merge cancelled';
    case 'failed': {
      const kind = failureKind(entry);
      return kind === 'conflict' ? 'merge conflict' : kind === 'gate' ? 'merge failed: gate' : 'merge failed';
    }
  }
}

/** The merge's lines in the session's tooltip. */
export function mergeTooltip(entry: KnownMerge): string {
  const target = `${entry.branch || 'its branch'} → ${entry.base || 'its base'} (${entry.strategy}${entry.gate ? `, gate \`${entry.gate}\`` : ''})`;
  switch (entry.status) {
    case 'queued':
    case 'running':
      return `merge: ${mergePosition(entry)}: ${target}`;
    case 'merged':
      return `merged: ${target}${entry.commit ? ` at ${entry.commit.slice(0, 10)}` : ''}`;
    case 'cancelled':
      return `merge cancelled: ${entry.reason ?? target}`;
    case 'failed':
      return `merge failed: ${entry.reason ?? target}${entry.conflicts?.length ? `\nconflicts: ${entry.conflicts.join(', ')}` : ''}`;
  }
}

/** The progress notification's message while a merge waits or runs. */
export function mergeProgressMessage(entry: KnownMerge): string {
  if (entry.status === 'running') return `merging now: ${runningStep(entry)}`;
  return `queued: ${mergePosition(entry)}`;
}

export interface MergeOutcome {
  severity: 'info' | 'warning' | 'error';
  message: string;
  /** Offer to show the gate's output (a failed gate). */
  gateOutput: boolean;
}

/** The notification once a merge has ended. */
export function mergeOutcome(entry: KnownMerge, session: SessionInfo | undefined): MergeOutcome {
  const name = session ? sessionName(session) : entry.session;
  switch (entry.status) {
    case 'merged':
      return {
        severity: 'info',
        message: `sessiond: merged ${name} into ${entry.base}${entry.commit ? ` (${entry.commit.slice(0, 10)})` : ''}${entry.kept ? '; its worktree was kept' : ''}.`,
        gateOutput: false,
      };
    case 'cancelled':
      return { severity: 'warning', message: `sessiond: the merge of ${name} was cancelled: ${entry.reason ?? 'no reason given'}.`, gateOutput: false };
    default: {
      const kind = failureKind(entry);
      const reason = entry.reason ?? (kind === 'conflict' ? `conflicts in ${entry.conflicts?.join(', ')}` : 'no reason given');
      const unchanged = `${entry.base || 'The base branch'} and the working copy are as they were.`;
      return {
        severity: 'error',
        message: `sessiond: merging ${name} failed: ${reason}. ${unchanged}`,
        gateOutput: kind === 'gate',
      };
    }
  }
}

/** The gate output document of a failed merge. */
export function gateOutputText(entry: KnownMerge, session: SessionInfo | undefined): string {
  const name = session ? sessionName(session) : entry.session;
  return [
    `# Gate of the merge of ${name}: ${entry.branch} → ${entry.base}`,
    `# $ ${entry.gate ?? '(no gate)'}`,
    entry.reason ? `# ${entry.reason}` : undefined,
    '',
    entry.gateOutput ?? '(no output)',
    '',
  ]
    .filter((line) => line !== undefined)
    .join('\n');
}

/** The "Merge queue" node's description: "1 merging · 2 waiting · 3 merged · 1 failed" (how the
 * ended ones ended, not "done": a queue whose one merge failed read "1 done"). */
export function mergeQueueDescription(entries: KnownMerge[]): string {
  const count = (status: KnownMerge['status']): number => entries.filter((entry) => entry.status === status).length;
  const parts: [number, string][] = [
    [count('running'), 'merging'],
    [count('queued'), 'waiting'],
    [count('merged'), 'merged'],
    [count('failed'), 'failed'],
    [count('cancelled'), 'cancelled'],
  ];
  return parts
    .filter(([n]) => n > 0)
    .map(([n, what]) => `${n} ${what}`)
    .join(' · ');
}

/** A merge's row under "Merge queue": its state, then branch → base. */
export function mergeEntryDescription(entry: KnownMerge): string {
  const state =
    entry.status === 'queued' || entry.status === 'running'
      ? mergePosition(entry)
      : entry.status === 'merged'
        ? `merged${entry.commit ? ` ${entry.commit.slice(0, 7)}` : ''}`
        : mergeRowLabel(entry);
  return `${state} · ${entry.branch} → ${entry.base}`;
}

export const MERGE_ICONS: Record<KnownMerge['status'], string> = {
  queued: 'clock',
  running: 'sync~spin',
  merged: 'git-merge',
  failed: 'error',
  cancelled: 'circle-slash',
};
