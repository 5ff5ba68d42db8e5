"""Faults a connection meets in daily use: several answering clients, an early exit, odd answers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon, checked
from sessiond.client import AsyncDaemon
from sessiond.protocol.errors import ErrorCode
from tests.security.wire import Wire, frame

TIMEOUT = 30


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with checked(Daemon()) as running:
        yield running


async def _answerer(daemon: Daemon) -> Wire:
    wire = await Wire.unix(str(daemon.socket))
    answer = await wire.initialize({"answersPermissions": True}, TIMEOUT)
    assert "result" in answer, answer
    return wire


async def test_one_answer_withdraws_the_question_from_the_others_and_they_stay_connected(
    daemon: Daemon, client: AsyncDaemon, tmp_path: Path
) -> None:
    first, second = await _answerer(daemon), await _answerer(daemon)
    session = await (await client.agent("demo")).session(tmp_path)
    turn = asyncio.create_task(session.asend("ask may I?"))
    asked_first = await first.next_request("session/requestPermission", TIMEOUT)
    asked_second = await second.next_request("session/requestPermission", TIMEOUT)
    allow = next(o for o in asked_first["params"]["options"] if o["kind"] == "allow_once")
    await first.send(
        frame({"jsonrpc": "2.0", "id": asked_first["id"], "result": {"optionId": allow["optionId"]}})
    )
    assert "Allow" in (await asyncio.wait_for(turn, TIMEOUT)).text
    # The other client is told the question is withdrawn, and answers as an editor does.
    cancel = await second.next_request("$/cancelRequest", TIMEOUT)
    assert cancel["params"]["id"] == asked_second["id"]
    await second.send(
        frame(
            {
                "jsonrpc": "2.0",
                "id": asked_second["id"],
                "error": {"code": ErrorCode.REQUEST_CANCELLED, "message": "cancelled"},
            }
        )
    )
    # A late answer to the withdrawn question changes nothing either.
    await second.send(frame({"jsonrpc": "2.0", "id": asked_second["id"], "result": {"optionId": "x"}}))
    for wire in (first, second):
        assert "result" in await wire.request("daemon/status", {}, "alive", TIMEOUT)
        await wire.close()


async def test_an_answer_that_was_not_offered_is_refused_with_the_offered_ids(
    daemon: Daemon, client: AsyncDaemon, tmp_path: Path
) -> None:
    session = await (await client.agent("demo")).session(tmp_path)
    async with client.events(sessions=[session.id], kinds=["permission.asked"]) as events:
        turn = asyncio.create_task(session.asend("ask may I?"))
        asked = await asyncio.wait_for(anext(aiter(events)), TIMEOUT)
    permission = asked.data["permission"]
    offered = [o["optionId"] for o in asked.data["options"]]
    wire = await Wire.unix(str(daemon.socket))
    await wire.initialize()
    refused = await wire.request(
        "permission/answer", {"permission": permission, "optionId": "nope"}, 1, TIMEOUT
    )
    assert refused["error"]["code"] == ErrorCode.INVALID_PARAMS
    assert refused["error"]["data"] == {"fields": ["optionId"]}
    for option in offered:
        assert option in refused["error"]["message"]
    assert (await session.aget()).status == "needs_you"  # still asked, not lost
    chosen = await wire.request(
        "permission/answer", {"permission": permission, "optionId": offered[0]}, 2, TIMEOUT
    )
    assert chosen["result"]["answered"] is True
    await asyncio.wait_for(turn, TIMEOUT)
    await wire.close()


async def test_exit_leaves_a_running_prompt_unanswered_and_running(
    daemon: Daemon, client: AsyncDaemon, tmp_path: Path
) -> None:
    session = await (await client.agent("demo")).session(tmp_path)
    wire = await Wire.unix(str(daemon.socket))
    await wire.initialize()
    async with client.events(sessions=[session.id], kinds=["turn.started", "turn.ended"]) as events:
        await wire.send(
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "session/prompt",
                    "params": {"session": session.id, "prompt": "sleep 1\nsay done"},
                }
            )
        )
        iterator = aiter(events)
        assert (await asyncio.wait_for(anext(iterator), TIMEOUT)).kind == "turn.started"
        await wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
        assert await wire.read(TIMEOUT) is None, "nothing is written after exit: no 'is canceled' answer"
        ended = await asyncio.wait_for(anext(iterator), TIMEOUT)
    assert ended.kind == "turn.ended"
    assert ended.data.get("stopReason") == "end_turn", ended.data  # the client left; its turn went on


async def test_a_prompt_cancelled_while_its_progress_is_made_runs_no_turn(
    daemon: Daemon, client: AsyncDaemon, tmp_path: Path
) -> None:
    """An editor that takes progress and has not answered `window/workDoneProgress/create` yet
    cancels its prompt: no turn was queued, so the request itself is cancelled (-32800) and no turn
    runs; its late answer to the create is taken without a word."""
    session = await (await client.agent("demo")).session(tmp_path)
    editor = await Wire.unix(str(daemon.socket))
    params = {"processId": None, "capabilities": {"window": {"workDoneProgress": True}}}
    assert "result" in await editor.request("initialize", params, "init", TIMEOUT)
    prompt = {"session": session.id, "prompt": "say hi"}
    await editor.send(frame({"jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": prompt}))
    create = await editor.next_request("window/workDoneProgress/create", TIMEOUT)
    await editor.send(frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "p"}}))
    answer = await editor.wait_for_id("p", TIMEOUT)
    assert answer is not None
    assert answer["error"]["code"] == ErrorCode.REQUEST_CANCELLED, answer
    await editor.send(frame({"jsonrpc": "2.0", "id": create["id"], "result": None}))
    assert "result" in await editor.request("daemon/status", {}, "alive", TIMEOUT)
    info = await session.aget()
    assert (info.turns, info.status.value) == (0, "idle")
    await editor.close()
