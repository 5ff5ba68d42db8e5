"""One gate for every message: nothing runs for a connection that may not ask for it.

A real daemon serving its unix socket and loopback TCP. Every method of the
method table is sent, with params that would change something if they ran,
as a notification (no id) and as a request, by three kinds of connection:
one that never initialized, one over TCP whose token was refused, and one
that holds a session's MCP token. The store, the listings and the disk are
the same afterwards, and the daemon still serves.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.harness import Daemon, checked
from sessiond.client import AsyncDaemon, aconnect
from sessiond.daemon.gate import ACTING_FOR_SESSION
from sessiond.protocol.errors import ErrorCode
from sessiond.protocol.methods import METHODS
from tests.security.wire import Wire, frame

TIMEOUT = 30


@pytest.fixture
def tcp_daemon() -> Iterator[Daemon]:
    with checked(Daemon(extra_args=("--tcp", "127.0.0.1:0"))) as running:
        yield running


@pytest.fixture
async def client(tcp_daemon: Daemon) -> AsyncIterator[AsyncDaemon]:
    async with aconnect(tcp_daemon.socket, start=False) as connected:
        yield connected


class World:
    """What exists before the intruders speak, and what each method would do to it."""

    def __init__(self, work: Path, session: str, task: str) -> None:
        self.work = work
        self.session = session
        self.task = task
        self.marker = work / "intruded"

    def params(self, method: str) -> dict[str, Any]:
        s, run = self.session, f"run touch {self.marker}"
        table: dict[str, dict[str, Any]] = {
            "agent/create": {"name": "intruder", "command": ["touch", str(self.marker)]},
            "agent/list": {},
            "agent/get": {"name": "demo"},
            "agent/update": {"name": "demo", "command": ["touch", str(self.marker)], "restart": True},
            "agent/remove": {"name": "spare"},
            "session/open": {"agent": "demo", "root": str(self.work), "count": 3},
            "session/list": {},
            "session/get": {"session": s},
            "session/prompt": {"session": s, "prompt": run},
            "session/cancel": {"session": s},
            "session/close": {"session": s},
            "session/reopen": {"session": s},
            "session/prune": {"closedBefore": "2100-01-01T00:00:00Z"},
            "session/transcript": {"session": s},
            "session/controls": {"session": s},
            "session/setMode": {"session": s, "mode": "plan"},
            "session/rename": {"session": s, "title": "intrude"},
            "session/setConfigOption": {"session": s, "configId": "model", "value": "demo-large"},
            "fleet/summary": {},
            "session/side": {"session": s, "prompt": run},
            "session/tree": {"session": s},
            "session/broadcast": {"prompt": run, "sessions": [s]},
            "task/suggest": {"agent": "demo", "title": "intrude", "prompt": run},
            "task/list": {},
            "task/accept": {"task": self.task},
            "task/dismiss": {"task": self.task, "reason": "intruder"},
            "thread/start": {"parent": s, "prompt": run},
            "thread/status": {"thread": s},
            "thread/wait": {"threads": [s]},
            "merge/request": {"session": s},
            "merge/list": {},
            "run/declare": {"name": "intrusion", "cwd": str(self.work)},
            "run/end": {"outcome": "failed"},
            "run/list": {},
            "run/get": {"run": "r-1"},
            "permission/list": {"session": s},
            "permission/answer": {"permission": "p-1", "optionId": "allow"},
            "events/subscribe": {"snapshot": True},
            "events/unsubscribe": {"subscription": "sub-1"},
            "daemon/status": {},
            "daemon/stop": {},
        }
        return table[method]


async def _state(client: AsyncDaemon) -> dict[str, Any]:
    """Everything an intruder could change, as the daemon's own client sees it."""
    sessions = [s.info for s in await client.sessions(include_closed=True)]
    agents = [await a.aget() for a in await client.agents()]
    chosen = {s.id: (await (await client.session(s.id)).acontrols()).chosen for s in sessions}
    return {
        "sessions": sorted(
            (
                s.id,
                s.status,
                s.status_since,
                s.usage and s.usage.turns,
                chosen[s.id].mode,
                str(chosen[s.id].config),
            )
            for s in sessions
        ),
        "agents": sorted((a.name, tuple(a.command), a.options.turn_timeout) for a in agents),
        "tasks": sorted((t.id, t.status) for t in await client.tasks()),
        "runs": sorted(r.id for r in await client.runs()),
    }


