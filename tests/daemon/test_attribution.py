"""Changed files per session in a shared working copy (placement `here`), with real concurrency:
each session shows what its agent did; a command window two sessions shared is shown for both."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest
from events import TIMEOUT, next_matching

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, AsyncSession, aconnect
from sessiond.daemon.attribution import EARLY_RUN
from sessiond.protocol.models import Changes

WAIT_FOR = "while [ ! -f {0} ]; do sleep 0.02; done"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def working_copy(work: Path, kind: str) -> Path:
    """One working copy for every session: a git repository, or a plain folder (snapshots)."""
    (work / "readme.txt").write_text("hello\n")
    if kind == "git":
        git(work, "init", "-q", "-b", "main")
        git(work, "-c", "user.email=t@e", "-c", "user.name=t", "add", "-A")
        git(work, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "start")
    return work


@pytest.fixture(params=["git", "plain"])
def shared(request: pytest.FixtureRequest, work: Path) -> Path:
    return working_copy(work, request.param)


@pytest.fixture
def repository(work: Path) -> Path:
    return working_copy(work, "git")


def files(changes: Changes | None) -> dict[str, list[str]]:
    """path -> the sessions it is shared with."""
    assert changes is not None
    return {f.path: f.shared_with or [] for f in changes.files}


async def changes_when(session: AsyncSession, ready: object) -> Changes:
    """The session's changes once `ready(changes)` holds (counted in the background after a turn)."""
    last: Changes | None = None
    try:
        async with asyncio.timeout(TIMEOUT):
            while True:
                last = (await session.aget()).changes
                if last is not None and ready(last):  # type: ignore[operator]
                    return last
                await asyncio.sleep(0.05)
    except TimeoutError:
        shown = files(last) if last is not None else None
        raise AssertionError(f"{session.id}'s changes not ready in {TIMEOUT} s; last seen: {shown}") from None


async def test_an_fs_write_and_a_command_at_once_are_each_their_own(
    client: AsyncDaemon, shared: Path
) -> None:
    demo = await client.agent("demo")
    writer, runner = await demo.sessions(2, shared, placement="here")
    async with client.events(sessions=[runner.id], kinds=["turn.tool"]) as events:
        # The runner's command waits for a file the writer writes: both are at work at once.
        running = asyncio.create_task(runner.asend(f"run sh -c '{WAIT_FOR.format('go')}; echo b > b.txt'"))
        # Its terminal is up (the update carrying it comes after terminal/create): the command runs.
        await next_matching(events, lambda e: e.kind == "turn.tool" and not e.data.get("first"))
        wrote = await writer.asend("write a.txt a\nwrite go yes")
        ran = await running
    # The answers carry the changes, current as they arrive.
    assert files(wrote.changes) == {"a.txt": [], "go": []}
    assert files(ran.changes) == {"b.txt": []}
    assert ran.changes is not None
    assert ran.changes.others is not None
    assert {f.path for f in ran.changes.others} >= {"a.txt", "go"}
    assert (await runner.aget()).changes == ran.changes  # session/get agrees at once
    # The writer sees b.txt as someone else's when its changes are next counted.
    again = await writer.asend("append a.txt +")
    assert again.changes is not None
    assert again.changes.others is not None
    assert "b.txt" in {f.path for f in again.changes.others}
    assert files(again.changes) == {"a.txt": [], "go": []}


async def test_commands_two_sessions_ran_at_once_are_shown_for_both(
    client: AsyncDaemon, shared: Path
) -> None:
    demo = await client.agent("demo")
    one, two = await demo.sessions(2, shared, placement="here")
    # Each command waits until the other has started: their windows overlap.
    first = one.asend(f"run sh -c 'touch one-up; {WAIT_FOR.format('two-up')}; echo 1 > one.txt'")
    second = two.asend(f"run sh -c 'touch two-up; {WAIT_FOR.format('one-up')}; echo 2 > two.txt'")
    await asyncio.gather(first, second)
    for me, other in ((one, two), (two, one)):
        changes = await changes_when(me, lambda c: {"one.txt", "two.txt"} <= {f.path for f in c.files})
        shown = files(changes)
        assert shown["one.txt"] == [other.id], shown
        assert shown["two.txt"] == [other.id], shown
        assert all(f.shared for f in changes.files if f.path in ("one.txt", "two.txt"))
        assert "readme.txt" not in shown


