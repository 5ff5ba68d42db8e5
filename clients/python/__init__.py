"""The Python client of sessiond: async and sync twins, and the ``sessiond`` command.

Async (the implementation)::

    async with aconnect() as daemon:
        session = await (await daemon.agent("demo")).session("/path/to/project")
        reply = await session.asend("say hello")

Sync (the same code, driven on a private event loop)::

    with connect() as daemon:
        session = daemon.agent("demo").session("/path/to/project")
        reply = session.send("say hello")

Both start a daemon in the background when none runs (``start=False`` to
refuse instead). ``connect(run="name")`` declares a run: its sessions carry it,
and closing the client ends it as completed, failed (an exception) or stopped
(Ctrl-C, or the task cancelled); ``sessiond runs`` lists runs.
"""

from typing import TYPE_CHECKING, Any

from sessiond.client.errors import (
    AgentError,
    AgentExists,
    AgentNotFound,
    AgentUnavailable,
    Conflict,
    ConnectionLost,
    DaemonNotRunning,
    DaemonStartFailed,
    DaemonStopping,
    FolderGone,
    InternalError,
    InvalidParams,
    InvalidRequest,
    LimitReached,
    MethodNotFound,
    ParseError,
    PlacementFailed,
    ProtocolError,
    RequestCancelled,
    RunNotFound,
    ServerNotInitialized,
    SessionClosed,
    SessiondError,
    SessionNotFound,
    SubscriptionNotFound,
    SyncCallInEventLoop,
    TaskNotFound,
    TurnTimeout,
    Unauthorized,
)

if TYPE_CHECKING:
    from sessiond.client.aio import (
        AsyncAgent,
        AsyncDaemon,
        AsyncEventStream,
        AsyncSession,
        AsyncSideChat,
        AsyncTurnStream,
        BatchProgress,
        Reply,
        aconnect,
    )
    from sessiond.client.sync import Agent, Daemon, EventStream, Session, SideChat, TurnStream, connect

# The twins (and the protocol's models under them) load on first use: `sessiond stdio`, the
# relay an editor spawns, imports this package and needs none of them.
_LAZY = {
    **dict.fromkeys(
        [
            "AsyncAgent",
            "AsyncDaemon",
            "AsyncEventStream",
            "AsyncSession",
            "AsyncSideChat",
            "AsyncTurnStream",
            "BatchProgress",
            "Reply",
            "aconnect",
        ],
        "sessiond.client.aio",
    ),
    **dict.fromkeys(
        ["Agent", "Daemon", "EventStream", "Session", "SideChat", "TurnStream", "connect"],
        "sessiond.client.sync",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AgentError",
    "AgentExists",
    "AgentNotFound",
    "AgentUnavailable",
    "AsyncAgent",
    "AsyncDaemon",
    "AsyncEventStream",
    "AsyncSession",
    "AsyncSideChat",
    "AsyncTurnStream",
    "BatchProgress",
    "Conflict",
    "ConnectionLost",
    "Daemon",
    "DaemonNotRunning",
    "DaemonStartFailed",
    "DaemonStopping",
    "EventStream",
    "FolderGone",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "LimitReached",
    "MethodNotFound",
    "ParseError",
    "PlacementFailed",
    "ProtocolError",
    "Reply",
    "RequestCancelled",
    "RunNotFound",
    "ServerNotInitialized",
    "Session",
    "SessionClosed",
    "SessionNotFound",
    "SessiondError",
    "SideChat",
    "SubscriptionNotFound",
    "SyncCallInEventLoop",
    "TaskNotFound",
    "TurnStream",
    "TurnTimeout",
    "Unauthorized",
    "aconnect",
    "connect",
]
