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
from sessiond.client.sync import Agent, Daemon, EventStream, Session, SideChat, TurnStream, connect

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
