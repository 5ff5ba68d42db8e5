"""A session's status, derived from what it is doing: one pure function, no I/O.

The status is never set by hand. It follows from the session's state, so
it cannot drift from it: closed beats everything; a question waiting for a
person beats work; running beats waiting; and an idle session shows how its
last turn ended.
"""

from __future__ import annotations

from enum import Enum

from sessiond.protocol.models import SessionStatus


class Outcome(Enum):
    """How a session's last turn ended."""

    NONE = "none"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"


def derive_status(
    *, closed: bool, waiting_for_person: bool, running: bool, queued: bool, last: Outcome
) -> SessionStatus:
    if closed:
        return SessionStatus.CLOSED
    if waiting_for_person:
        return SessionStatus.NEEDS_YOU
    if running:
        return SessionStatus.WORKING
    if queued:
        return SessionStatus.QUEUED
    return _AFTER[last]


_AFTER = {
    Outcome.NONE: SessionStatus.IDLE,
    Outcome.COMPLETED: SessionStatus.IDLE,
    Outcome.CANCELLED: SessionStatus.STOPPED,
    Outcome.FAILED: SessionStatus.FAILED,
}


def outcome_of(status: SessionStatus) -> Outcome:
    """The last outcome a stored status stands for, when a session is loaded back."""
    return {
        SessionStatus.FAILED: Outcome.FAILED,
        SessionStatus.STOPPED: Outcome.CANCELLED,
    }.get(status, Outcome.NONE)