async def test_a_session_that_writes_and_runs_shows_both(client: AsyncDaemon, shared: Path) -> None:
    demo = await client.agent("demo")
    busy, idle = await demo.sessions(2, shared, placement="here")
    reply = await busy.asend("write w.txt by fs\nrun sh -c 'echo r > r.txt'\nedit readme.txt hello => bye")
    assert files(reply.changes) == {"r.txt": [], "readme.txt": [], "w.txt": []}
    await idle.asend("say nothing to change")
    assert (await idle.aget()).changes is None  # it touched nothing: no files of its own


async def test_a_command_the_agent_ran_before_announcing_it_is_its_own(
    client: AsyncDaemon, shared: Path
) -> None:
    """opencode and Claude Code run commands in their own process and may announce them after
    they ran: the state the command's window starts from already holds its files."""
    demo = await client.agent("demo")
    session = (await demo.sessions(1, shared, placement="here"))[0]
    await session.asend("say the root's state is taken")
    # A person's edit between turns (its time before the next turn's start): others', not the command's.
    person = shared / "person.txt"
    person.write_text("mine\n")
    long_ago = time.time() - 60
    os.utime(person, (long_ago, long_ago))
    reply = await session.asend("shell sh -c 'echo made > made.txt; rm readme.txt'")
    assert reply.text.startswith("Ran sh -c 'echo made > made.txt; rm readme.txt' itself: exit code 0")
    assert files(reply.changes) == {"made.txt": [], "readme.txt": []}
    assert reply.changes is not None
    assert [f.kind for f in reply.changes.files] == ["added", "deleted"]
    assert reply.changes.others is not None
    assert {f.path for f in reply.changes.others} == {"person.txt"}


async def test_after_a_restart_a_command_that_ran_before_it_was_told_of_is_still_its_own(
    daemon: Daemon, repository: Path
) -> None:
    """A session carried on after a restart starts from its stored base (no state taken yet):
    the command its agent ran before telling of it reaches back to that base."""
    async with aconnect(daemon.socket, start=False) as client:
        session = await (await client.agent("demo")).session(repository, placement="here")
        first = await session.asend("write notes.txt kept")
        assert files(first.changes) == {"notes.txt": []}
    await asyncio.to_thread(daemon.stop)
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        again = await client.session(session.id)
        reply = await again.asend("shell sh -c 'echo made > made.txt'")
        assert reply.changes is not None
        assert reply.changes.base == first.changes.base  # type: ignore[union-attr]
        assert files(reply.changes) == {"made.txt": [], "notes.txt": []}


async def test_commands_two_agents_ran_before_announcing_them_are_shared(
    client: AsyncDaemon, shared: Path
) -> None:
    """Two agents' own commands ran at once, each announced after it ran: which made which file
    cannot be told, so each session shows every file they made, shared with the other."""
    demo = await client.agent("demo")
    one, two = await demo.sessions(2, shared, placement="here")
    await asyncio.gather(one.asend("say ready"), two.asend("say ready"))
    # Each command waits until the other has started: both ran before either is announced, the
    # first for longer than EARLY_RUN (its agent tells of it only once it ended: it reaches back
    # to its turn's start).
    first = one.asend(f"shell sh -c 'touch one-up; {WAIT_FOR.format('two-up')}; echo 1 > one.txt'")
    second = two.asend(
        f"sleep {EARLY_RUN + 0.5}\nshell sh -c 'touch two-up; {WAIT_FOR.format('one-up')}; echo 2 > two.txt'"
    )
    await asyncio.gather(first, second)
    made = {"one-up", "two-up", "one.txt", "two.txt"}
    for me, other in ((one, two), (two, one)):
        changes = await changes_when(me, lambda c: made <= {f.path for f in c.files})
        shown = files(changes)
        assert shown == {path: [other.id] for path in made}, shown
        assert all(f.shared for f in changes.files)


async def test_a_worktree_session_keeps_the_exact_git_answer(client: AsyncDaemon, repository: Path) -> None:
    session = await (await client.agent("demo")).session(repository, placement="worktree")
    reply = await session.asend("run sh -c 'echo x > x.txt'")
    assert files(reply.changes) == {"x.txt": []}
    assert reply.changes is not None
    assert reply.changes.others is None
