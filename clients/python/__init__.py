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
refuse instead).
"""

from sessiond.client.aio import (
    AsyncAgent,
    AsyncDaemon,
    AsyncEventStream,
    AsyncSession,
    AsyncTurnStream,
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
    MethodNotFound,
    ParseError,
    ProtocolError,
    RequestCancelled,
    ServerNotInitialized,
    SessionClosed,
    SessiondError,
    SessionNotFound,
    SubscriptionNotFound,
    SyncCallInEventLoop,
    TurnTimeout,
    Unauthorized,
)
from sessiond.client.sync import Agent, Daemon, EventStream, Session, TurnStream, connect

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
    "AsyncTurnStream",
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
    "MethodNotFound",
    "ParseError",
    "ProtocolError",
    "Reply",
    "RequestCancelled",
    "ServerNotInitialized",
    "Session",
    "SessionClosed",
    "SessionNotFound",
    "SessiondError",
    "SubscriptionNotFound",
    "SyncCallInEventLoop",
    "TurnStream",
    "TurnTimeout",
    "Unauthorized",
    "aconnect",
    "connect",
]
