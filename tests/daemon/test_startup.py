"""A lazy start: what a daemon and the editor's relay import before they are needed.

A daemon answers `initialize` before pygls, lsprotocol, pydantic, the protocol's models or the
core have loaded (they load on a thread behind the door, while it answers), and the daemon's
methods before pygls and lsprotocol have (they load on a thread once it serves, for a turn's
progress and the permissions asked of clients, which wait for them if need be). The ACP SDK, the
MCP SDK, asyncssh and uvicorn take most of a cold start (and Ray would); a daemon that has
served clients but never run a turn has loaded none of them, nor the placements its sessions
did not ask for; and the relay an editor spawns (`sessiond stdio`) loads neither the daemon,
pydantic nor asyncio. The daemon says, at SESSIOND_LOG=debug, what it began answering
without, which it serves without, and when each one loads (an audit hook on imports).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.harness import Daemon
from bench.startup import copy_sessions
from sessiond.client import aconnect
from sessiond.client.connection import Connection


@pytest.fixture
def debug_daemon(monkeypatch: pytest.MonkeyPatch) -> Daemon:
    monkeypatch.setenv("SESSIOND_LOG", "debug")
    return Daemon().start()


def _loaded(daemon: Daemon) -> set[str]:
    return {m.group(1) for line in daemon.stderr if (m := re.search(r"DEBUG loading ([\w.]+) ", line))}


PLACEMENTS = [f"sessiond.daemon.placements.{kind}" for kind in ("worktree", "sandbox", "container")]


def test_a_daemon_begins_answering_before_pygls_pydantic_and_the_core_have_loaded(
    debug_daemon: Daemon,
) -> None:
    """What it had loaded when its door began to answer (said before the rest starts loading)."""
    try:
        answering = next(line for line in debug_daemon.stderr if "DEBUG answering initialize without" in line)
        without = answering.partition("answering initialize without ")[2].split(", ")
        assert without == [
            "pygls",
            "lsprotocol",
            "pydantic",
            "sessiond.protocol.models",
            "sessiond.daemon.core",
        ]
    finally:
        assert debug_daemon.stop() == 0


async def test_a_daemon_loads_the_acp_sdk_on_its_first_turn_and_not_before(
    debug_daemon: Daemon, tmp_path: Path
) -> None:
    daemon = debug_daemon
    try:
        serving = next(line for line in daemon.stderr if "DEBUG serving without" in line)
        expected = ", ".join(["pygls", "lsprotocol", "acp", "mcp", "asyncssh", "uvicorn", "ray", *PLACEMENTS])
        assert serving.endswith(f"serving without {expected}"), serving
        async with aconnect(daemon.socket, start=False) as client:
            await client.status()
            agent = await client.agent("demo")
            session = await agent.session(tmp_path)
            await client.sessions()  # listing and opening sessions need no agent either
            assert _loaded(daemon) == set(), daemon.stderr
            reply = await session.asend("say hi")
            assert reply.text.startswith("hi")
            # On the importer's thread: the loop answered other clients meanwhile.
            assert "on sessiond-importer" in daemon.wait_for_line("DEBUG loading acp ")
            # No ssh, worktree, sandbox or container session was asked for.
            assert _loaded(daemon).isdisjoint(["asyncssh", *PLACEMENTS]), _loaded(daemon)
    finally:
        assert daemon.stop() == 0


async def test_an_editors_first_turn_as_the_daemon_begins_serving_is_reported_as_progress(
    debug_daemon: Daemon, tmp_path: Path
) -> None:
    """An editor's first turn, sent as soon as the daemon serves (pygls still loading on its
    thread, as a rule): it is told as progress once pygls is in, and the daemon answers other
    requests meanwhile."""
    daemon = debug_daemon
    try:
        reader, writer = await asyncio.open_unix_connection(str(daemon.socket))
        editor = Connection.open(reader, writer, peer="editor")
        progress: list[dict[str, Any]] = []
        editor.on_notification("$/progress", progress.append)
        capabilities = {"window": {"workDoneProgress": True}}
        await editor.request("initialize", {"processId": None, "capabilities": capabilities})
        opened = await editor.request("session/open", {"agent": "demo", "root": str(tmp_path)})
        session = opened["sessions"][0]["id"]
        turn = asyncio.ensure_future(
            editor.request("session/prompt", {"session": session, "prompt": "say hi"})
        )
        listed = await editor.request("session/list", {})
        assert [s["id"] for s in listed["sessions"]] == [session]
        result = await turn
        assert result["stopReason"] == "end_turn"
        assert [p["value"]["kind"] for p in progress] == ["begin", "report", "end"]
        assert progress[1]["value"]["message"] == "hi"
        assert progress[0]["token"] == f"sessiond-{result['turnId']}"
        assert "on sessiond-importer" in daemon.wait_for_line("DEBUG loading pygls ")
        daemon.wait_for_line("DEBUG loaded sessiond.daemon.lsp_outbound (")
        await editor.close()
    finally:
        assert daemon.stop() == 0


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


async def test_a_placement_loads_with_the_first_session_that_asks_for_it(
    debug_daemon: Daemon, tmp_path: Path, repo: Path
) -> None:
    daemon = debug_daemon
    try:
        async with aconnect(daemon.socket, start=False) as client:
            agent = await client.agent("demo")
            await agent.session(tmp_path)
            assert _loaded(daemon).isdisjoint(PLACEMENTS)
            await agent.session(repo, placement="worktree")
            daemon.wait_for_line("DEBUG loading sessiond.daemon.placements.worktree ")
            assert _loaded(daemon) & set(PLACEMENTS) == {"sessiond.daemon.placements.worktree"}
            assert await client.merges() == []  # listed before any merge made the queue
    finally:
        assert daemon.stop() == 0


def _frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_the_editor_relay_imports_neither_the_daemon_nor_pydantic_nor_asyncio(daemon: Daemon) -> None:
    """`sessiond stdio` against a running daemon, as an editor spawns it: initialize answered, and
    the relay's own imports (from -X importtime) hold nothing it does not need."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
    relay = ["-m", "sessiond.client", "--socket", str(daemon.socket), "stdio"]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *relay],
        input=_frame(initialize),
        capture_output=True,
        env={**os.environ, "SESSIOND_HOME": str(daemon.home)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b'"id":1' in done.stdout.replace(b" ", b"")
    assert b'"result"' in done.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
    heavy = {"pydantic", "asyncio", "sessiond.daemon", "sessiond.protocol.models", "pygls", "lsprotocol"}
    assert imported & heavy == set(), sorted(imported & heavy)


HEAVY = {"pydantic", "asyncio", "sessiond.daemon", "sessiond.protocol.models", "pygls", "lsprotocol"}


def _imports_of(done: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if "import time:" in line}


def test_the_commands_that_ask_and_print_load_neither_asyncio_nor_pydantic(
    daemon: Daemon, tmp_path: Path
) -> None:
    """`sessiond status`, `new`, `ls`, `send` (a real demo turn, its reply streamed), `agents`,
    `cancel` and `close` against a running daemon: what each prints, and what it imported."""

    def sessiond(*argv: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [
                sys.executable,
                "-X",
                "importtime",
                "-m",
                "sessiond.client",
                "--socket",
                str(daemon.socket),
                *argv,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "SESSIOND_HOME": str(daemon.home)},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done

    opened = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessiond.client",
            "--socket",
            str(daemon.socket),
            "new",
            "--root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    session = opened.stdout.strip()
    status = sessiond("status")
    assert f"socket    {daemon.socket}" in status.stdout.splitlines()
    assert "sessions  1 open (1 idle); 0 closed" in status.stdout.splitlines()
    sent = sessiond("send", session, "say hello there")
    assert sent.stdout == "hello there\n"
    assert "stop reason" not in sent.stderr  # (a turn that ended well: said by its reply alone)
    assert "sessiond.client.plain" in sent.stderr  # (what it loaded: the import times, below)
    listed = sessiond("ls")
    assert listed.stdout.splitlines()[1].split()[:4] == [session, "demo", "idle", "1"]
    assert json.loads(sessiond("ls", "--json").stdout)["turns"] == 1
    agents = sessiond("agents")
    assert agents.stdout.splitlines()[1].split()[0] == "demo"
    assert sessiond("cancel", session).stdout == f"{session} had no turn running or queued: nothing to stop\n"
    closed = sessiond("close", session)
    assert closed.stdout == f"closed {session}\n"
    for done in (status, sent, listed, agents, closed):
        assert _imports_of(done) & HEAVY == set(), (done.args, sorted(_imports_of(done) & HEAVY))


async def test_a_restart_reads_idle_sessions_on_first_need_and_counts_them_all(
    daemon: Daemon, tmp_path: Path
) -> None:
    """Sessions left in the store (idle, closed, with turns, side chats) come back after a restart
    as they were: pages, totals, the fleet's counts and each one by id, though only the busy ones
    are read at start-up."""
    async with aconnect(daemon.socket, start=False) as client:
        agent = await client.agent("demo")
        worked = await agent.session(tmp_path, title="worked")
        await worked.asend("say hi")
        idle = await agent.session(tmp_path, title="idle")
        closed = await agent.session(tmp_path, title="closed")
        await closed.aclose()
        side = await worked.aside()  # a child, idle, nothing stored about it but its row
    assert daemon.stop() == 0
    copy_sessions(daemon.home / "state" / "sessiond.db", idle.id, 2000)  # idle, no events
    copy_sessions(daemon.home / "state" / "sessiond.db", closed.id, 500)  # closed
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        fleet = await client.fleet()
        opened = 3 + 2000
        assert fleet.open == opened
        assert fleet.turns >= 1
        # Copies are numbered on: idle ones s5..s2004, closed ones s2005..s2504. Read by id first.
        assert (await (await client.session("s2504")).aget()).status.value == "closed"
        assert (await (await client.session("s2004")).aget()).title == "idle"
        everyone = await client.sessions()
        assert len(everyone) == opened
        assert [s.id for s in everyone] == sorted((s.id for s in everyone), key=lambda i: int(i[1:]))
        assert everyone[0].id == worked.id
        assert everyone[0].info.turns == 1
        assert len(await client.sessions(include_closed=True)) == opened + 501
        assert len(await client.sessions(status="closed")) == 501
        last = everyone[-1].id
        again = await (await client.session(last)).aget()
        assert again.status.value == "idle"
        assert again.title == "idle"
        # Its children are read by their parent's id.
        tree = await (await client.session(worked.id)).atree()
        assert [child.session.id for child in tree.children] == [side.id]
        agent = await client.agent("demo")
        assert agent.info.open_sessions == opened
        # One read on first need can run a turn like any other.
        reply = await (await client.session(last)).asend("say back")
        assert reply.text.startswith("back")
        assert (await client.fleet()).turns == fleet.turns + 1
