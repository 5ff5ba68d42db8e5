"""A stand-in of the Gemini API (generativelanguage `v1beta`) on loopback, scripted per test.

gemini-cli honours `GOOGLE_GEMINI_BASE_URL` (any URL on localhost may be plain
http); with it set the CLI picks its "gateway" auth and sends the key of
`GEMINI_API_KEY` as `x-goog-api-key`. Each step of a turn is one
`POST /v1beta/models/<model>:streamGenerateContent?alt=sse` offering the
CLI's tools: it takes the next scripted `Reply` off the queue, streamed as
server-sent events of `GenerateContentResponse` (text in pieces, a
`functionCall` part, then `finishReason` and `usageMetadata`). A reply with a
function call makes the CLI run the tool and send a `functionResponse` in the
next request, which takes the next reply. With the queue empty the answer is
`Reply.default` (text).

Requests that offer no tools (the model router's classifier, the
next-speaker check, summaries) are the CLI's own: non-streamed
`:generateContent` with a JSON schema; they get a JSON object made from that
schema and take nothing off the queue. Everything received is recorded.

`fail_with(status)` makes every request answer that HTTP error instead, to
test how an agent fails when its model API refuses or breaks.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.standins.http_server import StandInServer

_ids = itertools.count(1)

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    429: "RESOURCE_EXHAUSTED",
}


def _id(prefix: str) -> str:
    return f"{prefix}-standin{next(_ids):06d}"


@dataclass(frozen=True)
class Text:
    text: str
    chunks: int = 3  # streamed in this many events


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """One model reply: its parts, how it streams, the usage it reports."""

    parts: tuple[Text | Call, ...]
    delay: float = 0.0  # seconds between events (a slow stream, to cancel mid-way)
    prompt_tokens: int = 120
    output_tokens: int = 30

    @staticmethod
    def text(text: str, **kwargs: Any) -> Reply:
        return Reply((Text(text),), **kwargs)

    @staticmethod
    def call(name: str, args: dict[str, Any], *, say: str | None = None, **kwargs: Any) -> Reply:
        parts: tuple[Text | Call, ...] = (Call(name, args),)
        if say:
            parts = (Text(say, chunks=1), *parts)
        return Reply(parts, **kwargs)

    @staticmethod
    def write(path: str, content: str, **kwargs: Any) -> Reply:
        return Reply.call("write_file", {"file_path": path, "content": content}, **kwargs)

    @staticmethod
    def edit(path: str, old: str, new: str, **kwargs: Any) -> Reply:
        args = {"file_path": path, "old_string": old, "new_string": new, "instruction": "edit the file"}
        return Reply.call("replace", args, **kwargs)

    @staticmethod
    def shell(command: str, **kwargs: Any) -> Reply:
        return Reply.call("run_shell_command", {"command": command, "description": "run a command"}, **kwargs)

    @staticmethod
    def todos(*items: tuple[str, str], **kwargs: Any) -> Reply:
        """write_todos with (description, status) pairs: the agent's plan."""
        todos = [{"description": d, "status": st} for d, st in items]
        return Reply.call("write_todos", {"todos": todos}, **kwargs)

    def usage(self) -> dict[str, int]:
        return {
            "promptTokenCount": self.prompt_tokens,
            "candidatesTokenCount": self.output_tokens,
            "totalTokenCount": self.prompt_tokens + self.output_tokens,
        }


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    main: bool  # of the agent's main loop (offers tools): took a scripted reply
    reply: Reply | None = None
    aborted: bool = False  # the agent hung up before the stream's end

    @property
    def model(self) -> str:
        tail = self.path.split("?")[0].rsplit("/models/", 1)[-1]
        return tail.split(":")[0]

    def texts(self) -> list[str]:
        """Every text the request's contents carry, in order."""
        return [
            part["text"]
            for content in (self.body or {}).get("contents", [])
            for part in content.get("parts", [])
            if isinstance(part.get("text"), str)
        ]

    def function_responses(self) -> list[dict[str, Any]]:
        return [
            part["functionResponse"]
            for content in (self.body or {}).get("contents", [])
            for part in content.get("parts", [])
            if "functionResponse" in part
        ]