async def _world(client: AsyncDaemon, work: Path) -> World:
    demo = await client.agent("demo")
    await client.agent("spare", command=["true"])
    session = await demo.session(work)
    await session.asend("say ready")  # the agent is up: a prompt that got through would run at once
    task = await client.suggest_task("a task", "say task", from_session=session)
    return World(work, session.id, task.id)


def _session_token(daemon: Daemon, session: str) -> str:
    secret = (daemon.home / "state" / "session-secret").read_bytes()
    return f"{session}.{hmac.new(secret, session.encode(), hashlib.sha256).hexdigest()}"


async def _intruders(daemon: Daemon, world: World) -> dict[str, Wire]:
    host, port = daemon.tcp_address()
    silent = await Wire.tcp(host, port)  # never initializes
    refused = await Wire.tcp(host, port)
    answer = await refused.initialize({"token": "not-the-token"}, TIMEOUT)
    assert answer["error"]["code"] == ErrorCode.UNAUTHORIZED, answer
    bridge = await Wire.unix(str(daemon.socket))
    answer = await bridge.initialize({"sessionToken": _session_token(daemon, world.session)}, TIMEOUT)
    assert "result" in answer, answer
    return {"tcp without initialize": silent, "tcp with a refused token": refused, "session token": bridge}


def test_the_table_covers_every_method(tmp_path: Path) -> None:
    world = World(tmp_path, "s1", "k1")
    for method in METHODS:
        world.params(method)  # a KeyError names the method this test does not yet send


async def test_no_method_runs_when_sent_as_a_notification(
    tcp_daemon: Daemon, client: AsyncDaemon, work: Path
) -> None:
    world = await _world(client, work)
    before = await _state(client)
    intruders = await _intruders(tcp_daemon, world)
    for wire in intruders.values():
        for method in METHODS:
            message = {"jsonrpc": "2.0", "method": method, "params": world.params(method)}
            await wire.send(frame(message))
        # Messages of one connection are taken in order: the probe's answer comes after
        # whatever the notifications could have caused on this connection.
        probe = await wire.request("daemon/status", {}, "probe", TIMEOUT)
        assert [m.get("id") for m in wire.seen] == ["init", "probe"][-len(wire.seen) :], wire.seen
        assert probe.get("id") == "probe"
    # A full turn of the daemon's own client: a prompt that slipped through would have run by now.
    control = await (await client.agent("demo")).session(work)
    assert (await control.asend(f"run touch {work / 'control'}")).stop_reason == "end_turn"
    assert (work / "control").exists()
    assert not world.marker.exists(), "a notification ran a command"
    after = await _state(client)
    after["sessions"] = [s for s in after["sessions"] if s[0] != control.id]
    assert after == before
    assert (await client.status()).pid == tcp_daemon.pid  # daemon/stop did not stop it
    for wire in intruders.values():
        await wire.close()


async def test_requests_are_refused_by_who_sent_them(
    tcp_daemon: Daemon, client: AsyncDaemon, work: Path
) -> None:
    world = await _world(client, work)
    before = await _state(client)
    intruders = await _intruders(tcp_daemon, world)
    for who, wire in intruders.items():
        for n, method in enumerate(sorted(METHODS)):
            if who == "session token" and method in ACTING_FOR_SESSION:
                continue  # what a bridge may call: its own tests cover it
            answer = await wire.request(method, world.params(method), n, TIMEOUT)
            assert "error" in answer, (who, method, answer)
            assert answer["error"]["code"] == ErrorCode.UNAUTHORIZED, (who, method, answer)
    assert not world.marker.exists()
    assert await _state(client) == before
    for wire in intruders.values():
        await wire.close()


async def test_a_unix_connection_must_initialize_before_anything(
    tcp_daemon: Daemon, client: AsyncDaemon
) -> None:
    wire = await Wire.unix(str(tcp_daemon.socket))
    answer = await wire.request("session/list", {}, 1, TIMEOUT)
    assert answer["error"]["code"] == ErrorCode.SERVER_NOT_INITIALIZED
    assert "initialize" in answer["error"]["message"]
    assert "result" in await wire.initialize()
    assert "result" in await wire.request("session/list", {}, 2, TIMEOUT)
    again = await wire.request("initialize", {"capabilities": {}}, 3, TIMEOUT)
    assert again["error"]["code"] == ErrorCode.INVALID_REQUEST
    await wire.close()


