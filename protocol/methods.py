"""Every method and notification, with its params and result models.

This table gives each method (named in `names.py`) its models; the server
registers its handlers from it, the client calls through it, and the JSON
Schema and docs/protocol.md are generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from sessiond.protocol import models as m
from sessiond.protocol.names import (
    AGENT_CREATE,
    AGENT_GET,
    AGENT_LIST,
    AGENT_REMOVE,
    AGENT_UPDATE,
    DAEMON_STATUS,
    DAEMON_STOP,
    EVENTS_NOTIFY,
    EVENTS_SUBSCRIBE,
    EVENTS_UNSUBSCRIBE,
    FLEET_SUMMARY,
    MERGE_LIST,
    MERGE_REQUEST,
    PERMISSION_ANSWER,
    PERMISSION_LIST,
    REQUEST_PERMISSION,
    RUN_DECLARE,
    RUN_END,
    RUN_GET,
    RUN_LIST,
    SESSION_BROADCAST,
    SESSION_CANCEL,
    SESSION_CLOSE,
    SESSION_CONTROLS,
    SESSION_GET,
    SESSION_LIST,
    SESSION_OPEN,
    SESSION_PROMPT,
    SESSION_PRUNE,
    SESSION_RENAME,
    SESSION_REOPEN,
    SESSION_SET_CONFIG,
    SESSION_SET_MODE,
    SESSION_SIDE,
    SESSION_TRANSCRIPT,
    SESSION_TREE,
    TASK_ACCEPT,
    TASK_DISMISS,
    TASK_LIST,
    TASK_SUGGEST,
    THREAD_START,
    THREAD_STATUS,
    THREAD_WAIT,
)


@dataclass(frozen=True)
class Method:
    name: str
    params: type[BaseModel]
    result: type[BaseModel]
    summary: str


@dataclass(frozen=True)
class ClientRequest:
    """A request the daemon sends to a client."""

    name: str
    params: type[BaseModel]
    result: type[BaseModel]
    summary: str


@dataclass(frozen=True)
class Notification:
    name: str
    params: type[BaseModel]
    summary: str


_METHODS = [
    Method(AGENT_CREATE, m.AgentSpec, m.AgentInfo, "Create an agent. Its process starts on its first turn."),
    Method(AGENT_LIST, m.Empty, m.AgentList, "Every agent, the built-in `demo` first."),
    Method(AGENT_GET, m.AgentRef, m.AgentInfo, "One agent, with its process state and capabilities."),
    Method(AGENT_UPDATE, m.AgentUpdateParams, m.AgentInfo, "Change an agent's command, env or options."),
    Method(
        AGENT_REMOVE,
        m.AgentRef,
        m.Removed,
        "Remove an agent: its sessions are closed and its process stopped.",
    ),
    Method(
        SESSION_OPEN,
        m.SessionOpenParams,
        m.SessionOpenResult,
        "Open sessions. Costs nothing: the agent hears of a session on its first turn.",
    ),
    Method(
        SESSION_LIST,
        m.SessionListParams,
        m.SessionPage,
        "Sessions, filtered, oldest first, a page at a time.",
    ),
    Method(SESSION_GET, m.SessionRef, m.SessionInfo, "One session."),
    Method(
        SESSION_PROMPT,
        m.SessionPromptParams,
        m.TurnResult,
        "Run a turn. Turns of one session run one after another in the order asked.",
    ),
    Method(
        SESSION_CANCEL,
        m.SessionCancelParams,
        m.CancelResult,
        "Stop a session's running and queued turns; each ends with stop reason `cancelled`.",
    ),
    Method(SESSION_CLOSE, m.SessionRef, m.SessionInfo, "Close a session; its turns are cancelled first."),
    Method(
        SESSION_REOPEN,
        m.SessionRef,
        m.SessionInfo,
        "Open a closed session again, as it was; its next turn asks its agent to restore the conversation.",
    ),
    Method(
        SESSION_PRUNE,
        m.SessionPruneParams,
        m.PruneResult,
        "Remove from the store the sessions closed before a time, with their turns and events.",
    ),
    Method(
        SESSION_TRANSCRIPT,
        m.TranscriptParams,
        m.Transcript,
        "Lines of a session's transcript: its tail, or any range of the whole of it.",
    ),
    Method(
        SESSION_CONTROLS,
        m.SessionRef,
        m.SessionControls,
        "What the session's agent lets a person change (modes, config options) and its slash commands.",
    ),
    Method(
        SESSION_RENAME,
        m.SessionRenameParams,
        m.SessionInfo,
        "Name the session: a title of the client's, which the daemon and its agent then leave alone.",
    ),
    Method(
        SESSION_SET_MODE,
        m.SessionSetModeParams,
        m.SessionControls,
        "Choose the session's mode: at the agent now if the session is live there, else when it opens.",
    ),
    Method(
        SESSION_SET_CONFIG,
        m.SessionSetConfigParams,
        m.SessionControls,
        "Set one of the session's config options (the model, say): now if live, else when it opens.",
    ),
    Method(FLEET_SUMMARY, m.Empty, m.Fleet, "Every session at a glance: counts, cost, attention."),
    Method(
        SESSION_SIDE,
        m.SideParams,
        m.SideResult,
        "Open a side chat beside a session: a session of its own that starts from the main one's context "
        "and adds nothing to it.",
    ),
    Method(
        SESSION_TREE,
        m.SessionRef,
        m.TreeNode,
        "A session with its side chats, tasks and threads, and their cost.",
    ),
    Method(
        SESSION_BROADCAST,
        m.BroadcastParams,
        m.BroadcastResult,
        "Queue one prompt as the next turn of several sessions (or of every thread of a coordinator).",
    ),
    Method(TASK_SUGGEST, m.TaskSuggestParams, m.TaskInfo, "Put a suggested task in an agent's inbox."),
    Method(TASK_LIST, m.TaskListParams, m.TaskList, "Suggested tasks, newest first."),
    Method(
        TASK_ACCEPT,
        m.TaskRef,
        m.TaskInfo,
        "Accept a suggested task: it runs in a session of its own (a worktree by default), "
        "after the agent's max_running_tasks allow.",
    ),
    Method(TASK_DISMISS, m.TaskDismissParams, m.TaskInfo, "Dismiss a suggested task, saying why."),
    Method(
        THREAD_START,
        m.ThreadStartParams,
        m.SessionInfo,
        "Start a thread of a coordinator session: a session of its own, in its own worktree, "
        "that reports back.",
    ),
    Method(
        THREAD_STATUS,
        m.ThreadRef,
        m.ThreadReport,
        "A thread's report: its status, last reply, plan and changes.",
    ),
    Method(
        THREAD_WAIT, m.ThreadWaitParams, m.ThreadReports, "Wait until the threads are done; their reports."
    ),
    Method(
        MERGE_REQUEST,
        m.MergeParams,
        m.MergeEntry,
        "Queue a worktree session's branch to merge into its base, one at a time per repository.",
    ),
    Method(MERGE_LIST, m.Empty, m.MergeList, "Every merge waiting, running or done, per repository."),
    Method(
        RUN_DECLARE,
        m.RunDeclareParams,
        m.RunInfo,
        "Declare this connection's run; the sessions it opens carry it. "
        "It ends as stopped if the client goes away.",
    ),
    Method(RUN_END, m.RunEndParams, m.RunInfo, "End this connection's run with its outcome."),
    Method(RUN_LIST, m.Empty, m.RunList, "Every run, oldest first, with its summary."),
    Method(RUN_GET, m.RunRef, m.RunInfo, "One run: its sessions, turns, wall time beside serial time."),
    Method(
        PERMISSION_LIST,
        m.PermissionListParams,
        m.PermissionList,
        "The agents' permission requests still waiting for an answer, oldest first "
        "(one session's, when it is named).",
    ),
    Method(
        PERMISSION_ANSWER,
        m.PermissionAnswerParams,
        m.Answered,
        "Answer an agent's permission request (from a `permission.asked` event); the first answer wins.",
    ),
    Method(
        EVENTS_SUBSCRIBE,
        m.EventsSubscribeParams,
        m.Subscription,
        "Receive events as `events/notify`, replaying stored ones after `since` first.",
    ),
    Method(EVENTS_UNSUBSCRIBE, m.SubscriptionRef, m.Removed, "Stop a subscription."),
    Method(DAEMON_STATUS, m.Empty, m.DaemonStatus, "The daemon: version, socket, counts."),
    Method(
        DAEMON_STOP,
        m.Empty,
        m.StopResult,
        "Stop the daemon as SIGTERM does: its turns are cancelled, its agents stopped, then it exits.",
    ),
]

METHODS: dict[str, Method] = {method.name: method for method in _METHODS}

CLIENT_REQUESTS: dict[str, ClientRequest] = {
    REQUEST_PERMISSION: ClientRequest(
        REQUEST_PERMISSION,
        m.PermissionRequestParams,
        m.PermissionRequestResult,
        "An agent asks permission; sent to clients that said `answersPermissions`. The first answer wins; "
        "the others get `$/cancelRequest`.",
    ),
}

NOTIFICATIONS: dict[str, Notification] = {
    EVENTS_NOTIFY: Notification(
        EVENTS_NOTIFY, m.EventsNotifyParams, "The next events of a subscription, in seq order."
    ),
}
