"""Runs, merges, side chats, tasks, threads, the trace and batch progress, in both twins,
against the fake daemon of fake_sessiond.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_sessiond import FakeDaemon
from test_client_sync import interrupt_when

from sessiond.client import (
    AsyncDaemon,
    AsyncSideChat,
    BatchProgress,
    Conflict,
    RunNotFound,
    SideChat,
    TaskNotFound,
    aconnect,
    connect,
)
from sessiond.protocol.models import Event, EventKind, SessionStatus

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def daemon(fake: FakeDaemon) -> AsyncIterator[AsyncDaemon]:
    async with aconnect(start=False) as connected:
        yield connected


def only_run(fake: FakeDaemon) -> Any:
    (run,) = fake.runs.values()
    return run


# ---------------------------------------------------------------- runs


async def test_a_run_is_declared_carried_by_its_sessions_and_ends_completed(fake: FakeDaemon) -> None:
    async with aconnect(start=False, run="fix imports") as daemon:
        assert daemon.run is not None
        assert (daemon.run.name, daemon.run.argv, daemon.run.cwd) == ("fix imports", sys.argv, os.getcwd())
        assert daemon.run.outcome is None
        replies = await (await daemon.agent()).abatch(["say a", "say b"], "/")
        assert [r.text for r in replies] == ["a", "b"]
        assert {fake.sessions[r.session].run for r in replies} == {daemon.run.id}
    run = only_run(fake)
    assert (run.outcome, daemon.run.outcome) == ("completed", "completed")
    methods = [msg.get("method") for msg in fake.received]
    assert methods.index("run/end") < methods.index("shutdown")
    assert fake.params_of("run/declare") == [{"name": "fix imports", "argv": sys.argv, "cwd": os.getcwd()}]


async def test_a_run_left_by_an_exception_ends_failed(fake: FakeDaemon) -> None:
    with pytest.raises(RuntimeError, match="oops"):
        async with aconnect(start=False, run="flow"):
            raise RuntimeError("oops")
    assert only_run(fake).outcome == "failed"


async def test_a_cancelled_flow_ends_its_run_stopped_and_its_turns_cancelled(fake: FakeDaemon) -> None:
    async def flow() -> None:
        async with aconnect(start=False, run="flow") as daemon:
            await (await daemon.agent()).abatch(["hang", "hang", "say quick"], "/")

    task = asyncio.create_task(flow())
    await fake.await_for(lambda: len(fake.running("hang")) == 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert only_run(fake).outcome == "stopped"
    hung = {p["turnId"] for p in fake.params_of("session/prompt") if p["prompt"] == "hang"}
    assert hung <= {p["turnId"] for p in fake.params_of("session/cancel")}
    await fake.await_for(lambda: not fake.running())
    methods = [msg.get("method") for msg in fake.received]
    assert methods.index("session/cancel") < methods.index("run/end")


async def test_awaited_connect_and_aclose_end_the_run_as_told(fake: FakeDaemon) -> None:
    daemon = await aconnect(start=False, run="by hand")
    await daemon.aclose("stopped")
    await daemon.aclose("failed")  # idempotent: the first close said how it went
    assert only_run(fake).outcome == "stopped"


async def test_runs_are_listed_and_got_and_an_unknown_one_is_not_found(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    first = await daemon.declare_run("one", argv=["x"], cwd="/")
    with pytest.raises(Conflict):
        await daemon.declare_run("two")
    ended = await daemon.end_run("failed")
    assert (ended.id, ended.outcome) == (first.id, "failed")
    assert daemon.run is not None
    assert daemon.run.outcome == "failed"
    assert [r.id for r in await daemon.runs()] == [first.id]
    assert (await daemon.get_run(first.id)).argv == ["x"]
    with pytest.raises(RunNotFound):
        await daemon.get_run("r-nope")


def test_the_sync_twin_ends_its_run_stopped_on_ctrl_c(fake: FakeDaemon) -> None:
    with pytest.raises(KeyboardInterrupt), connect(start=False, run="sync flow") as daemon:  # noqa: PT012
        interrupt_when(fake, lambda: len(fake.running("hang")) == 3)
        daemon.agent().batch(["hang"] * 3, "/")
    assert only_run(fake).outcome == "stopped"
    assert len(fake.params_of("session/cancel")) == 3
    fake.wait_for(lambda: not fake.running())


def test_the_sync_twin_ends_its_run_completed_or_failed(fake: FakeDaemon) -> None:
    with connect(start=False, run="fine") as daemon:
        daemon.agent().batch(["say x"], "/")
    with pytest.raises(ValueError, match="bad"), connect(start=False, run="broken"):
        raise ValueError("bad")
    assert [r.outcome for r in fake.runs.values()] == ["completed", "failed"]


@pytest.mark.parametrize(
    ("ending", "outcome"),
    [("", "completed"), ("raise RuntimeError('uncaught')", "failed"), ("raise KeyboardInterrupt", "stopped")],
)
def test_a_forgotten_sync_client_ends_its_run_at_exit(
    fake: FakeDaemon, home: Path, ending: str, outcome: str
) -> None:
    script = textwrap.dedent(
        f"""
        from sessiond.client import connect
        daemon = connect(start=False, run="forgotten")
        daemon.agent().batch(["say x"], "/")
        {ending}
        """
    )
    env = {**os.environ, "SESSIOND_HOME": str(home)}
    subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=30)
    fake.wait_for(lambda: fake.runs and only_run(fake).outcome is not None)
    assert only_run(fake).outcome == outcome


# ---------------------------------------------------------------- batches


async def test_batch_progress_counts_by_status(daemon: AsyncDaemon) -> None:
    seen: list[BatchProgress] = []
    agent = await daemon.agent()
    results = await agent.abatch(
        ["say a", "fail b", "sleep 0.1", "say d"],
        "/",
        max_concurrency=2,
        suppress=True,
        on_progress=seen.append,
    )
    assert [type(r).__name__ for r in results] == ["TurnResult", "AgentError", "TurnResult", "TurnResult"]
    assert seen[0] == BatchProgress(total=4, waiting=4, elapsed=seen[0].elapsed)
    assert max(p.running for p in seen) == 2  # never wider than asked
    last = seen[-1]
    assert (last.waiting, last.running, last.done, last.failed, last.stopped, last.landed) == (
        0,
        0,
        3,
        1,
        0,
        4,
    )
    assert all(p.waiting + p.running + p.landed == 4 for p in seen)


async def test_a_failing_progress_callback_does_not_fail_the_prompts(daemon: AsyncDaemon) -> None:
    def broken(progress: BatchProgress) -> None:
        raise RuntimeError("display bug")

    replies = await (await daemon.agent()).abatch(["say a"], "/", on_progress=broken)
    assert replies[0].text == "a"


async def test_five_hundred_prompts_as_wide_as_they_go_all_land(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    agent = await daemon.agent()
    prompts = [f"say answer {n}" for n in range(500)]
    replies = await agent.abatch(prompts, "/", max_concurrency=None)
    assert [r.text for r in replies] == [f"answer {n}" for n in range(500)]
    assert len(fake.params_of("session/close")) == 500


# ---------------------------------------------------------------- merging


async def test_merge_waits_for_the_outcome_reporting_each_step(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    session = await (await daemon.agent()).session("/", placement="worktree")
    steps: list[str] = []
    entry = await session.amerge(gate="make test", on_step=lambda e: steps.append(e.data["step"]))
    assert (entry.status, entry.commit, entry.position) == ("merged", "c0ffee", None)
    assert steps == [
        "queued",
        "started",
        "integrated",
        "gate-started",
        "gate-passed",
        "landed",
        "cleaned",
        "merged",
    ]
    assert fake.params_of("merge/request") == [
        {"session": session.id, "strategy": "merge", "gate": "make test", "keep": False, "handBack": False}
    ]
    methods = [msg.get("method") for msg in fake.received]
    assert methods.index("events/subscribe") < methods.index("merge/request")
    assert (await daemon.merges())[0].status == "merged"


async def test_a_failed_merge_is_an_outcome_with_its_conflicts_or_gate_output(daemon: AsyncDaemon) -> None:
    agent = await daemon.agent()
    conflicting = await agent.session("/", placement="worktree", title="conflict ahead")
    entry = await conflicting.amerge(strategy="rebase")
    assert (entry.status, entry.conflicts) == ("failed", ["app.py"])
    gated = await agent.session("/", placement="worktree")
    entry = await gated.amerge(gate="false")
    assert (entry.status, entry.gate_output) == ("failed", "the gate said no")


async def test_merge_without_waiting_returns_the_queued_entry(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    fake.hold_merges = True
    session = await (await daemon.agent()).session("/", placement="worktree")
    entry = await session.amerge(wait=False)
    assert (entry.status, entry.position) == ("queued", 1)
    assert [e.status for e in await daemon.merges()] == ["queued"]
    fake.call(fake.merge_release.set)
    here = await (await daemon.agent()).session("/")
    with pytest.raises(Conflict, match="not in a worktree"):
        await here.amerge()


# ---------------------------------------------------------------- side chats, tasks, threads


async def test_a_side_chat_answers_beside_its_session(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    main = await (await daemon.agent()).session("/")
    side = await main.aside("say beside you", writable=True)
    assert isinstance(side, AsyncSideChat)
    assert side.reply is not None
    assert (side.reply.text, side.forked, side.info.kind, side.info.parent) == (
        "beside you",
        True,
        "side",
        main.id,
    )
    assert fake.params_of("session/side") == [
        {"session": main.id, "question": "say beside you", "writable": True}
    ]
    assert (await side.asend("say more")).text == "more"
    assert repr(side) == f"<AsyncSideChat {side.id} of {main.id}>"
    quiet = await main.aside()
    assert quiet.reply is None
    tree = await main.atree()
    assert [child.session.id for child in tree.children] == [side.id, quiet.id]


async def test_tasks_are_suggested_listed_accepted_and_dismissed(
    fake: FakeDaemon, daemon: AsyncDaemon
) -> None:
    main = await (await daemon.agent()).session("/")
    first = await daemon.suggest_task("Fix it", "say fixed", why="broken", from_session=main)
    second = await daemon.suggest_task("Later", "say later", agent="demo")
    assert fake.params_of("task/suggest")[0] == {
        "title": "Fix it",
        "prompt": "say fixed",
        "why": "broken",
        "fromSession": main.id,
    }
    assert [t.id for t in await daemon.tasks()] == [second.id, first.id]
    accepted = await daemon.accept_task(first.id)
    assert (accepted.status, accepted.session is not None) == ("running", True)
    dismissed = await daemon.dismiss_task(second.id, "not now")
    assert (dismissed.status, dismissed.reason) == ("dismissed", "not now")
    assert [t.id for t in await daemon.tasks(status="dismissed")] == [second.id]
    assert fake.params_of("task/list")[-1] == {"status": ["dismissed"]}
    with pytest.raises(TaskNotFound):
        await daemon.accept_task("k-nope")


async def test_threads_start_report_and_are_waited_for(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    coordinator = await (await daemon.agent()).session("/")
    threads = [
        await coordinator.athread(f"say part {n}", placement="worktree", title=f"t{n}") for n in range(3)
    ]
    assert {(t.info.kind, t.info.parent, t.info.placement) for t in threads} == {
        ("thread", coordinator.id, "worktree")
    }
    reports = await daemon.wait_threads(threads, timeout=30)
    assert [(r.session, r.done, r.reply) for r in reports] == [
        (t.id, True, f"part {n}") for n, t in enumerate(threads)
    ]
    assert (await threads[0].areport()).reply == "part 0"
    queued_on = await daemon.broadcast("say cutoff moved", threads_of=coordinator)
    assert queued_on == [t.id for t in threads]
    assert fake.params_of("session/broadcast") == [
        {"prompt": "say cutoff moved", "threadsOf": coordinator.id}
    ]
    reports = await daemon.wait_threads([t.id for t in threads], timeout=30)
    assert {r.reply for r in reports} == {"cutoff moved"}
    await daemon.broadcast("say hi", sessions=[threads[0], threads[1].id])
    assert fake.params_of("session/broadcast")[-1]["sessions"] == [threads[0].id, threads[1].id]


# ---------------------------------------------------------------- the trace and snapshots


async def test_trace_reads_the_log_to_its_head_and_ends(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    session = await (await daemon.agent()).session("/")
    await session.asend("say one two")
    head = fake.seq
    async with daemon.trace() as trace:
        seqs = [event.seq async for event in trace]
    assert seqs == list(range(1, head + 1))
    assert trace.head == head
    async with daemon.trace(since=head) as trace:
        assert [event async for event in trace] == []
    async with daemon.trace(since=2, kinds=[EventKind.TURN_CHUNK]) as trace:
        assert [e.data["text"] async for e in trace] == ["one", " two"]


async def test_trace_follow_goes_on_with_new_events(daemon: AsyncDaemon) -> None:
    session = await (await daemon.agent()).session("/")
    await session.asend("say before")
    async with daemon.trace(follow=True, sessions=[session.id]) as trace:
        await session.asend("say after")
        texts = []
        async for event in trace:
            if event.kind is EventKind.TURN_CHUNK:
                texts.append(event.data["text"])
            if texts == ["before", "after"]:
                break


async def test_trace_of_a_run_reads_its_sessions_only(fake: FakeDaemon, daemon: AsyncDaemon) -> None:
    await (await daemon.agent()).abatch(["say outside"], "/")
    async with aconnect(start=False, run="traced") as flow:
        assert flow.run is not None
        run_id = flow.run.id
        replies = await (await flow.agent()).abatch(["say inside", "say also inside"], "/")
    async with daemon.trace(run=run_id) as trace:
        events = [event async for event in trace]
    assert {e.session for e in events} == {r.session for r in replies}
    with pytest.raises(RunNotFound):
        async with daemon.trace(run="r-nope") as trace:
            pass
    async with aconnect(start=False, run="empty") as empty:
        assert empty.run is not None
        async with empty.trace(run=empty.run.id) as trace:
            assert [e async for e in trace] == []


def test_the_sync_trace_and_snapshot(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        daemon.agent().session("/").send("say sync")
        with daemon.trace() as trace:
            kinds = [event.kind for event in trace]
        assert EventKind.TURN_ENDED in kinds
        assert trace.head == fake.seq
        with daemon.events(snapshot=True) as events:
            assert events.head == fake.seq
            assert events.snapshot is not None
            assert [s.id for s in events.snapshot.sessions] == list(fake.sessions)
            assert fake.params_of("events/subscribe")[-1] == {"snapshot": True}


# ---------------------------------------------------------------- the sync twins


def test_the_twins_give_the_same_answers_for_the_newer_calls(fake: FakeDaemon) -> None:
    def shape(value: Any) -> Any:
        # Ids and times differ between the runs; what came back must not.
        if isinstance(value, list):
            return [shape(v) for v in value]
        dump = value.model_dump(exclude={"id", "session", "turn_id", "started_at", "ended_at", "created_at"})
        return {
            k: v for k, v in dump.items() if k not in ("status_since", "from_session", "parent", "branch")
        }

    def sync_run() -> list[Any]:
        with connect(start=False) as daemon:
            main = daemon.agent().session("/", placement="worktree")
            side = main.side("say aside")
            assert isinstance(side, SideChat)
            thread = main.thread("say threaded")
            task = daemon.suggest_task("t", "say task", from_session=main)
            return [
                side.reply.text if side.reply else None,
                side.forked,
                shape(daemon.wait_threads([thread])),
                shape(thread.report()),
                daemon.broadcast("say again", threads_of=main) == [thread.id],
                shape(task),
                daemon.dismiss_task(task.id, "no").status,
                main.merge().status,
                len(main.tree().children),
            ]

    async def async_run() -> list[Any]:
        async with aconnect(start=False) as daemon:
            main = await (await daemon.agent()).session("/", placement="worktree")
            side = await main.aside("say aside")
            thread = await main.athread("say threaded")
            task = await daemon.suggest_task("t", "say task", from_session=main)
            return [
                side.reply.text if side.reply else None,
                side.forked,
                shape(await daemon.wait_threads([thread])),
                shape(await thread.areport()),
                await daemon.broadcast("say again", threads_of=main) == [thread.id],
                shape(task),
                (await daemon.dismiss_task(task.id, "no")).status,
                (await main.amerge()).status,
                len((await main.atree()).children),
            ]

    sync_outcomes = sync_run()
    async_outcomes = asyncio.run(async_run())
    assert sync_outcomes == async_outcomes
    assert sync_outcomes[0] == "aside"


def test_sync_handles_can_be_passed_where_the_async_ones_go(fake: FakeDaemon) -> None:
    with connect(start=False) as daemon:
        sessions = daemon.agent().sessions(2, "/")
        assert daemon.broadcast("say x", sessions=sessions) == [s.id for s in sessions]
        assert [r.session for r in daemon.wait_threads(sessions)] == [s.id for s in sessions]


def test_merge_steps_reach_a_sync_callback(fake: FakeDaemon) -> None:
    steps: list[Event] = []
    with connect(start=False) as daemon:
        session = daemon.agent().session("/", placement="worktree")
        entry = session.merge(on_step=steps.append)
    assert entry.status == "merged"
    assert steps[-1].data["step"] == "merged"
    assert {e.session for e in steps} == {session.id}
    assert all(s.status is not SessionStatus.CLOSED for s in fake.sessions.values())
