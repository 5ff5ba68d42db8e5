import * as vscode from 'vscode';
import { describeError, errorSentence } from '../protocol/errors';
import { DaemonRestartError, type Sessiond } from '../protocol/live';
import { Methods } from '../protocol/methods';
import { acceptedMessage, closedMessage, dismissPrompt, openSideChats, sideAnswerMessage, sideChatPrompt, taskPickItems } from '../ui/around';
import { rowLost, rowLostMessage } from '../ui/rows';
import { randomUUID } from 'node:crypto';
import { lastPromptOf, placementItems, sentMessage, turnEndedMessage } from '../ui/compose';
import {
  notConnectedNotice,
  reconnectedMessage,
  reconnectFailedMessage,
  restartedMessage,
  restartFailedMessage,
  restartWarning,
  START_COMMAND,
} from '../ui/daemon';
import { RECONNECT_COMMAND } from '../ui/status';
import { renamePrompt, sessionName, titleProblem } from '../ui/format';
import { cancelledMessage, cancelQuestion, closeQuestion, nothingToCancel, turnsLabel } from '../ui/turns';
import { gatePrompt, mergeableSessions, mergeOptionItems, strategyItems } from '../ui/merge';
import { pickItem, sessionPickItems, step, type SessionPickItem } from '../ui/quickpick';
import type { TreeNode } from '../ui/tree';
import type { Compose } from './compose';
import { openChangedFile } from './diff';
import { followMerge, type MergeOutput } from './merge';
import type { Permissions } from './permissions';
import type { StatusBar } from './statusBar';
import { openTimeline } from './timeline';
import { transportOptions } from './config';
import { timelineRun } from '../ui/timeline';
import type { Transcripts } from './transcripts';

interface Parts {
  sessiond: Sessiond;
  statusBar: StatusBar;
  transcripts: Transcripts;
  permissions: Permissions;
  compose: Compose;
  mergeOutput: MergeOutput;
  /** Remembered across windows: the last gate asked for. */
  state: vscode.Memento;
  /** The extension's own folder (its global storage): timelines are written under it. */
  storage: string;
  output: vscode.LogOutputChannel;
  /** Select a session in the Sessions view, when the view is showing. */
  reveal: (session: string) => void;
}

/** A command's session: from a tree node or an id, else the current one, else picked. */
type SessionArg = string | TreeNode | undefined;

