"""What the daemon says to a client in LSP's own terms, through pygls: a turn's work-done
progress (`window/workDoneProgress/create`, then `$/progress`) and requests to the client (a
permission asked), with the client's answers to them.

This is the only module of the daemon that knows pygls and lsprotocol. Answering a client's
requests needs neither (`server.py` runs the daemon's methods itself, behind the door), and
importing them is most of a cold start (lsprotocol's types alone, ~0.25-0.6 s): so this module is
imported on a thread when the first client that takes progress or answers permissions initializes
(`DaemonServer.load_lsp`), never by a daemon that only scripts and the command line talk to, and a
connection builds its pygls server (`ClientLsp`) the first time it reports progress or asks
something.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

import cattrs
from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, default_converter
from pygls.protocol.json_rpc import JsonRPCResponseMessage

from sessiond.daemon import handshake
from sessiond.daemon.door import Link

Listener = Callable[[str, dict[str, Any]], None]


class ClientLsp:
    """One connection's pygls server: progress it is sent, requests it is asked and its answers."""

    def __init__(self, link: Link, version: str) -> None:
        server = LanguageServer(
            handshake.SERVER_NAME, version, protocol_cls=_Protocol, converter_factory=_converter
        )
        self._protocol: _Protocol = server.protocol  # type: ignore[assignment]
        self._protocol.set_writer(_Writer(link))

    async def create_progress(self, token: Any) -> None:
        """`window/workDoneProgress/create`: the client's answer awaited."""
        await self._protocol.progress.create_async(token)

    def progress(self, token: Any, title: str) -> Listener:
        """What reports a turn as work-done progress under `token` (a turn's listener)."""
        return _ProgressReporter(self._protocol, token, title)

    def request(self, method: str, params: Any, msg_id: str) -> asyncio.Future[Any]:
        """Send a request; its future is the client's answer (a JSON value) or its error."""
        return self._protocol.send_request_async(method, params, msg_id=msg_id)

    def take_response(self, raw: dict[str, Any]) -> None:
        """A response of the client's, to one of the requests above."""
        protocol = self._protocol
        protocol.handle_message(protocol.structure_message(raw))


class _ProgressReporter:
    """Reports a turn through LSP work-done progress."""

    def __init__(self, protocol: LanguageServerProtocol, token: Any, title: str) -> None:
        self.protocol = protocol
        self.token = token
        self.title = title
        self.began = False

    def __call__(self, what: str, data: dict[str, Any]) -> None:
        progress = self.protocol.progress
        if what == "started":
            self.began = True
            progress.begin(
                self.token, lsp.WorkDoneProgressBegin(title=self.title, cancellable=True, message="working")
            )
        elif what == "chunk" and self.began:
            text = data.get("text", "").strip().splitlines()
            if text:
                progress.report(self.token, lsp.WorkDoneProgressReport(message=text[-1][:120]))
        elif what == "ended":
            if not self.began:
                progress.begin(self.token, lsp.WorkDoneProgressBegin(title=self.title))
            message = data.get("error") or data.get("stopReason") or "ended"
            progress.end(self.token, lsp.WorkDoneProgressEnd(message=str(message)))
            # pygls keeps a future per token begun, for a cancel from the client: the turn is over.
            progress.tokens.pop(self.token, None)


class _Writer:
    """What pygls writes (progress, requests to the client): held to the same rule as the
    daemon's own writes, nothing after `exit` or once the socket is closing."""

    def __init__(self, link: Link) -> None:
        self._link = link

    def write(self, data: bytes) -> None:
        writer = self._link.writer
        if self._link.writable and not writer.is_closing():
            writer.write(data)

    def close(self) -> None:
        self._link.writer.close()


class _Protocol(LanguageServerProtocol):
    # pygls caches these two with functools.lru_cache on the method, a cache shared by every
    # protocol and keyed by it: it kept the last 128 connections' servers alive after they closed.
    def get_message_type(self, method: str) -> Any:  # type: ignore[override]  # (a plain method)
        return lsp.METHOD_TO_TYPES.get(method, (None,))[0]

    def get_result_type(self, method: str) -> Any:  # type: ignore[override]
        return lsp.METHOD_TO_TYPES.get(method, (None, None))[1]

    def structure_message(self, data: dict[str, Any]) -> Any:
        # Only responses come here. An answer to a request of the daemon's own (not LSP's) is
        # kept as plain JSON for pydantic to read; pygls would turn it into namedtuples.
        if "result" in data and self._result_types.get(data["id"]) is None:
            self._result_types.pop(data["id"], None)
            return JsonRPCResponseMessage(id=data["id"], jsonrpc="2.0", result=data["result"])
        return super().structure_message(data)

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        # An answer to a request the daemon gave up on (a permission settled elsewhere) is no
        # error of the client's: pygls would raise InvalidStateError and drop the connection.
        future = self._request_futures.get(msg_id)
        if future is None or future.done():
            self._request_futures.pop(msg_id, None)
            return
        super()._handle_response(msg_id, result, error)


@functools.cache
def _converter() -> cattrs.Converter:
    """pygls's converter, made once for every connection (lsprotocol registers a hook per type
    on it: made per connection, that was ~14 ms and ~120 KiB each, and nothing changes it after)."""
    return default_converter()
