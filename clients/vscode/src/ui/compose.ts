/**
 * Opening a session (agent, root, placement) and composing a prompt for one in an editor of its
 * own. Pure; no `vscode` import.
 */
import type { AgentInfo, SessionInfo } from '../protocol/types';
import { sessionName } from './format';

export type Placement = NonNullable<SessionInfo['placement']>;

export interface PlacementItem {
  label: Placement;
  description: string;
  detail: string;
  placement: Placement;
}

const PLACEMENTS: { placement: Placement; description: string; detail: string }[] = [
  { placement: 'here', description: 'in the folder itself', detail: 'The agent works in the root folder; its edits land there.' },
  {
    placement: 'worktree',
    description: 'a git worktree of its own',
    detail: 'A branch and worktree apiece, made on the first turn; merge it back with "sessiond: Merge Session…".',
  },
  { placement: 'sandbox', description: 'bubblewrap', detail: 'Commands run in bubblewrap: the root read-write, the rest of the system read-only, no network.' },
  { placement: 'container', description: 'a container of its own', detail: 'A container (docker or podman) per session, the root bind-mounted; the agent\'s containerImage.' },
  { placement: 'ssh', description: 'on another machine', detail: 'The agent stays here; its commands and file writes land on an ssh target.' },
];

/** Every placement `session/open` takes, the agent's default first. */
export function placementItems(agent: AgentInfo | undefined): PlacementItem[] {
  const fallback = agent?.options?.defaultPlacement ?? 'here';
  const items = PLACEMENTS.map(({ placement, description, detail }) => ({
    label: placement,
    description: placement === fallback ? `${description} · the agent's default` : description,
    detail,
    placement,
  }));
  return [...items.filter((item) => item.placement === fallback), ...items.filter((item) => item.placement !== fallback)];
}

/** The file name of a session's compose document: it names the target ("Prompt for Fix tests (s3).md"). */
export function composeFileName(session: SessionInfo | undefined, id: string): string {
  const name = session ? sessionName(session) : id;
  // A file name: no path separators; short enough for a tab.
  const safe = name.replace(/[/\\:*?"<>|]+/g, ' ').replace(/\s+/g, ' ').trim();
  const short = safe.length > 80 ? `${safe.slice(0, 77)}…` : safe;
  return `Prompt for ${short}.md`;
}

/**
 * The session a compose document's file name names ("Prompt for Fix tests (s3).md" → s3), for a
 * compose editor VS Code restored after a reload.
 */
export function sessionOfComposeName(name: string): string | undefined {
  const match = /^Prompt for (?:.*\(([^()\s]+)\)|([^()\s]+))\.md$/.exec(name);
  return match ? (match[1] ?? match[2]) : undefined;
}

/** Said when a compose editor opens: where it goes and how to send it. */
export function composeHint(session: SessionInfo | undefined, id: string, platform = process.platform): string {
  const key = platform === 'darwin' ? 'Cmd+Enter' : 'Ctrl+Enter';
  return `sessiond: write the prompt for ${session ? sessionName(session) : id}; ${key} or the send button sends it`;
}

/** The status bar message once a prompt went. */
export function sentMessage(session: SessionInfo | undefined, id: string, prompt: string): string {
  const lines = prompt.trim().split(/\r\n|\r|\n/).length;
  return `sessiond: sent a prompt of ${lines === 1 ? '1 line' : `${lines} lines`} to ${session ? sessionName(session) : id}`;
}

/** The last prompt in a transcript's lines: the user lines of the last turn that has any. */
export function lastPromptOf(lines: { role: string; turn?: string | null; text: string }[]): string | undefined {
  const last = [...lines].reverse().find((line) => line.role === 'user');
  if (!last) return undefined;
  return lines
    .filter((line) => line.role === 'user' && line.turn === last.turn)
    .map((line) => line.text)
    .join('\n');
}

const ENDINGS: Record<string, string> = {
  end_turn: 'finished',
  cancelled: 'was cancelled',
  max_tokens: 'stopped at its token limit',
  max_turn_requests: 'stopped at its limit of model requests',
  refusal: 'ended: the agent refused',
};

/** The status bar message once a prompt sent from here ends: "sessiond: Fix tests (s3) finished: Fixed." */
export function turnEndedMessage(session: SessionInfo | undefined, id: string, stopReason: string, reply: string): string {
  const first = reply.trim().split('\n')[0]?.trim() ?? '';
  const short = first.length > 80 ? `${first.slice(0, 77)}…` : first;
  const how = ENDINGS[stopReason] ?? `ended (${stopReason.replace(/_/g, ' ')})`;
  return `sessiond: your prompt to ${session ? sessionName(session) : id} ${how}${short ? `: ${short}` : ''}`;
}
