"""The sync twins: same names, signatures, answers and errors as the async client;
Ctrl-C, streams, event-loop misuse and forgotten clients. Against the fake daemon."""

from __future__ import annotations

import asyncio
import gc
import inspect
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_sessiond import FakeDaemon

from sessiond.client import (
    Agent,
    AgentError,
    AsyncAgent,
    AsyncDaemon,
    AsyncEventStream,
    AsyncSession,
    AsyncSideChat,
    AsyncTurnStream,
    ConnectionLost,
    Daemon,
    EventStream,
    Session,
    SessionNotFound,
    SideChat,
    SyncCallInEventLoop,
    TurnStream,
    aconnect,
    connect,
)
from sessiond.client.sync import _Loop
from sessiond.protocol.models import EventKind

pytestmark = pytest.mark.timeout(60)

TWINS = [
    (AsyncDaemon, Daemon),
    (AsyncAgent, Agent),
    (AsyncSession, Session),
    (AsyncSideChat, SideChat),
    (AsyncTurnStream, TurnStream),
    (AsyncEventStream, EventStream),
]
ASYNC_PROTOCOL = {
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": None,
}
RENAMES = {
    f"Async{name}": name for name in ["Daemon", "Agent", "SideChat", "Session", "TurnStream", "EventStream"]
}


def public_names(cls: type) -> set[str]:
    names = {name for name in dir(cls) if not name.startswith("_")}
    return names | {
        name for name in [*ASYNC_PROTOCOL, "__enter__", "__exit__", "__iter__"] if hasattr(cls, name)
    }


def as_sync(annotation: str) -> str:
    for async_name, sync_name in RENAMES.items():
        annotation = annotation.replace(async_name, sync_name)
    return annotation


def signature_of(attribute: Any) -> str:
    if isinstance(attribute, property):
        return f"property -> {inspect.signature(attribute.fget).return_annotation}"  # type: ignore[arg-type]
    return str(inspect.signature(attribute))


@pytest.mark.parametrize(("async_class", "sync_class"), TWINS, ids=[s.__name__ for _, s in TWINS])
def test_the_twins_have_the_same_public_names_and_signatures(async_class: type, sync_class: type) -> None:
    expected: dict[str, str] = {}
    for name in public_names(async_class):
        if name in ASYNC_PROTOCOL:
            sync_name = ASYNC_PROTOCOL[name]
        elif name.startswith("a") and not hasattr(sync_class, name) and hasattr(sync_class, name[1:]):
            sync_name = name[1:]  # asend -> send
        else:
            sync_name = name
        if sync_name is None:
            continue
        assert hasattr(sync_class, sync_name), f"{sync_class.__name__} lacks {sync_name} (twin of {name})"
        expected[sync_name] = name
        if name in ("__aiter__",):
            continue
        async_attr = inspect.getattr_static(async_class, name)
        sync_attr = inspect.getattr_static(sync_class, sync_name)
        assert as_sync(signature_of(async_attr)) == signature_of(sync_attr), (
            f"{sync_class.__name__}.{sync_name}"
        )
    assert public_names(sync_class) == set(expected), "the sync twin has names the async one lacks"


def test_connect_and_aconnect_take_the_same_arguments() -> None:
    assert inspect.signature(connect).parameters == inspect.signature(aconnect).parameters


def test_the_twins_give_the_same_answers_and_errors(fake: FakeDaemon) -> None:
    def sync_run() -> list[Any]:
        with connect(start=False) as daemon:
            session = daemon.agent().session("/")
            outcomes: list[Any] = [session.send("say same words").text]
            with session.stream("say streamed") as stream:
                outcomes.append([event.kind for event in stream])
            outcomes.append(stream.reply.text if stream.reply else None)
            for call in (lambda: session.send("fail same error"), lambda: daemon.session("missing")):
                try:
                    call()
                except Exception as e:
                    outcomes.append((type(e), str(e)))
            outcomes.append([r.text for r in daemon.agent().batch(["say b1", "say b2"], "/")])
            outcomes.append(session.close().status)
            return outcomes

    async def async_run() -> list[Any]:
        async with aconnect(start=False) as daemon:
            session = await (await daemon.agent()).session("/")
            outcomes: list[Any] = [(await session.asend("say same words")).text]
            async with session.astream("say streamed") as stream:
                outcomes.append([event.kind async for event in stream])
            outcomes.append(stream.reply.text if stream.reply else None)
            for call in (lambda: session.asend("fail same error"), lambda: daemon.session("missing")):
                try:
                    await call()
                except Exception as e:
                    outcomes.append((type(e), str(e)))
            outcomes.append([r.text for r in await (await daemon.agent()).abatch(["say b1", "say b2"], "/")])
            outcomes.append((await session.aclose()).status)
            return outcomes

    sync_outcomes = sync_run()
    assert sync_outcomes == asyncio.run(async_run())
    assert sync_outcomes[3] == (AgentError, "same error")
    assert sync_outcomes[4] == (SessionNotFound, "no session 'missing'")


