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
    message: `sessiond ${who}: ${permission.agent ?? 'the agent'} asks permission: ${what}${where ? ` (${where})` : ''}`,
    choices: permission.options.map((option) => ({ title: option.name || option.optionId, optionId: option.optionId })),
  };
}