async def test_after_shutdown_requests_are_refused_and_exit_closes(
    tcp_daemon: Daemon, client: AsyncDaemon
) -> None:
    wire = await Wire.unix(str(tcp_daemon.socket))
    await wire.initialize()
    assert (await wire.request("shutdown", None, 1, TIMEOUT)).get("result", "absent") is None
    refused = await wire.request("session/list", {}, 2, TIMEOUT)
    assert refused["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert "exit" in refused["error"]["message"]
    await wire.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert await wire.read(TIMEOUT) is None  # closed, with nothing more said
    assert (await client.status()).pid == tcp_daemon.pid  # one client's exit is not the daemon's


async def test_odd_envelopes_get_the_right_answer_and_the_connection_lives(
    tcp_daemon: Daemon, client: AsyncDaemon
) -> None:
    wire = await Wire.unix(str(tcp_daemon.socket))
    await wire.initialize()
    cases: list[tuple[str, Any, ErrorCode]] = [
        ('{"jsonrpc":"2.0","id":1,"method":"no/such"}', 1, ErrorCode.METHOD_NOT_FOUND),
        ('{"jsonrpc":"2.0","id":2,"method":"no/such","params":{}}', 2, ErrorCode.METHOD_NOT_FOUND),
        ('{"jsonrpc":"2.0","id":3,"method":"textDocument/hover","params":{}}', 3, ErrorCode.METHOD_NOT_FOUND),
        ('{"jsonrpc":"2.0","id":4,"method":5}', 4, ErrorCode.INVALID_REQUEST),
        ('{"jsonrpc":"2.0","id":{"a":1},"method":"session/list"}', None, ErrorCode.INVALID_REQUEST),
        ('{"jsonrpc":"1.0","id":6,"method":"session/list"}', 6, ErrorCode.INVALID_REQUEST),
        ('{"id":7,"method":"session/list"}', 7, ErrorCode.INVALID_REQUEST),
        ('{"jsonrpc":"2.0","id":8,"method":"session/list","params":5}', 8, ErrorCode.INVALID_REQUEST),
        ('{"jsonrpc":"2.0","id":9,"method":"session/list","params":[1]}', 9, ErrorCode.INVALID_PARAMS),
        ("[" * 100_000 + "]" * 100_000, None, ErrorCode.PARSE_ERROR),
        (
            '{"jsonrpc":"2.0","id":10,"method":"session/list","params":' + '{"a":' * 5000 + "1" + "}" * 5001,
            None,
            ErrorCode.PARSE_ERROR,
        ),
        ('{"jsonrpc":"2.0","id":' + "9" * 5000 + ',"method":"session/list"}', None, ErrorCode.PARSE_ERROR),
        ("[]", None, ErrorCode.INVALID_REQUEST),
        ("not json", None, ErrorCode.PARSE_ERROR),
        (
            '{"jsonrpc":"2.0","id":11,"method":"session/list","params":{"agent":NaN}}',
            None,
            ErrorCode.PARSE_ERROR,
        ),
    ]
    for body, msg_id, code in cases:
        await wire.send(frame(body))
        answer = await wire.read(TIMEOUT)
        assert answer is not None, f"the connection closed on {body[:60]!r}"
        assert answer.get("id") == msg_id, (body[:60], answer)
        assert answer["error"]["code"] == code, (body[:60], answer)
        assert "Traceback" not in str(answer["error"]), answer
        assert "data" not in answer["error"] or "Traceback" not in str(answer["error"]["data"])
        # ...and the connection still serves.
        assert "result" in await wire.request("daemon/status", {}, "alive", TIMEOUT)
    await wire.close()


async def test_broken_framing_is_answered_then_the_connection_closes(
    tcp_daemon: Daemon, client: AsyncDaemon
) -> None:
    for garbage in (
        b"Content-Length: lots\r\n\r\n{}",
        b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        b"Hello there\r\n\r\n",
        b"X-Nothing: 1\r\n\r\n{}",
    ):
        wire = await Wire.unix(str(tcp_daemon.socket))
        await wire.initialize()
        await wire.send(garbage)
        answer = await wire.read(TIMEOUT)
        assert answer is not None, garbage
        assert answer["error"]["code"] == ErrorCode.PARSE_ERROR, (garbage, answer)
        assert answer["id"] is None
        assert await wire.read(TIMEOUT) is None, "the connection should close after a framing error"
        await wire.close()
    assert (await client.status()).pid == tcp_daemon.pid
