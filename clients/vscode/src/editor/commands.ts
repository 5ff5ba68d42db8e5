import * as vscode from 'vscode';
import { describeError } from '../protocol/errors';
import { DaemonRestartError, type Sessiond } from '../protocol/live';
import { Methods } from '../protocol/methods';
import { acceptedMessage, dismissPrompt, sideAnswerMessage, sideChatPrompt, taskPickItems } from '../ui/around';
import { restartedMessage, restartFailedMessage, restartWarning } from '../ui/daemon';
import { plural, sessionName } from '../ui/format';
import { sessionPickItems, step } from '../ui/quickpick';
import type { TreeNode } from '../ui/tree';
import { openChangedFile } from './diff';
import type { Permissions } from './permissions';
import type { StatusBar } from './statusBar';
import type { Transcripts } from './transcripts';

interface Parts {
  sessiond: Sessiond;
  statusBar: StatusBar;
  transcripts: Transcripts;
  permissions: Permissions;
  output: vscode.LogOutputChannel;
  /** Select a session in the Sessions view, when the view is showing. */
  reveal: (session: string) => void;
}

/** A command's session: from a tree node or an id, else the current one, else picked. */
type SessionArg = string | TreeNode | undefined;

export function registerCommands(parts: Parts): vscode.Disposable[] {
  const { sessiond, statusBar, transcripts, permissions, output, reveal } = parts;

  function setCurrent(session: string): void {
    statusBar.setCurrent(session);
    reveal(session);
  }
  const model = sessiond.model;

  async function pick(placeHolder: string): Promise<string | undefined> {
    const item = await vscode.window.showQuickPick(sessionPickItems(model), { placeHolder, matchOnDescription: true, matchOnDetail: true });
    return item?.session;
  }

  async function sessionOf(arg: SessionArg, placeHolder: string, preferCurrent = true): Promise<string | undefined> {
    if (typeof arg === 'string') return arg;
    if (arg && 'session' in arg) return arg.session;
    if (preferCurrent && statusBar.current && model.sessions.get(statusBar.current)?.status !== 'closed') return statusBar.current;
    return pick(placeHolder);
  }

  /** Run a request, telling the person what failed and to what. */
  async function run<T>(method: string, action: () => Promise<T>): Promise<T | undefined> {
    try {
      return await action();
    } catch (error) {
      const message = describeError(method, error);
      output.error(message);
      void vscode.window.showErrorMessage(message);
      return undefined;
    }
  }

  async function sendPrompt(arg?: SessionArg): Promise<void> {
    const session = await sessionOf(arg, 'Send a prompt to which session?');
    if (!session) return;
    const info = model.sessions.get(session);
    const prompt = await vscode.window.showInputBox({
      title: `Prompt for ${info ? sessionName(info) : session}`,
      prompt: 'Turns of one session run in the order asked. The demo agent takes scripts such as "say hi".',
      ignoreFocusOut: true,
    });
    if (!prompt) return;
    statusBar.setCurrent(session);
    // The daemon reports the turn through $/progress (TurnProgress); here we only wait for its end.
    const result = await run(Methods.sessionPrompt, () => sessiond.prompt(session, prompt));
    if (result) {
      const first = result.text.trim().split('\n')[0] ?? '';
      vscode.window.setStatusBarMessage(`sessiond ${session}: ${result.stopReason}${first ? `: ${first}` : ''}`, 8000);
    }
  }

  async function newSession(arg?: TreeNode): Promise<void> {
    const folders = vscode.workspace.workspaceFolders ?? [];
    let root: string | undefined;
    if (folders.length === 1) root = folders[0].uri.fsPath;
    else if (folders.length > 1) root = (await vscode.window.showWorkspaceFolderPick({ placeHolder: 'New session in which folder?' }))?.uri.fsPath;
    else root = (await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Open a session here' }))?.[0]?.fsPath;
    if (!root) return;
    const agents = [...model.agents.keys()];
    const agent =
      arg?.type === 'agent'
        ? arg.agent
        : agents.length > 1
          ? await vscode.window.showQuickPick(agents, { placeHolder: 'Which agent?' })
          : (agents[0] ?? 'demo');
    if (!agent) return;
    const title = await vscode.window.showInputBox({ title: 'Title of the new session (optional)', ignoreFocusOut: true });
    if (title === undefined) return;
    const opened = await run(Methods.sessionOpen, () =>
      sessiond.request(Methods.sessionOpen, { agent, root, placement: 'here', ...(title ? { title } : {}) }),
    );
    const session = opened?.sessions[0];
    if (!session) return;
    model.upsertSession(session);
    model.flushChanges();
    setCurrent(session.id);
    await sendPrompt(session.id);
  }

  /** A command's task: from a tree node or an id, else picked among the suggested ones. */
  async function taskOf(arg: string | TreeNode | undefined, placeHolder: string): Promise<string | undefined> {
    if (typeof arg === 'string') return arg;
    if (arg?.type === 'task') return arg.task;
    const items = taskPickItems(model);
    if (!items.length) {
      void vscode.window.showInformationMessage('sessiond: no suggested tasks are waiting.');
      return undefined;
    }
    return (await vscode.window.showQuickPick(items, { placeHolder, matchOnDescription: true, matchOnDetail: true }))?.task;
  }

  async function sideChat(arg?: SessionArg): Promise<void> {
    const session = await sessionOf(arg, 'Open a side chat beside which session?');
    if (!session) return;
    const question = await vscode.window.showInputBox({ ...sideChatPrompt(model.sessions.get(session), session), ignoreFocusOut: true });
    if (!question) return;
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `sessiond: side chat beside ${session}`, cancellable: true },
      (_progress, token) => run(Methods.sessionSide, () => sessiond.side(session, question, false, token)),
    );
    if (!result) return;
    model.flushChanges();
    vscode.window.setStatusBarMessage(sideAnswerMessage(result), 10000);
    setCurrent(result.session.id);
    await run(Methods.sessionTranscript, () => transcripts.open(result.session.id));
  }

  async function acceptTask(arg?: string | TreeNode): Promise<void> {
    const task = await taskOf(arg, 'Accept which suggested task? (it runs in a session of its own)');
    if (!task) return;
    const info = await run(Methods.taskAccept, () => sessiond.acceptTask(task));
    if (!info) return;
    const open = info.session ? 'Open Transcript' : undefined;
    const answer = await vscode.window.showInformationMessage(acceptedMessage(info), ...(open ? [open] : []));
    if (answer && info.session) {
      setCurrent(info.session);
      await run(Methods.sessionTranscript, () => transcripts.open(info.session!));
    }
  }

  async function dismissTask(arg?: string | TreeNode): Promise<void> {
    const task = await taskOf(arg, 'Dismiss which suggested task?');
    if (!task) return;
    const reason = await vscode.window.showInputBox({ ...dismissPrompt(model.tasks.get(task), task), ignoreFocusOut: true });
    if (!reason) return;
    const info = await run(Methods.taskDismiss, () => sessiond.dismissTask(task, reason));
    if (info) vscode.window.setStatusBarMessage(`sessiond: dismissed "${info.title}": ${reason}`, 5000);
  }

  async function stepTo(direction: 1 | -1): Promise<void> {
    const next = step(model, statusBar.current, direction);
    if (!next) {
      vscode.window.setStatusBarMessage('sessiond: no session is working now', 4000);
      return;
    }
    setCurrent(next.session.id);
    vscode.window.setStatusBarMessage(`sessiond: ${next.label}: ${sessionName(next.session)}`, 6000);
    await transcripts.open(next.session.id, true);
  }

  let restarting: Promise<void> | undefined;
  /** daemon/stop, then the usual reconnect (`sessiond stdio` starts a new daemon); see Sessiond.restartDaemon. */
  function restartDaemon(): Promise<void> {
    // Run again while one is under way: the same restart, not a second stop.
    restarting ??= restartOnce().finally(() => (restarting = undefined));
    return restarting;
  }

  async function restartOnce(): Promise<void> {
    const warning = restartWarning(model);
    if (warning && (await vscode.window.showWarningMessage(warning, { modal: true }, 'Restart')) !== 'Restart') return;
    try {
      const restart = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'sessiond: restarting the daemon…' },
        () => sessiond.restartDaemon(),
      );
      const message = restartedMessage(restart);
      output.info(message);
      void vscode.window.showInformationMessage(message);
    } catch (error) {
      const message =
        error instanceof DaemonRestartError ? restartFailedMessage(error) : describeError(Methods.daemonStop, error);
      output.error(message);
      void vscode.window.showErrorMessage(message, 'Show Log').then((answer) => answer && output.show());
    }
  }

  const commands: Record<string, (...args: never[]) => unknown> = {
    'sessiond.newSession': newSession,
    'sessiond.sendPrompt': sendPrompt,
    'sessiond.sideChat': sideChat,
    'sessiond.acceptTask': acceptTask,
    'sessiond.dismissTask': dismissTask,
    'sessiond.cancel': async (arg?: SessionArg) => {
      const session = await sessionOf(arg, 'Cancel the turns of which session?');
      if (!session) return;
      const result = await run(Methods.sessionCancel, () => sessiond.request(Methods.sessionCancel, { session }));
      if (result) vscode.window.setStatusBarMessage(`sessiond ${session}: ${plural(result.cancelled, 'turn')} told to stop`, 5000);
    },
    'sessiond.close': async (arg?: SessionArg) => {
      const session = await sessionOf(arg, 'Close which session?');
      if (!session) return;
      const info = model.sessions.get(session);
      const working = info && ['working', 'queued', 'needs_you'].includes(info.status);
      if (working) {
        const answer = await vscode.window.showWarningMessage(
          `${sessionName(info)} is ${info.status}: closing it cancels its turns.`,
          { modal: true },
          'Close',
        );
        if (answer !== 'Close') return;
      }
      const closed = await run(Methods.sessionClose, () => sessiond.request(Methods.sessionClose, { session }));
      if (closed) model.upsertSession(closed);
    },
    'sessiond.nextWorking': () => stepTo(1),
    'sessiond.previousWorking': () => stepTo(-1),
    'sessiond.pickSession': async () => {
      const session = await pick('Open which session? (those with a turn in hand first)');
      if (!session) return;
      setCurrent(session);
      await transcripts.open(session);
    },
    'sessiond.openTranscript': async (arg?: SessionArg) => {
      const session = await sessionOf(arg, 'Open the transcript of which session?');
      if (!session) return;
      statusBar.setCurrent(session);
      await run(Methods.sessionTranscript, () => transcripts.open(session));
    },
    'sessiond.openChangedFile': async (arg?: string | TreeNode, path?: string) => {
      if (arg && typeof arg === 'object' && arg.type === 'file') await openChangedFile(sessiond, arg.session, arg.path);
      else if (typeof arg === 'string' && path) await openChangedFile(sessiond, arg, path);
    },
    'sessiond.answerPermission': async (arg?: string | TreeNode) =>
      permissions.choose(typeof arg === 'string' ? arg : arg?.type === 'permission' ? arg.permission : undefined),
    'sessiond.reconnect': () => sessiond.reconnect(),
    'sessiond.restartDaemon': restartDaemon,
    'sessiond.showLog': () => output.show(),
  };
  // Any command connects first (the extension may have activated without connecting).
  return Object.entries(commands).map(([id, handler]) =>
    vscode.commands.registerCommand(id, (...args: never[]) => {
      sessiond.start();
      return handler(...args);
    }),
  );
}
