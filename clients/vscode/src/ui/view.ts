import type { FleetModel } from '../protocol/model';

/** What the views read of the model: they never change it. */
export type ModelView = Pick<
  FleetModel,
  'agents' | 'sessions' | 'permissions' | 'tasks' | 'fleet' | 'openSessions' | 'permissionsOf' | 'childSessions' | 'sessionsUnder' | 'agentSessions' | 'suggestedTasks' | 'merges' | 'mergeQueue' | 'lastPrompts'
>;