class GeminiStandIn:
    """Serves on 127.0.0.1; `env()` for gemini-cli, `push` to script replies."""

    def __init__(self, default: str = "done") -> None:
        self.default = default
        self.script: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.failing: int | None = None
        self.lock = threading.Lock()
        self.streaming = threading.Event()
        self._server = StandInServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def env(self, home: str) -> dict[str, str]:
        """What gemini-cli needs to talk here and nowhere else; `home` holds its ~/.gemini and its
        temporary files (the error reports it writes when a model call fails go to os.tmpdir())."""
        tmp = Path(home) / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return {
            "GOOGLE_GEMINI_BASE_URL": self.base_url,
            "GEMINI_API_KEY": "standin-key",
            "GEMINI_MODEL": "gemini-2.5-flash",  # a fixed model: no router classifier call
            "HOME": home,  # settings, trusted folders, chats: ~/.gemini
            "TMPDIR": str(tmp),
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_TELEMETRY_ENABLED": "false",
            "NO_BROWSER": "true",
        }

    def start(self) -> GeminiStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.script.clear()
            self.requests.clear()
            self.failing = None

    def push(self, *replies: Reply | str) -> None:
        with self.lock:
            self.script.extend(Reply.text(r) if isinstance(r, str) else r for r in replies)

    def fail_with(self, status: int | None) -> None:
        with self.lock:
            self.failing = status

    def main_requests(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.main]

    # ------------------------------------------------------------ serving

    def _take(self, body: dict[str, Any] | None) -> tuple[bool, Reply]:
        main = bool(body and body.get("tools"))
        with self.lock:
            if main and self.script:
                return True, self.script.popleft()
        return main, Reply((Text(self.default if main else "ok", chunks=1),))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _record(self, body: dict[str, Any] | None, main: bool) -> Request:
                request = Request(self.command, self.path, dict(self.headers.items()), body, main)
                with standin.lock:
                    standin.requests.append(request)
                return request

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str) -> None:
                kind = _STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
                self._json(status, {"error": {"code": status, "message": message, "status": kind}})

            def do_GET(self) -> None:
                self._record(None, False)
                self._error(404, f"the stand-in has no {self.path}")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                path = self.path.split("?")[0]
                action = path.rsplit(":", 1)[-1] if ":" in path else ""
                with standin.lock:
                    failing = standin.failing
                if failing is not None:
                    self._record(body, False)
                    self._error(failing, f"the stand-in answers {failing}")
                    return
                if action == "countTokens":
                    self._record(body, False)
                    self._json(200, {"totalTokens": 100})
                    return
                if action not in ("generateContent", "streamGenerateContent"):
                    self._record(body, False)
                    self._error(404, f"the stand-in has no {self.path}")
                    return
                main, reply = standin._take(body)
                request = self._record(body, main)
                if not main:
                    schema = _schema(body)
                    reply = Reply((Text(json.dumps(_fill(schema)) if schema else "ok", chunks=1),))
                request.reply = reply
                if action == "streamGenerateContent":
                    request.aborted = not self._stream(reply, request.model, main)
                else:
                    self._json(200, _response(reply, request.model, list(reply.parts), last=True))

            def _stream(self, reply: Reply, model: str, main: bool) -> bool:
                """Stream the reply as SSE; False if the agent hung up before its end."""
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                if main:
                    standin.streaming.set()
                pieces: list[list[Text | Call]] = []
                for part in reply.parts:
                    if isinstance(part, Text):
                        pieces.extend([Text(p)] for p in _pieces(part.text, part.chunks))
                    else:
                        pieces.append([part])
                try:
                    for index, parts in enumerate(pieces):
                        data = _response(reply, model, parts, last=index == len(pieces) - 1)
                        self.wfile.write(f"data: {json.dumps(data)}\r\n\r\n".encode())
                        self.wfile.flush()
                        if reply.delay:
                            time.sleep(reply.delay)
                except (BrokenPipeError, ConnectionResetError):
                    return False
                finally:
                    if main:
                        standin.streaming.clear()
                return True

        return Handler


def _schema(body: dict[str, Any] | None) -> dict[str, Any] | None:
    config = (body or {}).get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    return schema if isinstance(schema, dict) else None


def _fill(schema: dict[str, Any]) -> Any:
    """A small value that fits a JSON schema: the CLI's own checks parse these."""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _fill(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "ok"


def _pieces(text: str, count: int) -> list[str]:
    count = max(1, min(count, len(text) or 1))
    size = -(-len(text) // count) or 1
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _response(reply: Reply, model: str, parts: list[Text | Call], *, last: bool) -> dict[str, Any]:
    wire = [
        {"text": p.text} if isinstance(p, Text) else {"functionCall": {"name": p.name, "args": p.args}}
        for p in parts
    ]
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": wire}, "index": 0}
    response: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": _id("resp")}
    if last:
        candidate["finishReason"] = "STOP"
        response["usageMetadata"] = reply.usage()
    return response


@contextlib.contextmanager
def serving(default: str = "done") -> Iterator[GeminiStandIn]:
    standin = GeminiStandIn(default).start()
    try:
        yield standin
    finally:
        standin.stop()
