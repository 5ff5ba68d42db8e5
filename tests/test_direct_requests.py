"""DirectRequests: a request whose caller stopped waiting hands its late answer on, and holds
no more than LATE_KEPT of those for an agent that never answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from sessiond.daemon.direct_requests import FIRST_ID, LATE_KEPT, DirectRequests


class Written:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.lines.append(json.loads(data))

    async def drain(self) -> None:
        return None


async def test_a_given_up_request_hands_its_late_answer_on_and_they_are_bounded() -> None:
    requests = DirectRequests(Written(), lambda code, message, data: RuntimeError(message))
    late: list[Any] = []
    for _ in range(LATE_KEPT + 10):
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0):
                await requests.request("session/new", {}, late=late.append)
    assert len(requests._late) == LATE_KEPT  # (the oldest ten let go)
    oldest, newest = FIRST_ID, FIRST_ID + LATE_KEPT + 9
    assert not requests.take({"jsonrpc": "2.0", "id": oldest, "result": {"sessionId": "a"}})
    assert requests.take({"jsonrpc": "2.0", "id": newest, "result": {"sessionId": "b"}})
    assert late == [{"sessionId": "b"}]
    # An error answer is taken, and goes nowhere; a request answered in time leaves nothing behind.
    assert requests.take({"jsonrpc": "2.0", "id": newest - 1, "error": {"code": 1, "message": "no"}})
    assert late == [{"sessionId": "b"}]
    requests.ended("gone")
    assert not requests.waiting
