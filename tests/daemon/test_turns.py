"""Turns through a real daemon and the real demo agent, driven by the Python client."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import (
    AgentError,
    AgentUnavailable,
    AsyncDaemon,
    AsyncSession,
    SessionClosed,
    TurnTimeout,
)
from sessiond.protocol import methods
from sessiond.protocol.models import TurnResult


async def test_opening_sessions_starts_nothing_until_the_first_turn(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    agent = await client.agent("demo")
    sessions = await agent.sessions(1000, work)
    assert len({s.id for s in sessions}) == 1000
    info = await agent.aget()
    assert info.process.state == "stopped"
    assert info.process.starts == 0
    assert daemon.children() == []

    reply = await sessions[0].asend("say hello")
    assert reply.text == "hello"
    assert reply.stop_reason == "end_turn"
    info = await agent.aget()
    assert info.process.state == "running"
    assert info.process.live_sessions == 1
    assert len(daemon.children()) == 1
    assert info.process.capabilities is not None
    assert info.process.capabilities.resume


async def test_turns_of_one_session_run_one_after_another_in_order(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    watched = ["turn.queued", "turn.started", "turn.ended", "permission.asked"]
    async with client.events(sessions=[session.id], kinds=watched) as events:
        # The first turn waits on a person; meanwhile three more are asked at once.
        first = asyncio.create_task(session.asend("ask go on?\nsay 0"))
        asked = await next_matching(events, kind("permission.asked"))
        rest = [asyncio.create_task(session.asend(f"say {n}")) for n in (1, 2, 3)]
        for _ in rest:
            await next_matching(events, kind("turn.queued"))
        assert (await session.aget()).queued_turns == 3
        assert not any(t.done() for t in rest)
        allow = next(o["optionId"] for o in asked.data["options"] if o["kind"] == "allow_once")
        await client.answer_permission(asked.data["permission"], allow)
        replies = [await first, *await asyncio.gather(*rest)]
        assert [r.text.splitlines()[-1] for r in replies] == ["0", "1", "2", "3"]
        seen = []
        while len(seen) < 7:
            event = await next_matching(events, lambda e: e.kind != "turn.queued")
            seen.append((event.kind, event.turn))
    # Every turn started only after the one before it ended.
    expected = [("turn.ended", replies[0].turn_id)]
    for reply in replies[1:]:
        expected += [("turn.started", reply.turn_id), ("turn.ended", reply.turn_id)]
    assert seen == expected


async def test_turns_of_different_sessions_run_at_once(client: AsyncDaemon, work: Path) -> None:
    agent = await client.agent("demo")
    a, b = await agent.sessions(2, work)
    async with client.events(kinds=["turn.started"]) as events:
        hangs = [asyncio.create_task(s.asend("hang")) for s in (a, b)]
        started = {(await next_matching(events, kind("turn.started"))).session for _ in range(2)}
    assert started == {a.id, b.id}  # both running before either ended
    await asyncio.gather(a.acancel(), b.acancel())
    assert [r.stop_reason for r in await asyncio.gather(*hangs)] == ["cancelled", "cancelled"]


async def test_an_answer_comes_after_its_turn_is_stored_even_under_load(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    # 100 turns at once: the store commits under load, a batch per 10 ms. Each answer still
    # waits for its turn's events to be stored, so a read of the store the moment it comes
    # finds the turn ended (read straight from SQLite: a request would give the commit time).
    sessions = await (await client.agent("demo")).sessions(100, work)
    store = sqlite3.connect(daemon.home / "state" / "sessiond.db")

    async def turn_and_read(session: AsyncSession) -> tuple[str | None, int]:
        reply = await session.asend("say done")
        (state,) = store.execute("SELECT state FROM turns WHERE id = ?", (reply.turn_id,)).fetchone()
        (ended,) = store.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'turn.ended' AND turn = ?", (reply.turn_id,)
        ).fetchone()
        return state, ended

    try:
        read = await asyncio.gather(*(turn_and_read(s) for s in sessions))
    finally:
        store.close()
    assert read == [("done", 1)] * len(sessions)


async def test_max_active_turns_holds_the_rest_queued(client: AsyncDaemon, work: Path) -> None:
    agent = await client.agent("demo", max_active_turns=1)
    a, b = await agent.sessions(2, work)
    async with client.events(kinds=["turn.started", "session.status"]) as events:
        first = asyncio.create_task(a.asend("hang"))
        await next_matching(events, kind("turn.started", a.id))
        second = asyncio.create_task(b.asend("say after"))
        await next_matching(events, lambda e: e.session == b.id and e.data.get("status") == "queued")
        assert (await b.aget()).status == "queued"
        await a.acancel()
        assert (await first).stop_reason == "cancelled"
        assert (await second).text == "after"


async def test_cancelling_the_awaiting_task_cancels_the_turn(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    async with client.events(sessions=[session.id], kinds=["turn.started", "turn.ended"]) as events:
        task = asyncio.create_task(session.asend("hang"))
        await next_matching(events, kind("turn.started"))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ended = await next_matching(events, kind("turn.ended"))
    assert ended.data["stopReason"] == "cancelled"
    info = await session.aget()
    assert info.status == "stopped"
    assert info.last_stop_reason == "cancelled"


async def test_an_agent_error_reaches_the_client_with_its_message(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    with pytest.raises(AgentError, match="disk is on fire"):
        await session.asend("fail disk is on fire")
    info = await session.aget()
    assert info.status == "failed"
    assert "disk is on fire" in (info.last_error or "")
    # The session stays usable.
    assert (await session.asend("say still here")).text == "still here"


async def test_a_crashed_agent_fails_its_turns_and_starts_again(client: AsyncDaemon, work: Path) -> None:
    agent = await client.agent("demo")
    crasher, bystander = await agent.sessions(2, work)
    await bystander.asend("say first")
    # The crash must find the bystander's turn at the agent, not still on its way there.
    async with client.events(sessions=[bystander.id], kinds=["turn.chunk"]) as events:
        hanging = asyncio.create_task(bystander.asend("say waiting\nhang"))
        await next_matching(events, kind("turn.chunk"))
    with pytest.raises(AgentUnavailable, match="exited with code 7"):
        await crasher.asend("crash 7")
    with pytest.raises(AgentUnavailable, match="starts again on the next turn"):
        await hanging
    info = await agent.aget()
    assert info.process.state == "crashed"
    # Started again on the next turn; the bystander's history came back with it.
    reply = await bystander.asend("history")
    assert "say first" in reply.text
    info = await agent.aget()
    assert info.process.state == "running"
    assert info.process.starts == 2


async def test_a_turn_past_its_timeout_is_cancelled_with_a_clear_error(
    client: AsyncDaemon, work: Path
) -> None:
    session = await (await client.agent("demo", turn_timeout=1.0)).session(work)
    with pytest.raises(TurnTimeout, match="turn_timeout of 1 s"):
        await session.asend("hang")
    assert (await session.asend("say next")).text == "next"


async def test_a_path_outside_the_root_is_refused(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    outside = work.parent / "outside.txt"
    reply = await session.asend(f"write ../outside.txt nope\nwrite {outside} nope\nwrite inside.txt yes")
    assert reply.text.count("outside the session's root") == 2
    assert not outside.exists()
    assert (work / "inside.txt").read_text() == "yes"


async def test_commands_run_in_the_session_root(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    reply = await session.asend("run pwd")
    assert str(work) in reply.text
    assert "exit code 0" in reply.text


async def test_a_permission_asked_is_answered_by_a_client(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    async with client.events(
        sessions=[session.id], kinds=["permission.asked", "permission.answered"]
    ) as events:
        turn = asyncio.create_task(session.asend("ask delete the cache?"))
        asked = await next_matching(events, kind("permission.asked"))
        assert (await session.aget()).status == "needs_you"
        options = {o["kind"]: o["optionId"] for o in asked.data["options"]}
        assert await client.answer_permission(asked.data["permission"], options["allow_once"])
        answered = await next_matching(events, kind("permission.answered"))
    assert answered.data["optionId"] == options["allow_once"]
    reply = await turn
    assert "Allow" in reply.text
    assert (await session.aget()).status == "idle"


async def test_a_permission_policy_answers_without_a_person(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo", permission_policy="deny")).session(work)
    reply = await session.asend("ask may I?")
    assert "Reject" in reply.text


async def test_a_tool_call_that_failed_says_so_in_the_transcript(client: AsyncDaemon, work: Path) -> None:
    """A call refused its permission (here by the agent's policy), or a command that failed, does
    not read as one that ran."""
    session = await (await client.agent("demo", permission_policy="deny")).session(work)
    async with client.events(sessions=[session.id], kinds=["permission.answered"]) as events:
        await session.asend("ask may I delete it?\nrun sh -c 'exit 3'\nrun true")
        answered = await next_matching(events, kind("permission.answered"))
    assert answered.data["decidedBy"] == "permissionPolicy deny"
    assert answered.data["optionKind"] == "reject_once"
    assert answered.data["toolCall"]["title"] == "may I delete it?"
    for transcript in (await session.atranscript(limit=50), await session.atranscript(offset=0)):
        assert [line.text for line in transcript.lines if line.role == "tool"] == [
            "[other] may I delete it? (refused)",
            "[execute] Run sh -c 'exit 3' (failed)",
            "[execute] Run true",
        ]


async def test_cancelling_a_turn_waiting_on_permission_answers_it_cancelled(
    client: AsyncDaemon, work: Path
) -> None:
    session = await (await client.agent("demo")).session(work)
    async with client.events(
        sessions=[session.id], kinds=["permission.asked", "permission.answered"]
    ) as events:
        turn = asyncio.create_task(session.asend("ask may I?"))
        await next_matching(events, kind("permission.asked"))
        await session.acancel()
        answered = await next_matching(events, kind("permission.answered"))
    assert answered.data["optionId"] is None
    assert (await turn).stop_reason == "cancelled"


async def test_a_closed_session_refuses_prompts(client: AsyncDaemon, work: Path) -> None:
    session = await (await client.agent("demo")).session(work)
    await session.asend("say once")
    info = await session.aclose()
    assert info.status == "closed"
    with pytest.raises(SessionClosed, match="is closed"):
        await session.asend("say twice")


async def test_live_sessions_are_capped_and_resumed_with_their_history(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    agent = await client.agent("demo", max_live_sessions=1)
    a, b = await agent.sessions(2, work)
    await a.asend("say a1")
    await b.asend("say b1")  # closes a at the agent to make room
    assert (await a.aget()).live is False
    assert (await agent.aget()).process.live_sessions == 1
    reply = await a.asend("history")  # a comes back by session/resume, history intact
    assert "say a1" in reply.text
    assert "b1" not in reply.text
    assert (await b.aget()).live is False
    assert len(daemon.children()) == 1


async def test_an_agent_that_cannot_restore_keeps_its_sessions_open_and_says_so(
    client: AsyncDaemon, work: Path
) -> None:
    demo = (await client.agent("demo")).info
    agent = await client.agent(
        "stubborn",
        command=[*demo.command, "--no-resume", "--no-load"],
        max_live_sessions=1,
    )
    a, b = await agent.sessions(2, work)
    await a.asend("say a")
    await b.asend("say b")
    info = await agent.aget()
    assert info.process.live_sessions == 2
    assert info.process.note is not None
    assert "stay open" in info.process.note


async def test_an_agent_silent_in_its_turn_flags_the_session_and_says_since_when(
    client: AsyncDaemon, work: Path
) -> None:
    demo = (await client.agent("demo")).info.command
    agent = await client.agent("demo-quiet", command=demo, silence_seconds=1)
    session = await agent.session(work)
    async with client.events(sessions=[session.id], kinds=["session.status", "session.attention"]) as events:
        turn = asyncio.create_task(session.asend("hang"))  # says nothing, ever
        said = await next_matching(events, lambda e: e.kind == "session.status" and "detail" in e.data)
        assert said.data["status"] == "working"
        assert said.data["detail"].startswith("no word from the agent since ")
        assert said.data["detail"].endswith("wait, or cancel the turn")
        info = await session.aget()
        assert "agent_silent" in [a.value for a in info.attention]
        assert info.status_detail == said.data["detail"]
        await session.acancel()
        assert (await turn).stop_reason == "cancelled"
    info = await session.aget()
    assert "agent_silent" not in [a.value for a in info.attention]
    assert info.status_detail is None
    await agent.aremove()


async def test_an_agent_slow_to_start_is_not_silent_before_its_prompt(
    client: AsyncDaemon, work: Path
) -> None:
    """Starting the process and opening the session there (claude-agent-acp took 20 s for 20 at
    once) is not silence: it counts from the prompt."""
    demo = (await client.agent("demo")).info.command
    slow = [sys.executable, "-c", f"import os, time; time.sleep(4); os.execv({demo[0]!r}, {demo!r})"]
    agent = await client.agent("demo-slow-start", command=slow, silence_seconds=1)
    session = await agent.session(work)
    flags: list[list[str]] = []
    async with client.events(sessions=[session.id], kinds=["session.attention"]) as events:

        async def collect() -> None:
            async for event in events:
                flags.append(event.data.get("attention", []))

        collecting = asyncio.create_task(collect())
        assert (await session.asend("say started")).text == "started"
        collecting.cancel()
    assert not [f for f in flags if "agent_silent" in f], flags
    await agent.aremove()


async def test_a_turns_stored_row_is_the_whole_turn_and_a_reused_turn_id_leaves_the_older_row_alone(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    # Queued, started and ended (each may come before the commit that writes the one before):
    # the row holds all three. A client that names a second turn by the first's id gets its turn
    # run, and the first turn's row stays what it was.
    a, b = await (await client.agent("demo")).sessions(2, work)
    first = await client._call(
        methods.SESSION_PROMPT, TurnResult, session=a.id, prompt="say one", turn_id="t-mine"
    )
    again = await client._call(
        methods.SESSION_PROMPT, TurnResult, session=b.id, prompt="say two", turn_id="t-mine"
    )
    assert (first.text, again.text) == ("one", "two")
    store = sqlite3.connect(daemon.home / "state" / "sessiond.db")
    rows = store.execute(
        "SELECT session, prompt, state, text, stop_reason, error, queued_at, started_at, ended_at"
        " FROM turns WHERE id = 't-mine'"
    ).fetchall()
    assert len(rows) == 1
    session, said, state, text, stop_reason, error, queued_at, started_at, ended_at = rows[0]
    assert (session, said, state, text) == (a.id, "say one", "done", "one")
    assert (stop_reason, error) == ("end_turn", None)
    assert queued_at <= started_at <= ended_at


async def test_an_agent_that_exits_as_it_starts_is_quoted_and_one_that_echoes_is_asked_about(
    client: AsyncDaemon, work: Path
) -> None:
    """gemini-cli without its ACP flag exits 41, saying why on its stderr only: the turn's error
    quotes that last line. `cat` as the agent sends the daemon's own initialize back, an error:
    the turn's error asks whether its command is an ACP agent."""
    leaves = "import sys; print('Please set an Auth method', file=sys.stderr); sys.exit(41)"
    agent = await client.agent("leaves", command=[sys.executable, "-c", leaves])
    with pytest.raises(AgentUnavailable) as failed:
        await asyncio.wait_for((await agent.session(work)).asend("hello"), timeout=40)
    assert "exited with code 41 (its last words: 'Please set an Auth method') during initialize" in str(
        failed.value
    )
    await agent.aremove()
    echoes = await client.agent("echoes", command=["cat"])
    with pytest.raises(AgentUnavailable) as failed:
        await asyncio.wait_for((await echoes.session(work)).asend("hello"), timeout=40)
    assert "answered initialize with an error" in str(failed.value)
    assert "check its command (cat): is it an ACP agent" in str(failed.value)
    await echoes.aremove()


async def test_a_command_that_is_no_acp_agent_fails_soon_quoting_what_it_wrote(
    client: AsyncDaemon, work: Path
) -> None:
    """A program that prints a banner and waits (not an ACP agent, or one without its flag) fails
    the turn within STRAY_GRACE of the banner, saying what it wrote: not after initialize's 60 s."""
    banner = "import time; print('Welcome to SomeCLI v1 (interactive)', flush=True); time.sleep(600)"
    agent = await client.agent("chatty", command=[sys.executable, "-c", banner])
    session = await agent.session(work)
    with pytest.raises(AgentUnavailable) as failed:
        await asyncio.wait_for(session.asend("hello"), timeout=40)  # (initialize's own: 60 s)
    message = str(failed.value)
    assert "Welcome to SomeCLI v1 (interactive)" in message
    assert "is it an ACP agent" in message
    await agent.aremove()
