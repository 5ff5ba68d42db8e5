"""What every real agent's interop tests share, whatever the agent and its model stand-in:
a daemon for the module, and two steps: leave a streaming turn (it must end cancelled soon),
kill the agent mid-turn (only that turn fails). The caller first queues a slow reply.
And for a model API that refuses, breaks or is gone: an address nothing answers, and a turn
that must fail within a bound; for worktree sessions, a git repository with one commit, and
where a session's command wrote, and what its changed files show; a client allowing, then
rejecting, the tool an agent asks about."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import AgentError, AgentUnavailable, AsyncAgent, AsyncDaemon, AsyncSession

FAILS_WITHIN = 30.0  # seconds: generous for 2 shared cores; an agent that does not retry fails in ~2 s


def module_daemon(agent: Path | None = None) -> Iterator[Daemon]:
    """One daemon for a module's tests (each test its own agent: stopping a daemon costs seconds),
    its stderr printed at the end; fails first when the `agent` npm installs is missing."""
    if agent is not None and (shutil.which("node") is None or not agent.exists()):
        pytest.fail(f"{agent} is missing: `./dev test` installs it (npm install --prefix tests/interop)")
    running = Daemon().start()
    yield running
    code = running.stop()
    print("\n".join(["--- daemon stderr", *running.stderr]))
    assert code == 0, f"the daemon exited with {code}"
    shutil.rmtree(running.home, ignore_errors=True)


async def leave_mid_stream(client: AsyncDaemon, session: AsyncSession, within: float = 15) -> None:
    """Stream a turn, leave it at its first chunk: it ends `cancelled` within `within` seconds."""
    async with client.events(sessions=[session.id], kinds=["turn.ended"]) as events:
        stream = session.astream("talk for a long time")
        async for event in stream:
            if event.kind == "turn.chunk":
                break
        started = time.monotonic()
        await stream.aclose()  # leaving the stream cancels the turn
        ended = await next_matching(events, kind("turn.ended"), timeout=within)
    assert ended.data.get("stopReason") == "cancelled", ended.data
    assert time.monotonic() - started < within


async def kill_mid_turn(client: AsyncDaemon, agent: AsyncAgent, session: AsyncSession) -> None:
    """Kill the agent's process group at the turn's first chunk: that turn fails saying so."""
    async with client.events(sessions=[session.id], kinds=["turn.chunk"]) as chunks:
        turn = asyncio.create_task(session.asend("talk slowly"))
        await next_matching(chunks, kind("turn.chunk"), timeout=30)
        pid = (await agent.aget()).process.pid
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)  # the agent and what it started
        with pytest.raises(AgentUnavailable, match="killed by SIGKILL during session/prompt"):
            await asyncio.wait_for(turn, 15)


class StillRunning(AssertionError):
    """A turn that was to fail within a bound was still going (an agent retrying, say)."""


def unreachable_url(path: str = "") -> str:
    """A loopback address nothing listens on (a port just bound and let go), `path` after it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


async def fails_fast(session: AsyncSession, prompt: str, within: float = FAILS_WITHIN) -> str:
    """Send `prompt`: the turn fails within `within` seconds and the session shows `failed`; the
    error's sentence. A turn still going by then is cancelled, and the check fails saying so."""
    turn = asyncio.ensure_future(session.asend(prompt))
    done, _ = await asyncio.wait({turn}, timeout=within)
    if not done:
        await session.acancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(turn, 30)
        raise StillRunning(f"the turn had not ended {within:.0f} s after it was sent")
    with pytest.raises(AgentError) as failed:
        turn.result()
    assert (await session.aget()).status == "failed"
    return str(failed.value)


def git_repo(root: Path) -> Path:
    """A git repository at `root` with one commit (a README), for worktree sessions."""
    root.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    (root / "README.md").write_text("# repo\n")
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)
    return root


async def landed_in_its_worktree(session: AsyncSession, repo: Path, name: str = "where.txt") -> Path:
    """The file the session's command wrote (`pwd > name`) is in its worktree, naming that as where it
    ran, and not in the checkout `repo`; the worktree."""
    info = await session.aget()
    assert info.where is not None
    assert info.where.worktree is not None
    tree = Path(info.where.worktree)
    assert (tree / name).read_text().strip() == str(tree)
    assert not (repo / name).exists()
    return tree


async def shows_changed(session: AsyncSession, path: str, timeout: float = 10) -> None:
    """`path` is among the session's changed files within `timeout` s (state events are throttled)."""
    deadline = time.monotonic() + timeout
    while True:
        info = await session.aget()
        if info.changes is not None and path in {f.path for f in info.changes.files}:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} not in the changed files of {session.id} within {timeout} s")
        await asyncio.sleep(0.05)


async def allow_then_reject(
    client: AsyncDaemon, session: AsyncSession, mentions: str, timeout: float = 30
) -> list[dict[str, Any]]:
    """Two turns ("run the first", "run the second"), each asking a permission of the client for a
    tool call that mentions `mentions` within `timeout` s: the first allowed once, the second
    rejected once; each turn ends. The tool calls asked about."""
    asked: list[dict[str, Any]] = []
    async with client.events(sessions=[session.id], kinds=["permission.asked"]) as events:
        for prompt, answer in (("run the first", "allow_once"), ("run the second", "reject_once")):
            turn = asyncio.create_task(session.asend(prompt))
            event = await next_matching(events, kind("permission.asked"), timeout=timeout)
            assert mentions in str(event.data["toolCall"])
            option = next(o["optionId"] for o in event.data["options"] if o["kind"] == answer)
            assert await client.answer_permission(event.data["permission"], option)
            await turn
            asked.append(event.data["toolCall"])
    # The refused call's transcript line says so, whatever the agent said of it after (gemini-cli
    # nothing, others that it failed), from memory and from the store alike.
    for transcript in (await session.atranscript(limit=50), await session.atranscript(offset=0)):
        tools = [line.text for line in transcript.lines if line.role == "tool"]
        refused = [text for text in tools if text.endswith(" (refused)")]
        assert len(refused) == 1, tools
        assert mentions in refused[0], tools
    return asked
