"""A session's status follows from its state by one table."""

from __future__ import annotations

import pytest

from sessiond.daemon.states import Outcome, derive_status, outcome_of
from sessiond.protocol.models import SessionStatus as S


@pytest.mark.parametrize(
    ("closed", "person", "running", "queued", "last", "expected"),
    [
        (False, False, False, False, Outcome.NONE, S.IDLE),
        (False, False, False, False, Outcome.COMPLETED, S.IDLE),
        (False, False, False, False, Outcome.CANCELLED, S.STOPPED),
        (False, False, False, False, Outcome.FAILED, S.FAILED),
        (False, False, False, True, Outcome.FAILED, S.QUEUED),
        (False, False, True, True, Outcome.NONE, S.WORKING),
        (False, True, True, False, Outcome.NONE, S.NEEDS_YOU),
        (True, True, True, True, Outcome.NONE, S.CLOSED),
    ],
)
def test_status_table(
    closed: bool, person: bool, running: bool, queued: bool, last: Outcome, expected: S
) -> None:
    status = derive_status(
        closed=closed, waiting_for_person=person, running=running, queued=queued, last=last
    )
    assert status is expected


def test_stored_status_gives_back_the_outcome() -> None:
    assert outcome_of(S.FAILED) is Outcome.FAILED
    assert outcome_of(S.STOPPED) is Outcome.CANCELLED
    assert outcome_of(S.IDLE) is Outcome.NONE
