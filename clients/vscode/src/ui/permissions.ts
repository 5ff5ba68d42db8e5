/** A permission request as a notification: a sentence and the agent's options as buttons. */
import type { PendingPermission } from '../protocol/model';
import type { SessionInfo } from '../protocol/types';
import { sessionName } from './format';

export interface PermissionPrompt {
  message: string;
  /** In the agent's order; `optionId` is what is sent back. */
  choices: { title: string; optionId: string }[];
}

export function permissionPrompt(permission: PendingPermission, session: SessionInfo | undefined): PermissionPrompt {
  const who = session ? sessionName(session) : permission.session;
  const what = permission.toolCall.title ?? permission.toolCall.kind ?? 'a tool call';
  const where = permission.toolCall.locations?.map((location) => location.path).join(', ');
  return {
    message: `${who}: ${permission.agent ?? 'the agent'} asks permission: ${what}${where ? ` (${where})` : ''}`,
    choices: permission.options.map((option) => ({ title: option.name || option.optionId, optionId: option.optionId })),
  };
}

/** The command a notification's answer links run, with the request's id and the option's. */
export const ANSWER_COMMAND = 'sessiond.answerPermission';

/**
 * The options as markdown command links ("[Allow](command:…) · [Reject](command:…)"): a progress
 * notification has no buttons but renders links, and goes away when the request settles.
 */
export function answerLinks(permissionId: string, choices: PermissionPrompt['choices']): string {
  return choices
    .map((choice) => {
      const args = encodeURIComponent(JSON.stringify([permissionId, choice.optionId]));
      return `[${choice.title.replace(/[[\]]/g, '')}](command:${ANSWER_COMMAND}?${args})`;
    })
    .join(' · ');
}

/** The session a turn's `$/progress` is about: the daemon titles it "sessiond s4". */
export function progressSession(title: string | undefined): string | undefined {
  const match = /^sessiond (\S+)$/.exec(title ?? '');
  return match ? match[1] : undefined;
}

/** A turn's progress title, by the label rule of the rest: "sessiond Fix tests (s4)" for "sessiond s4". */
export function progressTitle(model: { sessions: Map<string, SessionInfo> }, title: string | undefined): string {
  const id = progressSession(title);
  const info = id ? model.sessions.get(id) : undefined;
  return info ? `sessiond ${sessionName(info)}` : (title ?? 'sessiond');
}

/**
 * What a turn's progress says while its session waits for a person: "needs you: delete the
 * cache?" (not the daemon's last "working"); undefined while it does not wait.
 */
export function waitingMessage(
  model: { sessions: Map<string, SessionInfo>; permissionsOf(session: string): PendingPermission[] },
  session: string,
): string | undefined {
  if (model.sessions.get(session)?.status !== 'needs_you') return undefined;
  const asked = model.permissionsOf(session)[0];
  return `needs you: ${asked?.toolCall.title ?? asked?.toolCall.kind ?? 'a permission request'}`;
}
