/**
 * Side chats and suggested tasks, as shown: quick pick entries, input boxes
 * and messages, as pure functions of the model. No `vscode` import.
 */
import type { SessionInfo, SideResult, TaskInfo } from '../protocol/types';
import { sessionName } from './format';
import type { ModelView } from './view';

/** What `vscode.window.showInputBox` is given (the fields this extension uses). */
export interface InputPrompt {
  title: string;
  prompt: string;
  placeHolder?: string;
  value?: string;
}

export interface TaskPickItem {
  label: string;
  description: string;
  detail?: string;
  task: string;
}

const TASK_STATUS_LABELS: Record<TaskInfo['status'], string> = {
  suggested: 'suggested',
  queued: 'queued',
  running: 'running',
  done: 'done',
  failed: 'failed',
  dismissed: 'dismissed',
};

/** "demo · from s1" (and the status when it is no longer suggested). */
export function taskDescription(task: TaskInfo): string {
  return [
    task.status === 'suggested' ? undefined : TASK_STATUS_LABELS[task.status],
    task.agent,
    task.fromSession ? `from ${task.fromSession}` : undefined,
    task.session ? `in ${task.session}` : undefined,
  ]
    .filter(Boolean)
    .join(' · ');
}

export function taskTooltip(task: TaskInfo): string {
  return [
    `${task.title} (${task.id}, ${TASK_STATUS_LABELS[task.status]})`,
    task.why ? `why: ${task.why}` : undefined,
    task.fromSession ? `suggested by ${task.fromSession}` : undefined,
    task.root ? `runs in ${task.root}${task.placement ? ` (${task.placement})` : ''}` : undefined,
    task.reason ? `${task.status === 'dismissed' ? 'dismissed' : 'reason'}: ${task.reason}` : undefined,
    '',
    task.prompt,
  ]
    .filter((line) => line !== undefined)
    .join('\n');
}

/** Suggested tasks to accept or dismiss, newest first. */
export function taskPickItems(model: ModelView): TaskPickItem[] {
  return model.suggestedTasks().map((task) => ({
    label: `$(lightbulb) ${task.title}`,
    description: taskDescription(task),
    detail: task.why ?? firstLine(task.prompt),
    task: task.id,
  }));
}

/** The input box that asks a side chat's question. */
export function sideChatPrompt(session: SessionInfo | undefined, id: string): InputPrompt {
  return {
    title: `Side chat beside ${session ? sessionName(session) : id}`,
    prompt: 'Asked in a session of its own that starts from this one\'s context; this session is untouched. It may not change files.',
    placeHolder: 'why is the test flaky?',
  };
}

/** The status bar's word once a side chat answered. */
export function sideAnswerMessage(result: SideResult): string {
  const first = firstLine(result.reply?.text ?? '');
  const how = result.forked ? 'forked' : 'from an account of the session';
  return `sessiond side chat ${result.session.id} (${how})${first ? `: ${first}` : ': no answer'}`;
}

/** The input box that asks why a task is dismissed. */
export function dismissPrompt(task: TaskInfo | undefined, id: string): InputPrompt {
  return {
    title: `Dismiss ${task ? `"${task.title}"` : id}`,
    prompt: 'Why? The reason is kept with the task.',
    value: 'not now',
  };
}

/** What accepting a task did, for a notification. */
export function acceptedMessage(task: TaskInfo): string {
  if (task.status === 'queued') return `Task "${task.title}" is queued: the agent runs at most its maxRunningTasks at once.`;
  if (task.session) return `Task "${task.title}" is ${TASK_STATUS_LABELS[task.status]} in session ${task.session}.`;
  return `Task "${task.title}" is ${TASK_STATUS_LABELS[task.status]}${task.reason ? `: ${task.reason}` : ''}.`;
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0] ?? '';
}

/** The open side chats of `session` (closed with it: they answer questions about it alone). */
export function openSideChats(model: ModelView, session: string): SessionInfo[] {
  return model.childSessions(session).filter((child) => child.kind === 'side');
}

/**
 * Whether the editors of `session` (its transcript, a prompt being written to it) go: a side chat
 * that is closed, or whose parent session is (a side chat is about its parent, and kept showing
 * beside a closed one, ready for prompts). Other sessions' transcripts stay to be read.
 */
export function editorsGo(model: ModelView, session: string): boolean {
  const info = model.sessions.get(session);
  if (info?.kind !== 'side') return false;
  if (info.status === 'closed') return true;
  const parent = info.parent ? model.sessions.get(info.parent) : undefined;
  return parent?.status === 'closed';
}

/** After Close Session: "sessiond: closed Fix tests (s3) and its 2 side chats". */
export function closedMessage(session: SessionInfo, sideChats: number): string {
  const sides = sideChats ? ` and its ${sideChats === 1 ? 'side chat' : `${sideChats} side chats`}` : '';
  return `sessiond: closed ${sessionName(session)}${sides}`;
}
