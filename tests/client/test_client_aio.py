"""The async client against the fake daemon of fake_sessiond.py (it stands in for sessiond)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_sessiond import FakeDaemon

from sessiond.client import (
    AgentError,
    AgentNotFound,
    AsyncDaemon,
    ConnectionLost,
    InvalidParams,
    ProtocolError,
    SessionNotFound,
    aconnect,
    aio,
)
from sessiond.protocol import methods
from sessiond.protocol.errors import ErrorCode
from sessiond.protocol.models import Event, EventKind, SessionStatus

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def daemon(fake: FakeDaemon) -> AsyncIterator[AsyncDaemon]:
    async with aconnect(start=False) as connected:
        yield connected


def turn_of(fake: FakeDaemon, prompt: str) -> str:
    """The turnId the client chose for the prompt it sent."""
    return next(p["turnId"] for p in fake.params_of("session/prompt") if p["prompt"] == prompt)


async def test_the_handshake_and_the_goodbye(fake: FakeDaemon) -> None:
    daemon = await aconnect(start=False)
    assert daemon.server_info == {"name": "sessiond", "version": "fake"}
    initialize = fake.requests("initialize")[0]["params"]
    assert initialize["processId"] == os.getpid()
    assert initialize["clientInfo"]["name"] == "sessiond-python"
    # No progress UI here, so no $/progress traffic per turn.
    assert not initialize["capabilities"].get("window", {}).get("workDoneProgress")
    await fake.await_for(lambda: fake.requests("initialized"))
    await daemon.aclose()
    await daemon.aclose()  # idempotent
    assert daemon.closed
    await fake.await_for(lambda: fake.requests("exit"))
    methods = [msg.get("method") for msg in fake.received]
    assert methods[-2:] == ["shutdown", "exit"]
    with pytest.raises(ConnectionLost, match="closed by this client"):
        await daemon.status()


async def test_agent_gets_creates_and_updates_only_when_asked(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    demo = await daemon.agent()
    assert demo.name == "demo"
    assert demo.info.builtin
    with pytest.raises(AgentNotFound, match="no agent named 'other'") as raised:
        await daemon.agent("other")
    assert raised.value.code == ErrorCode.AGENT_NOT_FOUND
    assert fake.params_of("agent/create") == []

    other = await daemon.agent("other", command=["run", "me"], env={"KEY": "v"}, max_active_turns=2)
    assert other.info.options.max_active_turns == 2
    assert fake.params_of("agent/create") == [
        {"name": "other", "command": ["run", "me"], "env": {"KEY": "v"}, "options": {"maxActiveTurns": 2}}
    ]
    await daemon.agent("other", command=["run", "me"], max_active_turns=2)  # nothing differs
    assert fake.params_of("agent/update") == []
    updated = await daemon.agent("other", command=["run", "me"], max_active_turns=3, turn_timeout=60)
    assert fake.params_of("agent/update") == [
        {"name": "other", "options": {"maxActiveTurns": 3, "turnTimeout": 60.0}}
    ]
    assert updated.info.options.turn_timeout == 60
    assert [a.name for a in await daemon.agents()] == ["demo", "other"]
    await other.aremove()
    with pytest.raises(AgentNotFound):
        await other.aget()


async def test_bad_params_are_refused_before_sending_naming_the_field(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    with pytest.raises(InvalidParams, match=r"agent options: modle: Extra inputs are not permitted"):
        await daemon.agent("demo", modle="x")
    agent = await daemon.agent()
    session = await agent.session("/")
    with pytest.raises(
        InvalidParams, match=r"session/prompt: prompt: String should have at least 1 character"
    ):
        await session.asend("")
    assert fake.params_of("session/prompt") == []


async def test_sessions_open_lazily_and_list_over_every_page(
    fake: FakeDaemon, daemon: AsyncDaemon, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.page_size = 3
    agent = await daemon.agent()
    monkeypatch.chdir(home)
    one = await agent.session("relative/dir", title="first")
    assert fake.params_of("session/open")[0] == {
        "agent": "demo",
        "root": str(home / "relative/dir"),  # a relative root means the client's directory
        "title": "first",
        "count": 1,
    }
    many = await agent.sessions(7, "/")
    assert len(many) == 7
    listed = await daemon.sessions()
    assert [s.id for s in listed] == [one.id] + [s.id for s in many]
    assert len(fake.params_of("session/list")) == 3  # pages of 3
    await many[0].aclose()
    assert len(await daemon.sessions()) == 7
    assert len(await daemon.sessions(include_closed=True)) == 8
    assert [s.id for s in await daemon.sessions(status="closed", include_closed=True)] == [many[0].id]
    assert (await daemon.session(one.id)).info.title == "first"
    with pytest.raises(SessionNotFound, match="no session 'nope'"):
        await daemon.session("nope")


async def test_send_returns_the_reply_and_errors_keep_the_daemons_message(daemon: AsyncDaemon) -> None:
    session = await (await daemon.agent()).session("/")
    reply = await session.asend("say hello there")
    assert (reply.text, reply.stop_reason, reply.session) == ("hello there", "end_turn", session.id)
    with pytest.raises(AgentError) as raised:
        await session.asend("fail boom")
    assert str(raised.value) == "boom"
    assert raised.value.data == {"agentCode": -1}
    assert (await session.aget()).status is SessionStatus.FAILED
    assert session.info.status is SessionStatus.FAILED


async def test_stream_yields_the_turns_events_then_holds_the_reply(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    session = await (await daemon.agent()).session("/")
    other = await (await daemon.agent()).session("/")
    async with session.astream("say one two three") as stream:
        kinds, text = [], ""
        async for event in stream:
            kinds.append(event.kind)
            assert event.turn == stream.turn_id
            if event.kind is EventKind.TURN_CHUNK:
                text += event.data["text"]
    assert kinds == [EventKind.TURN_QUEUED, EventKind.TURN_STARTED] + [EventKind.TURN_CHUNK] * 3 + [
        EventKind.TURN_ENDED
    ]
    assert text == "one two three"
    assert stream.reply is not None
    assert stream.reply.text == "one two three"
    assert stream.reply.turn_id == stream.turn_id
    # Subscribed to this session before prompting, with the turn id chosen here; unsubscribed after.
    methods = [msg.get("method") for msg in fake.received]
    assert methods.index("events/subscribe") < methods.index("session/prompt")
    assert fake.params_of("events/subscribe")[0] == {"sessions": [session.id]}
    assert turn_of(fake, "say one two three") == stream.turn_id
    assert len(fake.params_of("events/unsubscribe")) == 1
    await other.asend("say unrelated")


async def test_a_failed_turn_ends_the_stream_with_the_error(daemon: AsyncDaemon) -> None:
    session = await (await daemon.agent()).session("/")
    kinds = []

    async def consume() -> None:
        async for event in session.astream("fail boom"):
            kinds.append(event.kind)

    with pytest.raises(AgentError, match=r"^boom$"):
        await consume()
    assert kinds[-1] is EventKind.TURN_ENDED


async def test_an_answer_that_overtakes_the_last_events_still_yields_them(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    fake.reply_before_ended = True
    session = await (await daemon.agent()).session("/")
    async with session.astream("say hi") as stream:
        kinds = [event.kind async for event in stream]
    assert kinds[-1] is EventKind.TURN_ENDED
    assert stream.reply is not None
    assert stream.reply.text == "hi"


async def test_leaving_a_stream_early_cancels_the_turn(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    session = await (await daemon.agent()).session("/")
    async with session.astream("hang") as stream:
        async for event in stream:
            if event.kind is EventKind.TURN_STARTED:
                break
    assert stream.reply is None
    assert fake.params_of("session/cancel") == [{"session": session.id, "turnId": stream.turn_id}]
    await fake.await_for(lambda: not fake.running("hang"))
    assert len(fake.params_of("events/unsubscribe")) == 1
    assert (await session.asend("say still usable")).text == "still usable"


async def test_cancelling_send_cancels_the_turn_in_the_daemon(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    session = await (await daemon.agent()).session("/")
    task = asyncio.create_task(session.asend("hang"))
    await fake.await_for(lambda: fake.running("hang"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    prompt_id = fake.requests("session/prompt")[0]["id"]
    assert fake.params_of("$/cancelRequest") == [{"id": prompt_id}]
    assert fake.params_of("session/cancel") == [{"session": session.id, "turnId": turn_of(fake, "hang")}]
    await fake.await_for(lambda: not fake.running("hang"))


async def test_cancel_stops_running_turns_and_they_end_cancelled(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    session = await (await daemon.agent()).session("/")
    task = asyncio.create_task(session.asend("hang"))
    await fake.await_for(lambda: fake.running("hang"))
    assert await session.acancel() == 1
    reply = await task
    assert reply.stop_reason == "cancelled"


async def test_closing_the_client_cancels_the_turns_it_still_awaits(fake: FakeDaemon) -> None:
    daemon = await aconnect(start=False)
    session = await (await daemon.agent()).session("/")
    task = asyncio.create_task(session.asend("hang"))
    await fake.await_for(lambda: fake.running("hang"))
    await daemon.aclose()
    assert (await task).stop_reason == "cancelled"  # the turn ended before the connection did
    await fake.await_for(lambda: fake.requests("exit"))
    assert fake.params_of("session/cancel") == [{"session": session.id, "turnId": turn_of(fake, "hang")}]
    methods = [msg.get("method") for msg in fake.received]
    assert methods.index("session/cancel") < methods.index("shutdown") < methods.index("exit")


async def test_the_daemon_going_away_mid_turn_is_connection_lost(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    session = await (await daemon.agent()).session("/")
    fake.close_on.add("session/prompt")
    with pytest.raises(ConnectionLost, match="the daemon closed the connection"):
        await session.asend("say never")
    with pytest.raises(ConnectionLost):
        await session.aget()


async def test_the_daemon_going_away_ends_a_stream_with_connection_lost(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    session = await (await daemon.agent()).session("/")

    async def consume() -> None:
        async for event in session.astream("hang"):
            if event.kind is EventKind.TURN_STARTED:
                fake.call(lambda: [peer.writer.close() for peer in fake.peers])

    with pytest.raises(ConnectionLost):
        await consume()


async def test_a_malformed_answer_closes_the_connection_with_a_clear_error(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    fake.garbage_on["daemon/status"] = b"Content-Length: 5\r\n\r\nnope!"
    with pytest.raises(ConnectionLost, match="malformed message: a body that is not JSON") as raised:
        await daemon.status()
    assert isinstance(raised.value.__cause__, ProtocolError)
    assert daemon.closed


async def test_the_daemons_own_requests_are_answered(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    fake.ask_client = True
    session = await (await daemon.agent()).session("/")
    await session.asend("say ok")
    created, unknown = fake.client_answers
    assert created["result"] is None
    assert unknown["error"]["code"] == ErrorCode.METHOD_NOT_FOUND


async def test_a_stream_closed_while_another_task_reads_it_ends_that_read(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    """A reader waiting for the next event while its stream is closed (or cancelled, the stream
    left at once) ends; closing does not fail with "asynchronous generator is already running"."""
    session = await (await daemon.agent()).session("/")

    async def read(stream: AsyncIterator[Event]) -> list[EventKind]:
        return [event.kind async for event in stream]

    async with daemon.events(sessions=[session.id]) as events:
        reader = asyncio.create_task(read(events))
        await session.asend("say one")
        await fake.await_for(lambda: len(fake.params_of("events/subscribe")) == 1)
        await asyncio.sleep(0)  # (the reader is inside a step, waiting)
        await events.aclose()
        kinds = await asyncio.wait_for(reader, 30)
    assert EventKind.TURN_ENDED in kinds
    assert len(fake.params_of("events/unsubscribe")) == 1

    async with daemon.events(sessions=[session.id]) as events:
        reader = asyncio.create_task(read(events))
        await asyncio.sleep(0)
        reader.cancel()  # and the stream is left before the reader has seen its cancellation
    with pytest.raises(asyncio.CancelledError):
        await reader
    await fake.await_for(lambda: len(fake.params_of("events/unsubscribe")) == 2)

    stream = session.astream("hang")
    reader = asyncio.create_task(read(stream))
    await fake.await_for(lambda: fake.running("hang"))
    await stream.aclose()  # closing a turn's stream cancels the turn, whoever reads it
    await asyncio.wait_for(reader, 30)
    assert stream.reply is None
    assert fake.params_of("session/cancel") == [{"session": session.id, "turnId": stream.turn_id}]
    await fake.await_for(lambda: not fake.running("hang"))


async def test_events_arriving_before_their_subscription_is_answered_are_kept(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    fake.early_events = True
    async with daemon.events() as events:
        first = await anext(events)
    assert first.data == {"early": True}


async def test_an_overflowing_subscription_resumes_from_the_last_seen_event(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    fake.overflow_after = 4
    session = await (await daemon.agent()).session("/")
    seqs = []
    async with daemon.events(sessions=[session.id]) as events:
        await session.asend("say a b c d e f g h i j")
        async for event in events:
            seqs.append(event.seq)
            if event.kind is EventKind.TURN_ENDED:
                break
    assert seqs == sorted(set(seqs))  # in order, none twice
    assert len(seqs) == 1 + 1 + 1 + 10 + 1 + 1  # queued, working, started, chunks, idle, ended
    subscribes = fake.params_of("events/subscribe")
    assert len(subscribes) > 1
    assert subscribes[1]["since"] == seqs[3]  # resumed after the last seq seen


async def test_a_turn_stream_whose_last_events_were_superseded_ends_with_the_reply(
    fake: FakeDaemon, daemon: AsyncDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aio, "ENDED_GRACE", 600.0)  # waiting for turn.ended would time the test out
    fake.supersede = {EventKind.TURN_CHUNK, EventKind.TURN_ENDED}
    session = await (await daemon.agent()).session("/")
    async with session.astream("say a b c") as stream:
        kinds = [event.kind async for event in stream]
    assert kinds == [EventKind.TURN_QUEUED, EventKind.TURN_STARTED]
    assert stream.reply is not None
    assert stream.reply.text == "a b c"


async def test_an_event_stream_carries_on_after_a_resync(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    fake.supersede = {EventKind.TURN_CHUNK}
    session = await (await daemon.agent()).session("/")
    async with daemon.events(sessions=[session.id]) as events:
        await session.asend("say a b c")
        kinds = []
        async for event in events:
            kinds.append(event.kind)
            if event.kind is EventKind.TURN_ENDED:
                break
    assert EventKind.TURN_CHUNK not in kinds
    assert kinds[-1] is EventKind.TURN_ENDED
    assert len(fake.params_of("events/subscribe")) == 1  # no resubscription needed


async def test_transcript_and_fleet(daemon: AsyncDaemon) -> None:
    session = await (await daemon.agent()).session("/")
    for n in range(3):
        await session.asend(f"say reply {n}")
    tail = await session.atranscript(limit=2)
    assert tail.total == 6
    assert [(line.n, line.role, line.text) for line in tail.lines] == [
        (4, "user", "say reply 2"),
        (5, "agent", "reply 2"),
    ]
    head = await session.atranscript(offset=0, limit=1)
    assert head.lines[0].text == "say reply 0"
    fleet = await daemon.fleet()
    assert (fleet.open, fleet.turns) == (1, 3)


async def test_session_listing_passes_further_filters_on(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    await daemon.sessions(sort="activity", attention=True)
    assert fake.params_of("session/list")[0] == {
        "sort": "activity",
        "attention": True,
        "includeClosed": False,
        "limit": 1000,
    }
    with pytest.raises(InvalidParams, match="sortt"):
        await daemon.sessions(sortt="activity")


# Methods the Python client does not wrap yet (added to the protocol while it was written).
NOT_WRAPPED_YET: set[str] = set()


def test_every_method_of_the_protocol_has_a_client_call() -> None:
    source = Path(aio.__file__).read_text()
    constants = {
        value: name for name, value in vars(methods).items() if isinstance(value, str) and name.isupper()
    }
    unwrapped = {method for method in methods.METHODS if f"m.{constants[method]}" not in source}
    assert unwrapped - NOT_WRAPPED_YET == set(), "wrap these in aio.py and sync.py, or list them above"
    assert NOT_WRAPPED_YET & unwrapped == NOT_WRAPPED_YET & set(methods.METHODS), "wrapped now: unlist them"


async def test_status_and_permission_answers(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    status = await daemon.status()
    assert status.version == "fake"
    assert await daemon.answer_permission("p-1", None) is True
    assert fake.params_of("permission/answer") == [{"permission": "p-1", "optionId": None}]


# ---------------------------------------------------------------- batches


async def test_batch_answers_in_prompt_order_and_closes_every_session(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    agent = await daemon.agent()
    prompts = ["sleep 0.3", "say quick", "sleep 0.1", "say also quick"]
    replies = await agent.abatch(prompts, "/")
    assert [r.text for r in replies] == ["slept", "quick", "slept", "also quick"]
    assert len({r.session for r in replies}) == 4
    assert fake.params_of("session/open") == [{"agent": "demo", "root": "/", "count": 4}]
    assert sorted(p["session"] for p in fake.params_of("session/close")) == sorted(r.session for r in replies)
    assert await agent.abatch([], "/") == []


async def test_batch_runs_as_wide_as_given_unless_capped(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    agent = await daemon.agent()
    task = asyncio.create_task(agent.abatch(["hang"] * 5, "/"))
    await fake.await_for(lambda: len(fake.running("hang")) == 5)
    assert fake.release("hang") == 5
    assert [r.stop_reason for r in await task] == ["cancelled"] * 5

    capped = asyncio.create_task(agent.abatch(["hang"] * 5, "/", max_concurrency=2))
    ended = 0
    while ended < 5:
        expected = min(2, 5 - ended)
        await fake.await_for(lambda n=expected: len(fake.running("hang")) == n)  # type: ignore[misc]
        assert len(fake.running("hang")) <= 2
        ended += fake.release("hang")
    assert len(await capped) == 5
    assert fake.most_active == 5  # from the first batch; the capped one never passed 2


async def test_batch_raises_the_first_failure_in_prompt_order_after_every_turn_landed(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    agent = await daemon.agent()
    with pytest.raises(AgentError) as raised:
        await agent.abatch(["say fine", "fail second", "sleep 0.2", "fail fourth"], "/")
    assert str(raised.value) == "second"
    assert raised.value.__notes__[0] == (
        "sessiond: prompts[1] (prompt 2 of 4) failed (2 of 4 prompts failed)"
    )
    assert [p["prompt"] for p in fake.params_of("session/prompt")].count("sleep 0.2") == 1
    assert fake.params_of("session/cancel") == []  # the slow turn was not cut short
    assert len(fake.params_of("session/close")) == 4


async def test_batch_with_suppress_returns_failures_in_place(daemon: AsyncDaemon) -> None:
    agent = await daemon.agent()
    results = await agent.abatch(["say a", "fail b", "say c"], "/", suppress=True)
    assert [type(r).__name__ for r in results] == ["TurnResult", "AgentError", "TurnResult"]
    assert str(results[1]) == "b"


async def test_batch_refuses_a_width_below_one(daemon: AsyncDaemon) -> None:
    agent = await daemon.agent()
    with pytest.raises(ValueError, match="max_concurrency"):
        await agent.abatch(["say x"], "/", max_concurrency=0)


@pytest.mark.parametrize("suppress", [False, True])
async def test_cancelling_a_batch_cancels_every_outstanding_turn_and_is_not_suppressed(
    fake: FakeDaemon, daemon: AsyncDaemon, suppress: bool
) -> None:
    agent = await daemon.agent()
    task = asyncio.create_task(agent.abatch(["say done", "hang", "hang", "hang"], "/", suppress=suppress))
    await fake.await_for(lambda: len(fake.running("hang")) == 3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    hung = {p["turnId"] for p in fake.params_of("session/prompt") if p["prompt"] == "hang"}
    cancelled = {p["turnId"] for p in fake.params_of("session/cancel")}
    # Every hung turn, and maybe the quick one too, if its answer was still on its way.
    assert hung <= cancelled <= {p["turnId"] for p in fake.params_of("session/prompt")}
    assert len(fake.params_of("session/close")) == 4
    await fake.await_for(lambda: not fake.running())
