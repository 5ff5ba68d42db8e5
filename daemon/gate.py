"""Who may send what: one decision for every message a connection sends.

Every inbound message, request, notification or response, passes `admit`
before anything runs. It knows where the connection is in its life (not yet
initialized, ready, shut down), whether it acts for one session only (the
MCP bridge's token), and which methods are requests: a request method sent
without an id is dropped, never run. Pure: no I/O, no pygls, no awaits.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sessiond.daemon.wire import Kind, Message
from sessiond.protocol import names
from sessiond.protocol.errors import ErrorCode

INITIALIZE = "initialize"
SHUTDOWN = "shutdown"
EXIT = "exit"
CANCEL_REQUEST = "$/cancelRequest"
PROGRESS_CANCEL = "window/workDoneProgress/cancel"
# The notifications a client may send; anything else sent without an id is dropped.
CLIENT_NOTIFICATIONS = frozenset({"initialized", EXIT, CANCEL_REQUEST, PROGRESS_CANCEL, "$/setTrace"})

# What a connection acting for one session (the MCP bridge) may call.
ACTING_FOR_SESSION = frozenset(
    {
        names.TASK_SUGGEST,
        names.TASK_LIST,
        names.THREAD_START,
        names.THREAD_STATUS,
        names.THREAD_WAIT,
        names.DAEMON_STATUS,
    }
)

NO_TOKEN = (
    "this TCP connection presented no valid token: pass initializationOptions.token "
    "(the contents of the daemon's tcp-token file)"
)


class Phase(Enum):
    NEW = "new"  # nothing but `initialize` (and `exit`) is taken
    READY = "ready"
    SHUT_DOWN = "shut down"  # after `shutdown`: only `exit`


@dataclass
class Access:
    """One connection's standing; the server moves it along."""

    phase: Phase = Phase.NEW
    needs_token: bool = False
    acting_for: str | None = None


@dataclass(frozen=True)
class Admit:
    pass


@dataclass(frozen=True)
class Refuse:
    """Answer the request with this error; nothing runs."""

    code: ErrorCode
    message: str


@dataclass(frozen=True)
class Drop:
    """A notification or response that is not taken: nothing runs, and nothing can be answered."""

    reason: str


Verdict = Admit | Refuse | Drop
ADMIT = Admit()


def admit(access: Access, message: Message) -> Verdict:
    if message.kind is Kind.RESPONSE:
        if access.phase is Phase.NEW:
            return Drop("a response from a connection that has not initialized")
        return ADMIT
    if message.kind is Kind.NOTIFICATION:
        return _notification(access, message.method)
    return _request(access, message.method)


def _notification(access: Access, method: str) -> Verdict:
    if method == EXIT:
        return ADMIT
    if method in names.REQUESTS or method in (INITIALIZE, SHUTDOWN):
        return Drop(f"{method} is a request: sent without an id it is dropped and nothing runs")
    if method not in CLIENT_NOTIFICATIONS:
        return Drop(f"{method} is no notification of this daemon")
    if access.phase is not Phase.READY:
        return Drop(f"{method} from a connection that is {access.phase.value}")
    return ADMIT


def _request(access: Access, method: str) -> Verdict:
    if access.phase is Phase.SHUT_DOWN:
        return Refuse(
            ErrorCode.INVALID_REQUEST,
            "this connection has been shut down: only the `exit` notification is taken",
        )
    if method == INITIALIZE:
        if access.phase is Phase.NEW:
            return ADMIT
        return Refuse(
            ErrorCode.INVALID_REQUEST, "this connection is initialized already: send `initialize` once"
        )
    if access.phase is Phase.NEW:
        if access.needs_token:
            return Refuse(ErrorCode.UNAUTHORIZED, NO_TOKEN)
        return Refuse(
            ErrorCode.SERVER_NOT_INITIALIZED, "the connection is not initialized: send `initialize` first"
        )
    if method == SHUTDOWN:
        return ADMIT
    if method not in names.REQUESTS:
        return Refuse(
            ErrorCode.METHOD_NOT_FOUND,
            f"no method {method!r}: the daemon's methods are listed in the initialize result "
            "(capabilities.experimental.sessiond.methods) and in docs/protocol.md",
        )
    if access.acting_for is not None and method not in ACTING_FOR_SESSION:
        return Refuse(
            ErrorCode.UNAUTHORIZED,
            f"this connection acts for session {access.acting_for}: it may call "
            + ", ".join(sorted(ACTING_FOR_SESSION)),
        )
    return ADMIT