export function registerCommands(parts: Parts): vscode.Disposable[] {
  const { sessiond, statusBar, transcripts, permissions, compose, mergeOutput, state, storage, output, reveal } = parts;

  function setCurrent(session: string): void {
    statusBar.setCurrent(session);
    reveal(session);
  }
  const model = sessiond.model;

  /**
   * Pick a session (those with a turn in hand first), each with its status and its last prompt
   * whole on the detail line; prompts this window has not seen are read from the transcripts.
   */
  async function pick(placeHolder: string, sessions = sessionPickItems(model, statusBar.current)): Promise<string | undefined> {
    const quickPick = vscode.window.createQuickPick<SessionPickItem>();
    Object.assign(quickPick, { placeholder: placeHolder, matchOnDescription: true, matchOnDetail: true, ignoreFocusOut: false });
    quickPick.items = sessions;
    const chosen = new Promise<string | undefined>((resolve) => {
      quickPick.onDidAccept(() => resolve(quickPick.selectedItems[0]?.session));
      quickPick.onDidHide(() => resolve(undefined));
    });
    quickPick.show();
    void backfillPrompts(quickPick);
    const session = await chosen;
    quickPick.dispose();
    return session;
  }

  async function backfillPrompts(quickPick: vscode.QuickPick<SessionPickItem>): Promise<void> {
    const unknown = quickPick.items.filter((item) => !model.lastPrompts.has(item.session)).slice(0, 30);
    if (!unknown.length) return;
    await Promise.all(
      unknown.map(async (item) => {
        try {
          const page = await sessiond.request(Methods.sessionTranscript, { session: item.session, limit: 60 });
          const prompt = lastPromptOf(page.lines);
          if (prompt && !model.lastPrompts.has(item.session)) model.lastPrompts.set(item.session, prompt);
        } catch {
          // An older daemon, or the session went: its entry keeps its reply.
        }
      }),
    );
    const active = quickPick.activeItems[0]?.session;
    quickPick.items = quickPick.items.map((item) => {
      const info = model.sessions.get(item.session);
      return info ? pickItem(info, model.lastPrompts.get(item.session), item.session === statusBar.current) : item;
    });
    const again = quickPick.items.find((item) => item.session === active);
    if (again) quickPick.activeItems = [again];
  }

  /** One of the sessions closed last, picked (none closed: says so). */
  async function pickClosed(): Promise<string | undefined> {
    const closed = await run(Methods.sessionList, () =>
      sessiond.request(Methods.sessionList, { status: ['closed'], includeClosed: true, sort: 'activity', limit: 50, brief: true }),
    );
    if (!closed) return undefined;
    if (!closed.sessions.length) {
      void vscode.window.showInformationMessage('sessiond: no closed sessions to reopen');
      return undefined;
    }
    return pick('Reopen which session? (closed last first)', closed.sessions.map((info) => pickItem(info)));
  }

  /**
   * The session a row or a script names; from the palette (no row), picked, the current session
   * first and preselected: a command never acts on a session the person did not see named.
   */
  async function sessionOf(arg: SessionArg, placeHolder: string): Promise<string | undefined> {
    if (typeof arg === 'string') return arg;
    if (arg && 'session' in arg) return arg.session;
    return pick(placeHolder);
  }

  /** Run a request, telling the person what failed and to what. */
  async function run<T>(method: string, action: () => Promise<T>): Promise<T | undefined> {
    try {
      return await action();
    } catch (error) {
      output.error(describeError(method, error));
      void vscode.window.showErrorMessage(errorSentence(error));
      return undefined;
    }
  }

  /**
   * "Send Prompt": a compose editor for the session of the row it was run on, else for a session
   * picked now (never silently the last one opened). Ctrl+Enter or its send button sends it.
   */
  async function sendPrompt(arg?: SessionArg): Promise<void> {
    const session = await sessionOf(arg, 'Send a prompt to which session? (a compose editor opens for it)');
    if (!session) return;
    statusBar.setCurrent(session);
    await compose.open(session);
  }

  /** Send what a compose editor holds to its session; the turn runs on (its progress shows). */
  async function sendComposed(uri?: vscode.Uri): Promise<void> {
    const composed = await compose.take(uri instanceof vscode.Uri ? uri : undefined);
    if (!composed) return;
    const { session, text } = composed;
    const info = model.sessions.get(session);
    statusBar.setCurrent(session);
    vscode.window.setStatusBarMessage(sentMessage(info, session, text), 8000);
    // The daemon reports the turn through $/progress (TurnProgress); here we only wait for its end.
    // The turn's id is ours, so its events tell whether the daemon took the prompt.
    const turnId = `vscode-${randomUUID()}`;
    let taken = false;
    const listener = model.onEvent((event) => {
      if (event.turn === turnId) taken = true;
    });
    try {
      const result = await sessiond.prompt(session, text, undefined, turnId);
      const message = turnEndedMessage(model.sessions.get(session), session, result.stopReason, result.text);
      output.info(message);
      vscode.window.setStatusBarMessage(message, 15_000);
    } catch (error) {
      output.error(describeError(Methods.sessionPrompt, error));
      // A prompt the daemon did not take goes back into a compose editor, so nothing written is lost.
      if (!taken) await compose.open(session, text);
      void vscode.window.showErrorMessage(errorSentence(error));
    } finally {
      listener.dispose();
    }
  }

  /** "New Session…": agent, root (the workspace folder first), placement and title; then a compose editor. */
  async function newSession(arg?: TreeNode): Promise<void> {
    if (!(await ensureConnected('no session can be opened'))) return;
    const agents = [...model.agents.keys()];
    const agent =
      arg?.type === 'agent'
        ? arg.agent
        : agents.length > 1
          ? await vscode.window.showQuickPick(agents, { placeHolder: 'New session: which agent?', ignoreFocusOut: true })
          : (agents[0] ?? 'demo');
    if (!agent) return;
    const root = await pickRoot();
    if (!root) return;
    const placement = await vscode.window.showQuickPick(placementItems(model.agents.get(agent)), {
      placeHolder: `New session of ${agent} in ${root}: where does its work land?`,
      matchOnDetail: true,
      ignoreFocusOut: true,
    });
    if (!placement) return;
    let placementSettings: { sshTarget: string } | undefined;
    if (placement.placement === 'ssh') {
      const target = await vscode.window.showInputBox({
        title: 'New session over ssh: target',
        prompt: 'user@host[:port], with your ssh config and keys (empty: the agent\'s sshTarget)',
        ignoreFocusOut: true,
      });
      if (target === undefined) return;
      if (target.trim()) placementSettings = { sshTarget: target.trim() };
    }
    const title = await vscode.window.showInputBox({ title: 'Title of the new session (optional)', ignoreFocusOut: true });
    if (title === undefined) return;
    let opened;
    try {
      opened = await sessiond.request(Methods.sessionOpen, {
        agent,
        root,
        placement: placement.placement,
        ...(placementSettings ? { placementSettings } : {}),
        ...(title ? { title } : {}),
      });
    } catch (error) {
      // The daemon's own sentence ("root /tmp is not in a git repository; use placement here or run git init").
      output.error(describeError(Methods.sessionOpen, error));
      const sentence = error instanceof Error ? error.message.replace(/^placement: /, '') : String(error);
      void vscode.window.showErrorMessage(`sessiond: ${sentence}`);
      return;
    }
    const session = opened.sessions[0];
    if (!session) return;
    model.upsertSession(session);
    model.flushChanges();
    setCurrent(session.id);
    await compose.open(session.id);
  }

  /** The session's root: the workspace folder(s) first, or another folder. */
  async function pickRoot(): Promise<string | undefined> {
    const folders = vscode.workspace.workspaceFolders ?? [];
    const other = { label: '$(folder-opened) Another folder…', description: '', root: undefined as string | undefined };
    let root: string | undefined;
    if (folders.length) {
      const choice = await vscode.window.showQuickPick(
        [...folders.map((folder) => ({ label: `$(root-folder) ${folder.name}`, description: folder.uri.fsPath, root: folder.uri.fsPath })), other],
        { placeHolder: 'New session: in which folder?', ignoreFocusOut: true },
      );
      if (!choice) return undefined;
      root = choice.root;
    }
    root ??= (await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Open a session here' }))?.[0]?.fsPath;
    return root;
  }

  /**
   * "Merge Session…": strategy, gate and options, then merge/request; the queue and outcome follow.
   * Each step of a flow like this one or "New Session…" keeps its place when focus moves
   * (ignoreFocusOut): a look at the tree, or focus handed back to the view the flow started from
   * as the previous step closes, must not drop the steps already answered.
   */
  async function merge(arg?: SessionArg): Promise<void> {
    let session: string | undefined;
    if (typeof arg === 'string') session = arg;
    else if (arg && 'session' in arg) session = arg.session;
    else {
      const items = mergeableSessions(model).map((info) => pickItem(info, model.lastPrompts.get(info.id)));
      if (!items.length) {
        void vscode.window.showInformationMessage('sessiond: no open session works in a worktree; start one with "sessiond: New Session…" and placement worktree.');
        return;
      }
      session = await pick('Merge which worktree session into its base branch?', items);
    }
    if (!session) return;
    const info = model.sessions.get(session);
    const name = info ? sessionName(info) : session;
    const strategy = await vscode.window.showQuickPick(strategyItems(), { placeHolder: `Merge ${name}: how?`, ignoreFocusOut: true });
    if (!strategy) return;
    const gate = await vscode.window.showInputBox({ ...gatePrompt(info, session, state.get<string>('sessiond.lastGate')), ignoreFocusOut: true });
    if (gate === undefined) return;
    const options = await vscode.window.showQuickPick(mergeOptionItems(), {
      placeHolder: `Merge ${name}: options (Enter: neither)`,
      canPickMany: true,
      ignoreFocusOut: true,
    });
    if (!options) return;
    await state.update('sessiond.lastGate', gate.trim() || undefined);
    const picked = new Set(options.map((option) => option.option));
    const entry = await run(Methods.mergeRequest, () =>
      sessiond.merge({
        session: session,
        strategy: strategy.strategy,
        gate: gate.trim() || null,
        keep: picked.has('keep'),
        handBack: picked.has('handBack'),
      }),
    );
    if (!entry) return;
    output.info(`merge of ${session} asked: ${entry.branch} → ${entry.base} (${entry.strategy}${entry.gate ? `, gate ${entry.gate}` : ''})`);
    await followMerge(sessiond, session, mergeOutput, output);
  }

  /**
   * Connect now: to a daemon that runs (Reconnect), or starting one unless one runs (Start the
   * Daemon, whatever the setting sessiond.startDaemon); says how it went. True once connected.
   */
  async function connect(start: boolean): Promise<boolean> {
    const command = start ? START_COMMAND : RECONNECT_COMMAND;
    if (start && sessiond.state === 'connected') {
      void vscode.window.showInformationMessage(`sessiond: the daemon runs already; connected through ${sessiond.connection?.description}`);
      return true;
    }
    output.info(`${start ? 'starting the daemon' : 'reconnecting now'}, as asked (${command})`);
    // A command waiting on a connection (its notice showing) goes on once this one is made.
    if (waiting) waiting.asked = true;
    try {
      const client = await (start ? sessiond.startDaemon() : sessiond.reconnect());
      const message = reconnectedMessage(client.description);
      output.info(`${message} (${command})`);
      void vscode.window.showInformationMessage(message);
      return true;
    } catch (error) {
      const message = reconnectFailedMessage(error instanceof Error ? error.message : String(error));
      output.error(message);
      void vscode.window.showErrorMessage(message, 'Show Log').then((answer) => answer && output.show());
      return false;
    }
  }

  /** What can be done while not connected: start a daemon, reconnect, read the log (the status bar's click). */
  async function connectionMenu(): Promise<void> {
    const items = [
      { label: '$(play) Start the Daemon', description: 'through `sessiond stdio`, unless one runs', run: () => connect(true) },
      { label: '$(debug-disconnect) Reconnect', description: 'to a daemon that runs (started elsewhere)', run: () => connect(false) },
      { label: '$(output) Show Log', description: 'each attempt to connect, and why it failed', run: (): Promise<boolean> => {
        output.show();
        return Promise.resolve(true);
      } },
    ];
    const title = sessiond.state === 'stopped' ? 'The sessiond daemon was stopped' : 'Not connected to the sessiond daemon';
    const choice = await vscode.window.showQuickPick(items, { title, placeHolder: sessiond.lastError ?? 'What now?' });
    if (choice) await choice.run();
  }

  /** The notice a command waits on while not connected (one at a time), and whether a connection was asked for since. */
  let waiting: { asked: boolean; done: Promise<boolean> } | undefined;

  /**
   * True when connected (a first attempt under way is waited for a moment); else says so before
   * anything is asked, in a notification whose links start the daemon or reconnect. The
   * notification goes as soon as a daemon is connected, however (started here or elsewhere); the
   * command goes on (true) only when the person asked for that connection meanwhile (its links,
   * the status bar's menu, the palette), not when a daemon came back by itself, maybe much later.
   */
  async function ensureConnected(what: string): Promise<boolean> {
    if (sessiond.state === 'starting') await sessiond.whenConnected(3000).catch(() => undefined);
    if (sessiond.state === 'connected') return true;
    if (waiting) return waiting.done;
    const { title, message } = notConnectedNotice(what, sessiond.state === 'stopped', sessiond.lastError, {
      start: 'sessiond.startDaemon',
      reconnect: 'sessiond.reconnect',
    });
    output.info(`${title}; waiting for a connection`);
    const notice: { asked: boolean; done: Promise<boolean> } = { asked: false, done: Promise.resolve(false) };
    notice.done = new Promise<boolean>((resolve) => {
      void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (progress, token) =>
        new Promise<void>((end) => {
          const finish = (goOn: boolean): void => {
            connected.dispose();
            cancelled.dispose();
            if (waiting === notice) waiting = undefined;
            end();
            resolve(goOn);
          };
          const connected = sessiond.onDidChangeState((state) => state === 'connected' && finish(notice.asked));
          const cancelled = token.onCancellationRequested(() => finish(false));
          // Connected before VS Code ran this (it may run it a moment later): gone at once.
          if (sessiond.state === 'connected') finish(notice.asked);
          else progress.report({ message });
        }),
      );
    });
    waiting = notice;
    return notice.done;
  }

  /** A merge row's click: the gate output of a failed gate, else the session's transcript. */
  async function showMergeOutcome(session?: string): Promise<void> {
    if (!session) return;
    const entry = model.merges.get(session);
    if (entry?.status === 'failed' && entry.gateOutput !== null && entry.gateOutput !== undefined) await mergeOutput.show(session);
    else await run(Methods.sessionTranscript, () => transcripts.open(session));
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
    'sessiond.sendComposed': sendComposed,
    'sessiond.merge': merge,
    'sessiond.showMergeOutcome': showMergeOutcome,
    'sessiond.sideChat': sideChat,
    'sessiond.acceptTask': acceptTask,
    'sessiond.dismissTask': dismissTask,
    'sessiond.cancel': async (arg?: SessionArg) => {
      const session = await sessionOf(arg, 'Cancel the turns of which session?');
      if (!session) return;
      const info = model.sessions.get(session);
      if (info && arg === undefined && !turnsLabel(info)) {
        void vscode.window.showInformationMessage(nothingToCancel(info));
        return;
      }
      const question = info && cancelQuestion(info, arg === undefined);
      if (question && (await vscode.window.showWarningMessage(question, { modal: true }, 'Cancel Turns')) !== 'Cancel Turns') return;
      const result = await run(Methods.sessionCancel, () => sessiond.request(Methods.sessionCancel, { session }));
      if (result) vscode.window.setStatusBarMessage(cancelledMessage(info, session, result.cancelled), 8000);
    },
    'sessiond.rename': async (arg?: SessionArg) => {
      const session = await sessionOf(arg, 'Rename which session?');
      if (!session) return;
      const prompt = renamePrompt(model.sessions.get(session), session);
      const title = await vscode.window.showInputBox({ ...prompt, validateInput: titleProblem, ignoreFocusOut: true });
      if (!title) return;
      const renamed = await run(Methods.sessionRename, () => sessiond.request(Methods.sessionRename, { session, title }));
      if (renamed) model.upsertSession(renamed);
    },
    'sessiond.reopen': async (arg?: string) => {
      // A closed session is in no row: given by id (a script), else picked among those closed last.
      const session = arg ?? (await pickClosed());
      if (!session) return;
      const reopened = await run(Methods.sessionReopen, () => sessiond.request(Methods.sessionReopen, { session }));
      if (!reopened) return;
      model.upsertSession(reopened);
      setCurrent(reopened.id);
      vscode.window.setStatusBarMessage(`sessiond: reopened ${sessionName(reopened)}; its next prompt goes on where it left off`, 5000);
    },
    'sessiond.close': async (arg?: SessionArg) => {
      const session = await sessionOf(arg, 'Close which session?');
      if (!session) return;
      const info = model.sessions.get(session);
      const question = info && closeQuestion(info, arg === undefined);
      if (question && (await vscode.window.showWarningMessage(question, { modal: true }, 'Close')) !== 'Close') return;
      const sideChats = openSideChats(model, session);
      const closed = await run(Methods.sessionClose, () => sessiond.request(Methods.sessionClose, { session }));
      if (!closed) return;
      model.upsertSession(closed);
      // Its open side chats went with it, closed by the daemon (their editors close: SideChatEditors).
      vscode.window.setStatusBarMessage(closedMessage(closed, sideChats.length), 8000);
    },
    'sessiond.nextWorking': () => stepTo(1),
    'sessiond.previousWorking': () => stepTo(-1),
    'sessiond.pickSession': async () => {
      if (sessiond.state !== 'connected' && sessiond.state !== 'starting') return connectionMenu();
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
    // From a notification's link: the request and the option chosen; from a row or the palette: a pick.
    'sessiond.answerPermission': async (arg?: string | TreeNode, optionId?: string) =>
      typeof arg === 'string' && typeof optionId === 'string'
        ? permissions.answer(arg, optionId)
        : permissions.choose(typeof arg === 'string' ? arg : arg?.type === 'permission' ? arg.permission : undefined),
    'sessiond.reconnect': () => connect(false),
    'sessiond.startDaemon': () => connect(true),
    'sessiond.restartDaemon': restartDaemon,
    'sessiond.showLog': () => output.show(),
    'sessiond.openTimeline': async (arg?: SessionArg) => {
      // A row's (or the current) session's run; else the last hour of the whole daemon.
      const id = typeof arg === 'string' ? arg : arg && 'session' in arg ? arg.session : statusBar.current;
      const run = timelineRun(id ? model.sessions.get(id) : undefined);
      const { sessiondPath, socket } = transportOptions(output);
      try {
        const file = await vscode.window.withProgress(
          { location: vscode.ProgressLocation.Window, title: 'sessiond: drawing the timeline…' },
          () => openTimeline(sessiondPath ?? 'sessiond', socket, run, storage),
        );
        output.info(`timeline of ${run ?? 'the last hour'} written to ${file}`);
      } catch (error) {
        const message = `sessiond: could not draw the timeline: ${error instanceof Error ? error.message : String(error)}`;
        output.error(message);
        void vscode.window.showErrorMessage(message, 'Show Log').then((answer) => answer && output.show());
      }
    },
  };
  // Any command connects first (the extension may have activated without connecting). A row's
  // command whose row VS Code no longer finds says so, and does nothing (see ui/rows).
  return Object.entries(commands).map(([id, handler]) =>
    vscode.commands.registerCommand(id, (...args: never[]) => {
      sessiond.start();
      const title = ROW_COMMANDS[id];
      if (title && rowLost(args)) {
        output.warn(`${id} ran from a row VS Code no longer has (${args.length} arguments, the first ${String(args[0])})`);
        void vscode.window.showWarningMessage(rowLostMessage(title));
        return undefined;
      }
      return handler(...args);
    }),
  );
}

/** The commands of the Sessions view's rows (package.json's view/item/context), by their titles. */
const ROW_COMMANDS: Record<string, string> = {
  'sessiond.newSession': 'New Session…',
  'sessiond.sendPrompt': 'Send Prompt…',
  'sessiond.cancel': 'Cancel Turns',
  'sessiond.sideChat': 'Open Side Chat…',
  'sessiond.merge': 'Merge Session…',
  'sessiond.openTranscript': 'Open Transcript',
  'sessiond.rename': 'Rename Session…',
  'sessiond.close': 'Close Session',
  'sessiond.answerPermission': 'Answer Permission Request',
  'sessiond.openChangedFile': 'Open Changes',
  'sessiond.acceptTask': 'Accept Suggested Task…',
  'sessiond.dismissTask': 'Dismiss Suggested Task…',
  'sessiond.showMergeOutcome': "Show the Merge's Outcome",
  'sessiond.openTimeline': "Open the Run's Timeline",
};
