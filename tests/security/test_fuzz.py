"""Fuzz the daemon's framing and its method table with generated inputs over raw sockets.

Properties, after every input: the daemon is alive and answers `daemon/status` on a
fresh connection; a request with a usable id gets exactly one response with that id,
a result or an error with a JSON-RPC or sessiond code and no traceback; a valid
request on the same connection is then answered (or, after a framing error, the
connection is closed promptly); a notification of any method changes nothing.
Run bigger with `./dev fuzz` (see tests/security/conftest.py for the profiles).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import example, given, seed, settings

from tests.security.strategies import (
    Framing,
    Id,
    Message,
    Notice,
    envelope_messages,
    framings,
    notifications,
    table_messages,
)
from tests.security.target import Outcome, Target, run_framing, run_message, run_notice
from tests.security.wire import RawJson

TOTAL = int(os.environ.get("SESSIOND_FUZZ_EXAMPLES", "0") or 0)
SEED = int(os.environ.get("SESSIOND_FUZZ_SEED") or random.randrange(2**32))
F = TypeVar("F", bound=Callable[..., Any])


def budget(share: float) -> Callable[[F], F]:
    """This test's share of the examples (CI: 1,000 in all), and the seed when random."""

    def wrap(test: F) -> F:
        test = settings(max_examples=max(1, round((TOTAL or 1000) * share)))(test)
        return seed(SEED)(test) if TOTAL else test

    return wrap


def verdict(outcome: Outcome, case: Any) -> None:
    if outcome.problems:
        lines = "\n  - ".join(outcome.problems)
        where = f" (seed {SEED}: SESSIOND_FUZZ_SEED={SEED})" if TOTAL else " (derandomized)"
        raise AssertionError(f"{case!r}{where}\n  - {lines}")


@budget(0.45)
@given(msg=table_messages())
def test_method_table_requests(target: Target, msg: Message) -> None:
    verdict(run_message(target, msg), msg)


@budget(0.2)
@given(msg=envelope_messages())
@example(
    msg=Message(
        "unix",
        {"jsonrpc": "2.0", "id": RawJson("9" * 5000), "method": "daemon/status"},
        Id(RawJson("9" * 5000), False),
        "daemon/status",
        "envelope 5000-digit id",
        extreme=True,
    )
)
def test_envelopes(target: Target, msg: Message) -> None:
    verdict(run_message(target, msg), msg)


@budget(0.2)
@given(case=framings())
def test_framing(target: Target, case: Framing) -> None:
    verdict(run_framing(target, case), case)


@budget(0.15)
@given(notice=notifications())
def test_notifications_change_nothing(target: Target, notice: Notice) -> None:
    verdict(run_notice(target, notice), notice)
