"""Every method's name: the daemon's requests, and the messages it sends clients.

The one place a method is named. `methods.py` gives each its params and result models (and
the schema and docs are made from that table); what must know the names without the models
(the gate, the answer to `initialize`, before pydantic has loaded) reads them here.
"""

from __future__ import annotations

AGENT_CREATE = "agent/create"
AGENT_LIST = "agent/list"
AGENT_GET = "agent/get"
AGENT_UPDATE = "agent/update"
AGENT_REMOVE = "agent/remove"
SESSION_OPEN = "session/open"
SESSION_LIST = "session/list"
SESSION_GET = "session/get"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_CLOSE = "session/close"
SESSION_REOPEN = "session/reopen"
SESSION_PRUNE = "session/prune"
SESSION_TRANSCRIPT = "session/transcript"
SESSION_CONTROLS = "session/controls"
SESSION_SET_MODE = "session/setMode"
SESSION_RENAME = "session/rename"
SESSION_SET_CONFIG = "session/setConfigOption"
FLEET_SUMMARY = "fleet/summary"
SESSION_SIDE = "session/side"
SESSION_TREE = "session/tree"
SESSION_BROADCAST = "session/broadcast"
TASK_SUGGEST = "task/suggest"
TASK_LIST = "task/list"
TASK_ACCEPT = "task/accept"
TASK_DISMISS = "task/dismiss"
THREAD_START = "thread/start"
THREAD_STATUS = "thread/status"
THREAD_WAIT = "thread/wait"
MERGE_REQUEST = "merge/request"
MERGE_LIST = "merge/list"
RUN_DECLARE = "run/declare"
RUN_END = "run/end"
RUN_LIST = "run/list"
RUN_GET = "run/get"
PERMISSION_LIST = "permission/list"
PERMISSION_ANSWER = "permission/answer"
EVENTS_SUBSCRIBE = "events/subscribe"
EVENTS_UNSUBSCRIBE = "events/unsubscribe"
DAEMON_STATUS = "daemon/status"
DAEMON_STOP = "daemon/stop"

EVENTS_NOTIFY = "events/notify"
REQUEST_PERMISSION = "session/requestPermission"

# The daemon's requests; `methods.METHODS` gives each its models (a test holds the two together).
REQUESTS = frozenset(
    {
        AGENT_CREATE,
        AGENT_LIST,
        AGENT_GET,
        AGENT_UPDATE,
        AGENT_REMOVE,
        SESSION_OPEN,
        SESSION_LIST,
        SESSION_GET,
        SESSION_PROMPT,
        SESSION_CANCEL,
        SESSION_CLOSE,
        SESSION_REOPEN,
        SESSION_PRUNE,
        SESSION_TRANSCRIPT,
        SESSION_CONTROLS,
        SESSION_SET_MODE,
        SESSION_RENAME,
        SESSION_SET_CONFIG,
        FLEET_SUMMARY,
        SESSION_SIDE,
        SESSION_TREE,
        SESSION_BROADCAST,
        TASK_SUGGEST,
        TASK_LIST,
        TASK_ACCEPT,
        TASK_DISMISS,
        THREAD_START,
        THREAD_STATUS,
        THREAD_WAIT,
        MERGE_REQUEST,
        MERGE_LIST,
        RUN_DECLARE,
        RUN_END,
        RUN_LIST,
        RUN_GET,
        PERMISSION_LIST,
        PERMISSION_ANSWER,
        EVENTS_SUBSCRIBE,
        EVENTS_UNSUBSCRIBE,
        DAEMON_STATUS,
        DAEMON_STOP,
    }
)
