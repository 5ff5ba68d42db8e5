"""The door answers `initialize` before the daemon is built, and holds the rest until it is.

`handshake.py` makes the answer without pygls: it must be what the daemon's own pygls server
(a connection's `ClientLsp`, built as the daemon builds it) would have answered, for whatever
capabilities a client offers. Its options are read there only when
they are the plain ones, and then exactly as the model reads them. The door is driven here
in-process over a real unix socket, with a stand-in for the server behind it.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types as lsp

from sessiond.client.connection import encode_message, read_message
from sessiond.daemon import handshake, wire
from sessiond.daemon.door import BURST, Door, Link
from sessiond.daemon.lsp_outbound import ClientLsp
from sessiond.daemon.wire import Limits
from sessiond.protocol import names
from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.methods import METHODS
from sessiond.protocol.models import ClientOptions

NVIM_LIKE = {
    "general": {"positionEncodings": ["utf-8", "utf-16", "utf-32"]},
    "textDocument": {"synchronization": {"willSave": True, "willSaveWaitUntil": True, "didSave": True}},
    "window": {"workDoneProgress": True},
    "workspace": {"fileOperations": {"willCreate": True, "didRename": True}, "workspaceFolders": True},
    "notebookDocument": {"synchronization": {"dynamicRegistration": False}},
}
CAPABILITIES = [
    {},
    NVIM_LIKE,
    {"window": {"workDoneProgress": False}},
    {"general": {"positionEncodings": ["utf-32", "utf-8"]}},
    {"general": {"positionEncodings": ["latin-1"]}},
    {"textDocument": {"synchronization": {"willSave": False}}},
]


def _pygls_answer(capabilities: dict[str, Any]) -> dict[str, Any]:
    """What the daemon's pygls server answers to `initialize` (pygls's own handling of it)."""
    link: Any = SimpleNamespace(writer=None, writable=False)
    protocol = ClientLsp(link, "1.2.3")._protocol
    params = protocol._converter.structure(
        {"processId": None, "capabilities": capabilities}, lsp.InitializeParams
    )
    steps = protocol.lsp_initialize(params)
    with pytest.raises(StopIteration) as done:
        next(steps)
    return protocol._converter.unstructure(done.value.value)  # type: ignore[no-any-return]


@pytest.mark.parametrize("capabilities", CAPABILITIES)
def test_the_answer_is_what_the_daemons_pygls_server_advertises(capabilities: dict[str, Any]) -> None:
    ours = handshake.result({"capabilities": capabilities}, "1.2.3")
    theirs = _pygls_answer(capabilities)
    experimental = ours["capabilities"].pop("experimental")
    assert ours == theirs
    assert experimental == {"sessiond": {"methods": sorted(METHODS), "notifications": [names.EVENTS_NOTIFY]}}


def test_every_method_of_the_table_is_named_and_every_name_has_its_models() -> None:
    assert set(METHODS) == names.REQUESTS


@pytest.mark.parametrize(
    ("params", "sentence"),
    [
        (None, "initialize takes an object of params, with the client's `capabilities` ({} will do)"),
        ({}, "initialize: capabilities: must be an object (the client's capabilities; {} will do)"),
        (
            {"capabilities": []},
            "initialize: capabilities: must be an object (the client's capabilities; {} will do)",
        ),
        ({"capabilities": {"general": 5}}, "initialize: capabilities.general: must be an object"),
        (
            {"capabilities": {"general": {"positionEncodings": ["utf-8", 8]}}},
            "initialize: capabilities.general.positionEncodings: must be a list of strings",
        ),
        (
            {"capabilities": {"window": {"workDoneProgress": "yes"}}},
            "initialize: capabilities.window.workDoneProgress: must be true or false",
        ),
    ],
)
def test_params_the_daemon_cannot_read_are_named(params: Any, sentence: str) -> None:
    assert handshake.problem(params) == sentence


def test_params_it_does_not_read_are_left_to_the_client() -> None:
    assert handshake.problem({"capabilities": {"experimental": 5}, "processId": "x"}) is None


OPTION_KEYS = [
    "clientName",
    "answersPermissions",
    "client_name",
    "answers_permissions",
    "token",
    "sessionToken",
    "x",
]
OPTION_VALUES = st.one_of(
    st.none(), st.booleans(), st.text(max_size=5), st.integers(-2, 2), st.lists(st.none())
)


@given(options=st.dictionaries(st.sampled_from(OPTION_KEYS), OPTION_VALUES, max_size=4))
def test_plain_options_are_read_as_the_model_reads_them(options: dict[str, Any]) -> None:
    plain = handshake.plain_options(options)
    if plain is None:
        return  # the server reads them with the model
    read = ClientOptions.model_validate(options)
    assert (read.answers_permissions, read.token, read.session_token) == (plain, None, None)


def test_what_the_clients_send_is_plain() -> None:
    assert handshake.plain_options({}) is False
    assert handshake.plain_options(None) is False  # no options at all
    assert handshake.plain_options({"clientName": "nvim", "answersPermissions": True}) is True
    assert handshake.plain_options({"clientName": "vscode", "answersPermissions": False}) is False
    assert handshake.plain_options({"sessionToken": "s1.abc"}) is None


# ---------------------------------------------------------------- the door, in-process


class Behind:
    """A stand-in for the server: records what reaches it, answers each request `{}`."""

    def __init__(self, work: float = 0.0, slow: str | None = None) -> None:
        self.dispatched: list[str] = []
        self.order: list[str] = []  # the connection of each message dispatched, in turn
        self.options: list[Any] = []
        self.work = work  # seconds of CPU each request's handler takes, a turn of the loop later
        self.slow = slow  # a method answered by a task that waits for `release`
        self.slow_taken = asyncio.Event()
        self.release = asyncio.Event()

    def read_options(self, link: Link, options: Any) -> bool:
        self.options.append(options)
        if options.get("sessionToken") == "wrong":
            raise RpcError(ErrorCode.UNAUTHORIZED, "this session token belongs to no session of this daemon")
        return False

    def attach(self, link: Link) -> Served:
        return Served(self, link)


class Served:
    def __init__(self, behind: Behind, link: Link) -> None:
        self.behind, self.link = behind, link
        self.tasks: list[asyncio.Task[None]] = []

    def dispatch(self, message: wire.Message) -> None:
        self.behind.dispatched.append(message.method)
        self.behind.order.append(self.link.id)
        if message.id is None:
            return
        if message.method == self.behind.slow:
            self.tasks.append(asyncio.create_task(self._answer_later(message.id)))
            self.behind.slow_taken.set()
            return
        if self.behind.work:  # as a handler's task, a turn of the loop later
            asyncio.get_running_loop().call_soon(self._answer, message.id)
        else:
            self._answer(message.id)

    def _answer(self, msg_id: Any) -> None:
        until = time.perf_counter() + self.behind.work
        while time.perf_counter() < until:  # a handler's own work, as a large page's
            pass
        self.link.send_raw({"jsonrpc": "2.0", "id": msg_id, "result": {}})

    async def _answer_later(self, msg_id: Any) -> None:
        await self.behind.release.wait()
        for _ in range(3):  # a few turns of the loop, as a prompt's answer waits for its events' commit
            await asyncio.sleep(0)
        self._answer(msg_id)

    def answering(self) -> list[asyncio.Task[None]]:
        return [task for task in self.tasks if not task.done()]

    def closed(self) -> None:
        pass


def _request(msg_id: int, method: str, params: Any) -> bytes:
    return encode_message({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


async def _door(tmp_path: Path) -> tuple[Door, Path]:
    door = Door("9.9", Limits())
    path = tmp_path / "door.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen()
    await door.listen_unix(sock)
    return door, path


async def test_initialize_is_answered_before_the_daemon_is_built_and_the_rest_waits_in_order(
    tmp_path: Path,
) -> None:
    door, path = await _door(tmp_path)
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(
            _request(1, "initialize", {"capabilities": {}, "initializationOptions": {"clientName": "t"}})
        )
        hello = await asyncio.wait_for(read_message(reader), 30)
        assert hello is not None
        assert hello["result"]["serverInfo"] == {"name": "sessiond", "version": "9.9"}
        writer.write(_request(2, names.DAEMON_STATUS, {}) + _request(3, names.SESSION_LIST, {}))
        writer.write(_request(4, "initialize", {"capabilities": {}}))  # refused by the gate, in turn
        await writer.drain()
        behind = Behind()
        door.open(behind)
        answers = [await asyncio.wait_for(read_message(reader), 30) for _ in range(3)]
        assert [a["id"] for a in answers if a is not None] == [2, 3, 4]
        assert behind.dispatched == [names.DAEMON_STATUS, names.SESSION_LIST]
        assert answers[2] is not None
        assert (
            answers[2]["error"]["message"] == "this connection is initialized already: send `initialize` once"
        )
        assert behind.options == []  # plain options were read at the door
        writer.close()
    finally:
        await door.stop_accepting()


async def test_the_gate_answers_at_once_and_other_options_wait_for_the_model(tmp_path: Path) -> None:
    door, path = await _door(tmp_path)
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(_request(1, names.SESSION_LIST, {}))
        refused = await asyncio.wait_for(read_message(reader), 30)
        assert refused is not None
        assert refused["error"]["code"] == ErrorCode.SERVER_NOT_INITIALIZED
        writer.write(
            _request(
                2, "initialize", {"capabilities": {}, "initializationOptions": {"sessionToken": "wrong"}}
            )
        )
        await writer.drain()
        behind = Behind()
        door.open(behind)
        answer = await asyncio.wait_for(read_message(reader), 30)
        assert answer is not None
        assert answer["error"] == {
            "code": ErrorCode.UNAUTHORIZED,
            "message": "this session token belongs to no session of this daemon",
        }
        assert behind.options == [{"sessionToken": "wrong"}]
        writer.close()
    finally:
        await door.stop_accepting()


async def test_a_stop_sends_the_answers_being_made_before_closing(tmp_path: Path) -> None:
    """At a stop (turns cancelled), a request still being answered, as a cancelled prompt's answer
    waiting for its events to be stored, is answered before the connection closes."""
    door, path = await _door(tmp_path)
    behind = Behind(slow=names.SESSION_PROMPT)
    door.open(behind)
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(
        _request(1, "initialize", {"capabilities": {}, "initializationOptions": {"clientName": "t"}})
    )
    assert await asyncio.wait_for(read_message(reader), 30) is not None
    writer.write(_request(2, names.SESSION_PROMPT, {"session": "s1", "prompt": "hang"}))
    await writer.drain()
    await asyncio.wait_for(behind.slow_taken.wait(), 30)
    behind.release.set()  # the turn was cancelled: its answer is on its way
    await door.stop_accepting()
    answer = await asyncio.wait_for(read_message(reader), 30)
    assert answer is not None
    assert answer["id"] == 2, answer
    assert await asyncio.wait_for(read_message(reader), 30) is None  # then the connection closed
    writer.close()


async def _bursts(tmp_path: Path, behind: Behind, count: int) -> list[int]:
    """Two clients' bursts of `count` requests, each in its socket when the daemon is built:
    the lengths of the runs of one client's messages dispatched in a row while the other's were
    still to come."""
    door, path = await _door(tmp_path)
    try:
        clients = [await asyncio.open_unix_connection(str(path)) for _ in range(2)]
        for reader, writer in clients:
            writer.write(_request(0, "initialize", {"capabilities": {}}))
            assert await asyncio.wait_for(read_message(reader), 30) is not None
            writer.write(b"".join(_request(n, names.FLEET_SUMMARY, {}) for n in range(1, count + 1)))
            await writer.drain()
        door.open(behind)
        for reader, _ in clients:
            for _ in range(count):
                assert await asyncio.wait_for(read_message(reader), 30) is not None
        for _, writer in clients:
            writer.close()
    finally:
        await door.stop_accepting()
    runs = [len(list(run)) for _, run in itertools.groupby(behind.order)]
    assert sum(runs) == 2 * count
    # The last run is what one client had left once the other's burst was done: nobody waited on
    # it, and it is as long as that client happened to be behind (a read that waited for the
    # rest of a burst lets the other go ahead).
    return runs[:-1]


async def test_a_clients_burst_does_not_hold_up_another_client(tmp_path: Path) -> None:
    """The door takes a few of one client's messages (at most door.BURST), then lets the other
    run, and so on; not one client's whole burst first. What one takes at a time goes on in one
    turn of the loop, and so reaches an agent in one write."""
    runs = await _bursts(tmp_path, Behind(), 200)
    assert max(runs) <= 2 * BURST < 200, runs


async def test_a_burst_of_heavy_requests_is_taken_a_few_at_a_time(tmp_path: Path) -> None:
    """Requests whose handlers take 2 ms each: a burst would hold the other client up for tens
    of ms, so the door takes fewer at a time (a handful, where light ones go BURST at once)."""
    runs = await _bursts(tmp_path, Behind(work=0.002), 100)
    assert statistics.median(runs) <= BURST / 4, runs
