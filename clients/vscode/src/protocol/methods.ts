/**
 * Every method, notification and event kind this client uses, named once.
 *
 * The daemon's own names are checked against the generated schema types by the
 * compiler (`satisfies`), and a test checks that every method of the schema has
 * a name here. Architecture invariant: nothing under src/protocol imports `vscode`.
 */
import type {
  EventKind,
  ProtocolClientRequests,
  ProtocolMethods,
  ProtocolNotifications,
} from './schema.generated';

/** Requests a client sends to the daemon. */
export const Methods = {
  agentCreate: 'agent/create',
  agentList: 'agent/list',
  agentGet: 'agent/get',
  agentUpdate: 'agent/update',
  agentRemove: 'agent/remove',
  sessionOpen: 'session/open',
  sessionList: 'session/list',
  sessionGet: 'session/get',
  sessionPrompt: 'session/prompt',
  sessionCancel: 'session/cancel',
  sessionClose: 'session/close',
  sessionReopen: 'session/reopen',
  sessionPrune: 'session/prune',
  sessionTranscript: 'session/transcript',
  sessionControls: 'session/controls',
  sessionSetMode: 'session/setMode',
  sessionRename: 'session/rename',
  sessionSetConfigOption: 'session/setConfigOption',
  sessionSide: 'session/side',
  sessionTree: 'session/tree',
  sessionBroadcast: 'session/broadcast',
  taskSuggest: 'task/suggest',
  taskList: 'task/list',
  taskAccept: 'task/accept',
  taskDismiss: 'task/dismiss',
  threadStart: 'thread/start',
  threadStatus: 'thread/status',
  threadWait: 'thread/wait',
  mergeRequest: 'merge/request',
  mergeList: 'merge/list',
  runDeclare: 'run/declare',
  runEnd: 'run/end',
  runGet: 'run/get',
  runList: 'run/list',
  fleetSummary: 'fleet/summary',
  permissionList: 'permission/list',
  permissionAnswer: 'permission/answer',
  eventsSubscribe: 'events/subscribe',
  eventsUnsubscribe: 'events/unsubscribe',
  daemonStatus: 'daemon/status',
  daemonStop: 'daemon/stop',
} as const satisfies Record<string, keyof ProtocolMethods>;

/** Requests the daemon sends to a client. */
export const ClientRequests = {
  requestPermission: 'session/requestPermission',
} as const satisfies Record<string, keyof ProtocolClientRequests>;

/** Notifications the daemon sends. */
export const Notifications = {
  eventsNotify: 'events/notify',
} as const satisfies Record<string, keyof ProtocolNotifications>;

/** The LSP base protocol's lifecycle and progress messages the daemon speaks. */
export const Lsp = {
  initialize: 'initialize',
  initialized: 'initialized',
  shutdown: 'shutdown',
  exit: 'exit',
  progress: '$/progress',
  workDoneProgressCreate: 'window/workDoneProgress/create',
  workDoneProgressCancel: 'window/workDoneProgress/cancel',
} as const;

/** Event kinds of the daemon's event log. */
export const EventKinds = {
  agentCreated: 'agent.created',
  agentUpdated: 'agent.updated',
  agentRemoved: 'agent.removed',
  agentProcess: 'agent.process',
  sessionOpened: 'session.opened',
  sessionStatus: 'session.status',
  sessionClosed: 'session.closed',
  sessionReopened: 'session.reopened',
  sessionsPruned: 'sessions.pruned',
  sessionPlan: 'session.plan',
  sessionUsage: 'session.usage',
  sessionChanges: 'session.changes',
  sessionAttention: 'session.attention',
  sessionControls: 'session.controls',
  sessionTitled: 'session.titled',
  sessionCollision: 'session.collision',
  taskChanged: 'task.changed',
  mergeStep: 'merge.step',
  turnQueued: 'turn.queued',
  turnStarted: 'turn.started',
  turnChunk: 'turn.chunk',
  turnThought: 'turn.thought',
  turnTool: 'turn.tool',
  turnEnded: 'turn.ended',
  fleetSummary: 'fleet.summary',
  permissionAsked: 'permission.asked',
  permissionAnswered: 'permission.answered',
} as const satisfies Record<string, EventKind>;
