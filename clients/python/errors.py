"""What the client raises.

Two families, kept apart on purpose:

- ``SessiondError`` (an ``RpcError``): the daemon answered a request with an
  error. There is one subclass per error code, so ``except SessionNotFound``
  reads like what it means; each carries the daemon's message verbatim, its
  ``code`` and its ``data``.
- ``ConnectionError`` subclasses: there is no daemon to answer.
  ``DaemonNotRunning`` (nothing accepts at the socket and starting one was not
  asked for), ``DaemonStartFailed`` (one was started and never accepted) and
  ``ConnectionLost`` (the connection closed, or the daemon broke the protocol,
  while requests were outstanding).

Besides: ``FolderGone`` (a ``FileNotFoundError``), when a path was to be taken
from a current folder that no longer exists.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

from sessiond.protocol.errors import ErrorCode, RpcError


class SessiondError(RpcError):
    """The daemon answered with an error. ``str(error)`` is the daemon's message."""

    code_value: ClassVar[int | None] = None


class ParseError(SessiondError):
    code_value = ErrorCode.PARSE_ERROR


class InvalidRequest(SessiondError):
    code_value = ErrorCode.INVALID_REQUEST


class MethodNotFound(SessiondError):
    code_value = ErrorCode.METHOD_NOT_FOUND


class InvalidParams(SessiondError):
    """The params were refused, by the daemon or before sending by the client's own check."""

    code_value = ErrorCode.INVALID_PARAMS


class InternalError(SessiondError):
    code_value = ErrorCode.INTERNAL_ERROR


class ServerNotInitialized(SessiondError):
    code_value = ErrorCode.SERVER_NOT_INITIALIZED


class RequestCancelled(SessiondError):
    code_value = ErrorCode.REQUEST_CANCELLED


class SessionNotFound(SessiondError):
    code_value = ErrorCode.SESSION_NOT_FOUND


class AgentNotFound(SessiondError):
    code_value = ErrorCode.AGENT_NOT_FOUND


class AgentExists(SessiondError):
    code_value = ErrorCode.AGENT_EXISTS


class SessionClosed(SessiondError):
    code_value = ErrorCode.SESSION_CLOSED


class AgentError(SessiondError):
    """The agent failed a turn (or failed to start); the message is the agent's."""

    code_value = ErrorCode.AGENT_ERROR


class AgentUnavailable(SessiondError):
    code_value = ErrorCode.AGENT_UNAVAILABLE


class TurnTimeout(SessiondError):
    code_value = ErrorCode.TURN_TIMEOUT


class Conflict(SessiondError):
    code_value = ErrorCode.CONFLICT


class SubscriptionNotFound(SessiondError):
    code_value = ErrorCode.SUBSCRIPTION_NOT_FOUND


class Unauthorized(SessiondError):
    code_value = ErrorCode.UNAUTHORIZED


class DaemonStopping(SessiondError):
    code_value = ErrorCode.DAEMON_STOPPING


class RunNotFound(SessiondError):
    code_value = ErrorCode.RUN_NOT_FOUND


class PlacementFailed(SessiondError):
    """The session's placement (worktree, sandbox, container, ssh) could not be set up."""

    code_value = ErrorCode.PLACEMENT_FAILED


class TaskNotFound(SessiondError):
    code_value = ErrorCode.TASK_NOT_FOUND


class LimitReached(SessiondError):
    """A budget or ``max_threads`` was reached, or the user declined a helper."""

    code_value = ErrorCode.LIMIT_REACHED


ERROR_CLASSES: dict[int, type[SessiondError]] = {
    cls.code_value: cls for cls in SessiondError.__subclasses__() if cls.code_value is not None
}


# What to do next, for the errors a person meets on the command line (and in an ACP editor), where
# the daemon's sentence names no command of its own (an older daemon's, or one without a hint).
HINTS: dict[type[SessiondError], str] = {
    SessionNotFound: "list sessions with `sessiond ls --all`",
    AgentNotFound: "list agents with `sessiond agents`",
    TaskNotFound: "list tasks with `sessiond tasks`",
}


# The daemon's "what to do" names its method and the command line's command, for every client:
# "; reopen it with session/reopen (`sessiond reopen s1`)".
METHOD_AND_COMMAND = re.compile(r"with [a-z]+/[A-Za-z]+ \((`sessiond [^`]*`)\)")


def sentence(error: SessiondError) -> str:
    """The error as ``sessiond`` on the command line says it: what went wrong, then what to do:
    the daemon's hint naming only the command ("reopen it with `sessiond reopen s1`"), else the
    command line's own for that error, if it has one."""
    text = str(error)
    if METHOD_AND_COMMAND.search(text):
        return METHOD_AND_COMMAND.sub(r"with \1", text)
    hint = HINTS.get(type(error))
    return f"{text}; {hint}" if hint else text


def error_from_code(code: int, message: str, data: Any = None) -> SessiondError:
    """The exception for an error answer; unknown codes give a plain ``SessiondError``."""
    return ERROR_CLASSES.get(code, SessiondError)(code, message, data)


class DaemonNotRunning(ConnectionError):
    """Nothing accepts connections at the socket, and starting a daemon was not asked for."""


class DaemonStartFailed(ConnectionError):
    """A daemon was started but its socket never accepted a connection."""


class ConnectionLost(ConnectionError):
    """The connection to the daemon closed (or was closed) before the answer came."""


class ProtocolError(Exception):
    """The daemon sent something this client cannot read: a malformed frame or message
    (the connection is then closed, and this is the ``__cause__`` of ``ConnectionLost``),
    or a result that does not fit the method's model (a daemon of another version)."""


class FolderGone(FileNotFoundError):
    """The folder this process runs in was deleted or moved, and a path or root was to be taken
    from it."""


def current_folder() -> str:
    """`os.getcwd()`, or `FolderGone` saying what to do when the folder no longer exists."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise FolderGone(
            "the current folder no longer exists (deleted or moved): cd to one that does, or give "
            "an absolute path (--root for a command)"
        ) from None


class SyncCallInEventLoop(RuntimeError):
    """A blocking method of the sync client was called inside a running event loop."""