def test_handles_wrap_handles(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        agent = daemon.agent()
        assert isinstance(agent, Agent)
        assert isinstance(agent.info.name, str)
        sessions = agent.sessions(2, "/")
        assert [type(s) for s in sessions] == [Session, Session]
        assert [s.id for s in daemon.sessions()] == [s.id for s in sessions]
        assert isinstance(daemon.session(sessions[0].id), Session)
        assert repr(sessions[0]).startswith("<Session s-")
        stream = sessions[0].stream("say x")
        assert isinstance(stream.session, Session)
        assert stream.session.id == sessions[0].id
        stream.close()


def interrupt_when(
    fake: FakeDaemon, condition: Callable[[], Any], *, to_thread: int | None = None
) -> threading.Thread:
    """Send this process SIGINT (as Ctrl-C does) once the fake daemon sees ``condition``
    and the main thread waits in the event loop's select, as it does nearly all of a turn.

    With ``to_thread``, the signal goes to that thread: the kernel may hand a process's
    signal to any of its threads, while only the main thread runs Python's handlers."""
    main = threading.main_thread().ident
    assert main is not None

    def waiting_in_select() -> bool:
        frame = sys._current_frames().get(main)
        return frame is not None and frame.f_code.co_name in ("select", "poll")

    def run() -> None:
        fake.wait_for(condition)
        deadline = time.monotonic() + 10
        while not waiting_in_select():
            if time.monotonic() > deadline:
                fake.release("")  # never interrupt pytest itself: end the turns, and the test fails
                return
            time.sleep(0.001)
        if to_thread is None:
            os.kill(os.getpid(), signal.SIGINT)
        else:
            signal.pthread_kill(to_thread, signal.SIGINT)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def own_sigint_handler() -> Iterator[None]:
    """A program's own SIGINT handler: asyncio.Runner then leaves Ctrl-C alone."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("target", ["process", "another thread"])
@pytest.mark.parametrize("handler", ["default", "own"])
def test_ctrl_c_during_send_cancels_the_turn_before_raising(
    fake: FakeDaemon, handler: str, target: str, request: pytest.FixtureRequest
) -> None:
    assert threading.current_thread() is threading.main_thread()
    if handler == "own":
        request.getfixturevalue("own_sigint_handler")
    else:
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with connect(start=False) as daemon:
        session = daemon.agent().session("/")
        other = fake.thread.ident if target == "another thread" else None
        interrupt_when(fake, lambda: fake.running("hang"), to_thread=other)
        with pytest.raises(KeyboardInterrupt):
            session.send("hang")
        # The daemon answered the cancel before KeyboardInterrupt got here.
        turn = fake.params_of("session/prompt")[0]["turnId"]
        assert fake.params_of("session/cancel") == [{"session": session.id, "turnId": turn}]
        fake.wait_for(lambda: not fake.running("hang"))
        assert session.send("say still here").text == "still here"


def test_ctrl_c_during_a_stream_cancels_the_turn_and_unsubscribes(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        session = daemon.agent().session("/")
        stream = session.stream("hang")
        kinds = []
        interrupt_when(fake, lambda: fake.running("hang"))
        with pytest.raises(KeyboardInterrupt):  # noqa: PT012
            for event in stream:
                kinds.append(event.kind)
        assert fake.params_of("session/cancel") == [{"session": session.id, "turnId": stream.turn_id}]
        assert len(fake.params_of("events/unsubscribe")) == 1
        assert stream.reply is None


def test_breaking_out_of_a_stream_closes_it_and_cancels_the_turn(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        session = daemon.agent().session("/")
        stream = session.stream("hang")
        for event in stream:
            if event.kind is EventKind.TURN_STARTED:
                break
        # Closed as the loop let go of its iterator, before the next line runs.
        assert fake.params_of("session/cancel") == [{"session": session.id, "turnId": stream.turn_id}]
        assert len(fake.params_of("events/unsubscribe")) == 1
        assert list(stream) == []  # a closed stream yields nothing more


def test_a_finished_stream_holds_the_reply_and_an_error_ends_it(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        session = daemon.agent().session("/")
        stream = session.stream("say a b")
        text = "".join(e.data["text"] for e in stream if e.kind is EventKind.TURN_CHUNK)
        assert text == "a b"
        assert stream.reply is not None
        assert stream.reply.text == "a b"
        failing = session.stream("fail nope")
        with pytest.raises(AgentError, match="nope"):
            list(failing)
        assert fake.params_of("session/cancel") == []


def test_event_streams_subscribe_on_entering_with(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        session = daemon.agent().session("/")
        with daemon.events(sessions=[session.id]) as events:
            session.send("say one")
            kinds = []
            for event in events:
                kinds.append(event.kind)
                if event.kind is EventKind.TURN_ENDED:
                    break
        assert kinds[0] is EventKind.TURN_QUEUED
        assert len(fake.params_of("events/unsubscribe")) == 1


def test_an_iterator_left_unfinished_is_collected_quietly_inside_a_running_loop(fake: FakeDaemon) -> None:
    """The stream closed by its `with`, the generator `iter()` made is closed again when collected:
    in an async test that came next, that close raised SyncCallInEventLoop as unraisable."""
    with connect(start=False) as daemon:
        session = daemon.agent().session("/")
        with daemon.events(sessions=[session.id]) as events:
            left = iter(events)
            session.send("say one")
            assert next(left).kind is EventKind.TURN_QUEUED
        unraisable: list[object] = []
        previous, sys.unraisablehook = sys.unraisablehook, unraisable.append

        async def collect() -> None:
            nonlocal left
            del left
            gc.collect()

        try:
            asyncio.run(collect())
        finally:
            sys.unraisablehook = previous
        assert unraisable == []


def test_sync_calls_inside_an_event_loop_say_what_to_await_instead(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        session = daemon.agent().session("/")

        async def misuse() -> None:
            with pytest.raises(
                SyncCallInEventLoop, match=r"use the async client instead: `await session\.asend"
            ):
                session.send("say x")
            with pytest.raises(SyncCallInEventLoop, match=r"`await daemon\.status\(\.\.\.\)`"):
                daemon.status()
            with pytest.raises(SyncCallInEventLoop, match=r"`session\.astream\(\.\.\.\)`"):
                session.stream("say x")
            with pytest.raises(SyncCallInEventLoop, match="aconnect"):
                connect(start=False)

        asyncio.run(misuse())
        assert session.send("say fine afterwards").text == "fine afterwards"


def test_a_closed_client_says_so(fake: FakeDaemon) -> None:
    daemon = connect(start=False)
    session = daemon.agent().session("/")
    daemon.close()
    daemon.close()
    fake.wait_for(lambda: fake.requests("exit"))
    with pytest.raises(ConnectionLost, match="this sessiond client is closed"):
        session.send("say x")


def test_a_client_can_be_used_from_other_threads(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        sessions = daemon.agent().sessions(4, "/")
        texts: list[str] = []
        threads = [
            threading.Thread(target=lambda s=s: texts.append(s.send(f"say {s.id}").text)) for s in sessions
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(texts) == sorted(s.id for s in sessions)


def test_a_client_nobody_holds_any_more_is_closed(fake: FakeDaemon) -> None:
    daemon = connect(start=False)
    session = daemon.agent().session("/")
    del daemon, session
    gc.collect()
    fake.wait_for(lambda: fake.requests("exit"))


def test_a_client_left_open_at_exit_cancels_its_turn(fake: FakeDaemon, home: Path) -> None:
    script = textwrap.dedent(
        """
        from sessiond.client import connect
        daemon = connect(start=False)
        stream = daemon.agent().session("/").stream("hang")
        events = iter(stream)
        for event in events:
            if event.kind == "turn.started":
                break_out = events  # keep the stream open: exit with the turn running
                break
        print("exiting", flush=True)
        """
    )
    env = {**os.environ, "SESSIOND_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "exiting\n"
    turn = fake.params_of("session/prompt")[0]["turnId"]
    fake.wait_for(lambda: fake.requests("exit"))
    assert [p["turnId"] for p in fake.params_of("session/cancel")] == [turn]


def test_a_call_costs_well_under_a_millisecond_over_the_async_one() -> None:
    loop = _Loop()

    async def nothing() -> None:
        return None

    try:
        loop.run(nothing())
        calls = 2000
        started = time.perf_counter()
        for _ in range(calls):
            loop.run(nothing())
        per_call = (time.perf_counter() - started) / calls
    finally:
        loop.shutdown()
    assert per_call < 0.001, f"{per_call * 1e6:.0f} µs per call"


def interrupt_soon() -> None:
    """Raise KeyboardInterrupt from the loop itself, as a program's own SIGINT handler would."""

    def interrupt() -> None:
        raise KeyboardInterrupt

    asyncio.get_running_loop().call_soon(interrupt)


def test_an_interrupt_escaping_the_loop_still_lets_the_call_clean_up() -> None:
    loop = _Loop()
    cleaned_up: list[str] = []

    async def turn() -> None:
        interrupt_soon()
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0)  # cleanup that talks to the daemon awaits too
            cleaned_up.append("yes")

    async def answer() -> str:
        return "next call works"

    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run(turn())
        assert cleaned_up == ["yes"]
        assert loop.run(answer()) == "next call works"
    finally:
        loop.shutdown()


def test_an_interrupt_as_a_call_ends_leaves_the_loop_ready_for_the_next() -> None:
    loop = _Loop()

    async def quick() -> str:
        interrupt_soon()  # lands after the call's result, before the loop stops
        return "done"

    async def answer() -> str:
        await asyncio.sleep(0)
        return "next call works"

    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run(quick())
        assert loop.run(answer()) == "next call works"
    finally:
        loop.shutdown()
