"""An agent's output is handled line by line, in order; while clients watch the events, a backlog
of it does not hold the loop."""

from __future__ import annotations

import asyncio
import json

import pytest

from sessiond.daemon.acp_backend import pump_lines

LINES = 20_000  # each parsed: far more than one slice of the loop's time (READ_SLICE) in all


@pytest.mark.parametrize("watched", [True, False])
async def test_a_watched_backlog_of_agent_output_lets_the_loop_go_while_it_is_handled_in_order(
    watched: bool,
) -> None:
    source = asyncio.StreamReader()
    source.feed_data(b"".join(json.dumps({"n": n}).encode() + b"\n" for n in range(LINES)))
    source.feed_eof()
    handled: list[int] = []
    pumping = asyncio.create_task(
        pump_lines(source, lambda line: handled.append(json.loads(line)["n"]), lambda: watched)
    )
    seen: list[int] = []

    async def another_client() -> None:  # wants the loop once, while the backlog is handled
        seen.append(len(handled))

    await asyncio.gather(pumping, asyncio.create_task(another_client()))
    if watched:
        assert 0 < seen[0] < LINES, f"the other task ran after {seen[0]} of {LINES} lines"
    else:  # nobody waits for the events: the backlog is handled in one go
        assert seen[0] == LINES
    assert handled == list(range(LINES))
