"""The daemon as a process: one per socket, orderly stops, restarts, crashes, bad clients."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from events import kind, next_matching

from bench.harness import Daemon
from sessiond.client import (
    AgentNotFound,
    AsyncDaemon,
    ConnectionLost,
    InvalidParams,
    SessionNotFound,
    aconnect,
)
from sessiond.protocol import paths
from sessiond.protocol.errors import ErrorCode


def test_a_second_serve_on_the_same_socket_says_so_and_exits(daemon: Daemon) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "sessiond.daemon", "--socket", str(daemon.socket)],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode != 0
    assert "already running" in second.stderr
    assert str(daemon.pid) in second.stderr


def test_the_socket_is_private(daemon: Daemon) -> None:
    assert daemon.socket.stat().st_mode & 0o777 == 0o600
    assert daemon.socket.parent.stat().st_mode & 0o777 == 0o700


async def test_sigterm_cancels_running_turns_and_exits_cleanly(daemon: Daemon, work: Path) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        session = await (await client.agent("demo")).session(work)
        async with client.events(sessions=[session.id], kinds=["turn.started"]) as events:
            turn = asyncio.create_task(session.asend("hang"))
            await next_matching(events, kind("turn.started"))
            daemon.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
            reply = await turn
    assert reply.stop_reason == "cancelled"
    assert await asyncio.to_thread(daemon.stop) == 0
    assert not daemon.socket.exists()


async def test_sessions_and_turns_survive_a_restart(daemon: Daemon, work: Path) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        agent = await client.agent("demo", max_active_turns=3)
        session = await agent.session(work, title="keep me")
        await session.asend("say before the restart")
        session_id = session.id
    assert await asyncio.to_thread(daemon.stop) == 0
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        agent = await client.agent("demo")
        assert agent.info.options.max_active_turns == 3
        again = await client.session(session_id)
        info = await again.aget()
        assert info.title == "keep me"
        assert info.turns == 1
        assert info.recap == "before the restart"
        # A new agent process: the session comes back by session/resume or load, history intact.
        reply = await again.asend("history")
    assert "say before the restart" in reply.text


async def test_a_killed_daemon_marks_the_running_turn_interrupted(daemon: Daemon, work: Path) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        session = await (await client.agent("demo")).session(work)
        kinds = ["turn.started", "turn.chunk", "turn.queued"]
        async with client.events(sessions=[session.id], kinds=kinds) as events:
            turn = asyncio.create_task(session.asend("say begun\nhang"))
            started = await next_matching(events, kind("turn.started"))
            await next_matching(events, kind("turn.chunk"))  # (stored: clients hear only what is)
            queued = asyncio.create_task(session.asend("say behind it"))
            await next_matching(events, lambda e: e.kind == "turn.queued" and e.turn != started.turn)
            await asyncio.to_thread(daemon.stop, signal.SIGKILL)
        # Closed, or reset when the daemon died with bytes of ours unread: either way it says so.
        for cut in (turn, queued):
            with pytest.raises(ConnectionLost, match=r"closed|broke"):
                await cut
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        again = await client.session(session.id)
        info = await again.aget()
        assert info.status == "failed"
        assert "interrupted" in (info.last_error or "")
        assert info.turns == 2  # both ended, interrupted: the one running and the one behind it
        # What was said before the stop is still there to read, in order.
        said = [(line.role, line.text) for line in (await again.atranscript()).lines]
        assert said[:3] == [("user", "say begun"), ("user", "hang"), ("agent", "begun")]
        assert said[3] == ("user", "say behind it")
        await again.asend("say after")
        said = [(line.role, line.text) for line in (await again.atranscript()).lines]
        assert said[-2:] == [("user", "say after"), ("agent", "after")]
        assert said[0] == ("user", "say begun")  # numbered on from the stored lines, not afresh
    db = sqlite3.connect(daemon.home / "state" / "sessiond.db")
    (state,) = db.execute("SELECT state FROM turns WHERE id = ?", (started.turn,)).fetchone()
    assert state == "interrupted"


async def test_events_replay_after_a_restart_without_gap_or_duplicate(daemon: Daemon, work: Path) -> None:
    async with aconnect(daemon.socket, start=False) as client:
        session = await (await client.agent("demo")).session(work)
        for n in range(3):
            await session.asend(f"say {n}")
    await asyncio.to_thread(daemon.stop)
    daemon.start()
    async with aconnect(daemon.socket, start=False) as client:
        await (await client.session(session.id)).asend("say after")
        status = await client.status()
        async with client.events(since=0) as events:
            seqs = []
            while not seqs or seqs[-1] < status.head:
                seqs.append((await next_matching(events, lambda e: True)).seq)
    assert seqs == list(range(1, status.head + 1))


async def test_many_clients_at_once_and_one_leaving_stops_nothing(daemon: Daemon, work: Path) -> None:
    async with (
        aconnect(daemon.socket, start=False) as watcher,
        aconnect(daemon.socket, start=False) as worker,
    ):
        session = await (await worker.agent("demo")).session(work)
        async with watcher.events(sessions=[session.id], kinds=["turn.chunk"]) as events:
            leaver = await aconnect(daemon.socket, start=False)
            await leaver.aclose()  # shutdown + exit: that connection only
            reply = await session.asend("say seen by the other")
            chunk = await next_matching(events, kind("turn.chunk"))
        assert chunk.data["text"] == "seen by the other"
        assert reply.text == "seen by the other"
        assert (await watcher.status()).clients == 2


async def test_a_dropped_connection_leaves_its_turn_running(daemon: Daemon, work: Path) -> None:
    async with aconnect(daemon.socket, start=False) as watcher:
        session = await (await watcher.agent("demo")).session(work)
        async with watcher.events(sessions=[session.id], kinds=["turn.started", "turn.ended"]) as events:
            raw = _raw(daemon.socket)
            _send(raw, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
            _send(
                raw,
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/prompt",
                    "params": {"session": session.id, "prompt": "say finished without me"},
                },
            )
            await next_matching(events, kind("turn.started"))
            raw.close()  # gone, mid-turn
            ended = await next_matching(events, kind("turn.ended"))
        assert ended.data["stopReason"] == "end_turn"
        assert (await session.aget()).recap == "finished without me"


async def test_bad_requests_get_clear_errors_and_the_connection_lives_on(
    client: AsyncDaemon, daemon: Daemon, work: Path
) -> None:
    with pytest.raises(InvalidParams, match="root") as caught:
        await (await client.agent("demo")).session("/no/such/dir")
    assert "not an existing directory" in str(caught.value)
    with pytest.raises(SessionNotFound, match="no session 'nope'"):
        await client.session("nope")
    with pytest.raises(AgentNotFound, match="no agent named 'ghost'") as unknown:
        await client.agent("ghost")
    # Where a person adds one (a script creates it with agent/create).
    assert f"add it to {daemon.home / 'config' / 'agents.toml'} (read when the daemon starts)" in str(
        unknown.value
    )
    assert (await client.status()).agents == 1


def _raw(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(path))
    sock.settimeout(60)
    return sock


def _send(sock: socket.socket, message: dict[str, object] | bytes) -> None:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _receive(sock: socket.socket) -> dict[str, object]:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        buffer += sock.recv(1)
    length = next(
        int(line.split(b":")[1])
        for line in buffer.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return json.loads(body)  # type: ignore[no-any-return]


def test_malformed_messages_get_json_rpc_errors(daemon: Daemon) -> None:
    sock = _raw(daemon.socket)
    _send(sock, b"{not json")
    assert _receive(sock)["error"]["code"] == -32700  # type: ignore[index]
    _send(sock, {"jsonrpc": "2.0", "id": 1, "method": "agent/list", "params": {}})
    error = _receive(sock)["error"]
    assert error["code"] == -32002  # type: ignore[index]
    assert "initialize" in error["message"]  # type: ignore[index]
    _send(sock, {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"capabilities": {}}})
    assert "result" in _receive(sock)
    _send(
        sock,
        {"jsonrpc": "2.0", "id": 3, "method": "session/open", "params": {"root": "relative", "cuont": 2}},
    )
    error = _receive(sock)["error"]
    assert error["code"] == -32602  # type: ignore[index]
    assert set(error["data"]["fields"]) == {"root", "cuont"}  # type: ignore[index]
    _send(sock, {"jsonrpc": "2.0", "id": 4, "method": "session/open", "params": ["positional"]})
    assert _receive(sock)["error"]["code"] == -32602  # type: ignore[index]
    _send(sock, {"jsonrpc": "2.0", "id": 5, "method": "session/teleport", "params": {}})
    error = _receive(sock)["error"]
    assert error["code"] == -32601  # type: ignore[index]
    assert "session/teleport" in error["message"]  # type: ignore[index]
    _send(sock, {"jsonrpc": "2.0", "id": 6, "method": "daemon/status"})
    assert _receive(sock)["result"]["agents"] == 1  # type: ignore[index]


def test_tcp_is_loopback_only(tmp_path: Path) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "sessiond.daemon", "--socket", "/tmp/sd-never.sock", "--tcp", "0.0.0.0:7700"],
        env={**os.environ, "SESSIOND_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert "only loopback addresses" in refused.stderr


def test_tcp_clients_must_present_the_token() -> None:
    served = Daemon(extra_args=("--tcp", "127.0.0.1:0")).start()
    try:
        token_file = served.home / "state" / "tcp-token"
        address = (served.home / "state" / "tcp-address").read_text().strip()
        assert token_file.stat().st_mode & 0o777 == 0o600
        host, port = address.rsplit(":", 1)
        for token, expect in (
            (None, "error"),
            ("wrong", "error"),
            (token_file.read_text().strip(), "result"),
        ):
            sock = socket.create_connection((host, int(port)), timeout=60)
            options = {} if token is None else {"token": token}
            _send(
                sock,
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"capabilities": {}, "initializationOptions": options},
                },
            )
            answer = _receive(sock)
            assert expect in answer, answer
            _send(sock, {"jsonrpc": "2.0", "id": 2, "method": "daemon/status"})
            status = _receive(sock)
            if expect == "error":
                assert status["error"]["code"] == ErrorCode.UNAUTHORIZED  # type: ignore[index]
                assert "token" in status["error"]["message"]  # type: ignore[index]
            else:
                assert status["result"]["tcp"] == address  # type: ignore[index]
            sock.close()
    finally:
        served.stop()


def test_socket_paths_that_are_too_long_are_refused_clearly(tmp_path: Path) -> None:
    long_socket = tmp_path / ("x" * 120) / "s.sock"
    with pytest.raises(ValueError, match="unix sockets allow 107"):
        paths.check_socket_path(long_socket)
