"""A stand-in of the Anthropic Messages API on loopback, scripted per test.

Real agents (claude-agent-acp and the Claude Code it drives) honour
`ANTHROPIC_BASE_URL`; pointed here they do whole turns offline. Each request
of the agent's main loop (one that offers tools) takes the next scripted
`Reply` off the queue, streamed as server-sent events exactly as the real API
does (`message_start`, `content_block_start`/`delta`/`stop`, `message_delta`
with usage, `message_stop`). A reply that ends in a `tool_use` makes the agent
run the tool and send its `tool_result` in the next request, which takes the
next reply. With the queue empty the answer is `Reply.default` (text).

Requests that offer no tools (titles, summaries, quota checks the CLI makes on
its own) are answered with a short text and take nothing off the queue.
Everything received is recorded (`requests`) for tests to assert on.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.standins.http_server import StandInServer

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_standin{next(_ids):06d}"


@dataclass(frozen=True)
class Text:
    text: str
    chunks: int = 3  # streamed in this many text_delta events


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: _id("toolu"))


@dataclass(frozen=True)
class Reply:
    """One model reply: its content blocks, how it streams, what usage it reports."""

    blocks: tuple[Text | ToolUse, ...]
    cache_fields: bool = True  # False: usage without cache_*_input_tokens, as some proxies send
    delay: float = 0.0  # seconds between events (a slow stream, to cancel mid-way)
    input_tokens: int = 120
    output_tokens: int = 30

    @staticmethod
    def text(text: str, **kwargs: Any) -> Reply:
        return Reply((Text(text),), **kwargs)

    @staticmethod
    def tool(name: str, input: dict[str, Any], *, say: str | None = None, **kwargs: Any) -> Reply:
        blocks: tuple[Text | ToolUse, ...] = (ToolUse(name, input),)
        if say:
            blocks = (Text(say, chunks=1), *blocks)
        return Reply(blocks, **kwargs)

    @staticmethod
    def write(path: str, content: str, **kwargs: Any) -> Reply:
        return Reply.tool("Write", {"file_path": path, "content": content}, **kwargs)

    @staticmethod
    def edit(path: str, old: str, new: str, **kwargs: Any) -> Reply:
        return Reply.tool("Edit", {"file_path": path, "old_string": old, "new_string": new}, **kwargs)

    @staticmethod
    def bash(command: str, **kwargs: Any) -> Reply:
        return Reply.tool("Bash", {"command": command, "description": "run a command"}, **kwargs)

    @staticmethod
    def todos(*items: tuple[str, str], **kwargs: Any) -> Reply:
        """TodoWrite with (content, status) pairs: the agent's plan."""
        todos = [{"content": c, "status": st, "activeForm": c} for c, st in items]
        return Reply.tool("TodoWrite", {"todos": todos}, **kwargs)

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"

    def usage(self, *, output: int) -> dict[str, Any]:
        usage: dict[str, Any] = {"input_tokens": self.input_tokens, "output_tokens": output}
        if self.cache_fields:
            usage["cache_creation_input_tokens"] = 0
            usage["cache_read_input_tokens"] = 0
        return usage


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    main: bool  # of the agent's main loop (offers tools): took a scripted reply
    reply: Reply | None = None
    aborted: bool = False  # the agent hung up before the stream's end

    def texts(self) -> list[str]:
        """Every text the request carries (messages, tool results), in order."""
        out: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list):
                for item in value:
                    walk(item)
            elif isinstance(value, dict):
                for key in ("text", "content"):
                    if key in value:
                        walk(value[key])

        for message in (self.body or {}).get("messages", []):
            walk(message.get("content"))
        return out

    def tool_results(self) -> list[dict[str, Any]]:
        return [
            block
            for message in (self.body or {}).get("messages", [])
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]


class AnthropicStandIn:
    """Serves on 127.0.0.1; `base_url` for ANTHROPIC_BASE_URL, `push` to script replies."""

    def __init__(self, default: str = "done") -> None:
        self.default = default
        self.script: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.streaming = threading.Event()  # set while a main reply is being streamed
        self.failing: int | None = None  # every POST answers this HTTP error (fail_with)
        self._server = StandInServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def env(self) -> dict[str, str]:
        """What an agent of the Claude family needs to talk here and nowhere else."""
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-standin",
            "IS_SANDBOX": "1",  # Claude Code refuses to run as root without it
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
        }

    def opencode_env(
        self, home: Path, *, permission: dict[str, str] | None = None, base_url: str | None = None
    ) -> dict[str, str]:
        """What opencode (`opencode acp`) needs to talk here and nowhere else: a provider "standin"
        using the AI SDK's Anthropic client, made the default; `home` holds its config and database.
        `permission` is its config's (by tool: "allow", "ask" or "deny"); `base_url` points it
        elsewhere than this stand-in (an address nothing answers, say)."""
        config: dict[str, object] = {
            "$schema": "https://opencode.ai/config.json",
            "model": "standin/claude-standin",
            "small_model": "standin/claude-standin",
            "autoupdate": False,
            "share": "disabled",
            "provider": {
                "standin": {
                    "npm": "@ai-sdk/anthropic",
                    "name": "Stand-in",
                    "options": {"baseURL": f"{base_url or self.base_url}/v1", "apiKey": "sk-ant-standin"},
                    "models": {
                        "claude-standin": {
                            "name": "Claude stand-in",
                            "tool_call": True,
                            "limit": {"context": 200000, "output": 8192},
                            "cost": {"input": 3, "output": 15},
                        }
                    },
                }
            },
        }
        if permission is not None:
            config["permission"] = permission
        return {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_SHARE": "1",
        }

    def start(self) -> AnthropicStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def push(self, *replies: Reply | str) -> None:
        with self.lock:
            self.script.extend(Reply.text(r) if isinstance(r, str) else r for r in replies)

    def fail_with(self, status: int | None) -> None:
        """Answer every POST with this HTTP error (401, 500, ...) until given None."""
        with self.lock:
            self.failing = status

    def main_requests(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.main]

    def wait_idle(self, timeout: float = 10) -> bool:
        """True once the script is used up and nothing streams."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.script and not self.streaming.is_set():
                    return True
            time.sleep(0.05)
        return False

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
                self.send_header("request-id", _id("req"))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._record(None, False)
                if self.path.split("?")[0].rstrip("/") == "/v1/models":
                    self._json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})
                else:
                    self._json(404, _error("not_found_error", f"the stand-in has no {self.path}"))

            def do_HEAD(self) -> None:
                self._record(None, False)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                path = self.path.split("?")[0]
                with standin.lock:
                    failing = standin.failing
                if failing is not None:
                    self._record(body, False)
                    kinds = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
                    kind = kinds.get(failing, "api_error" if failing >= 500 else "invalid_request_error")
                    self._json(failing, _error(kind, f"the stand-in answers {failing}"))
                    return
                if path == "/v1/messages/count_tokens":
                    self._record(body, False)
                    self._json(200, {"input_tokens": 100})
                    return
                if path != "/v1/messages":
                    self._record(body, False)
                    self._json(404, _error("not_found_error", f"the stand-in has no {self.path}"))
                    return
                main, reply = standin._take(body)
                request = self._record(body, main)
                request.reply = reply
                model = str((body or {}).get("model", "claude-standin"))
                if body and body.get("stream"):
                    request.aborted = not self._stream(reply, model, main)
                else:
                    self._json(200, _message(reply, model))

            def _stream(self, reply: Reply, model: str, main: bool) -> bool:
                """Stream the reply as SSE; False if the agent hung up before its end."""
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("request-id", _id("req"))
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                if main:
                    standin.streaming.set()
                try:
                    for name, data in _events(reply, model):
                        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                        if reply.delay:
                            time.sleep(reply.delay)
                except (BrokenPipeError, ConnectionResetError):
                    return False  # the agent hung up: a cancelled turn
                finally:
                    if main:
                        standin.streaming.clear()
                return True

        return Handler


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _pieces(text: str, count: int) -> list[str]:
    count = max(1, min(count, len(text) or 1))
    size = -(-len(text) // count) or 1
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _events(reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    message = {
        "id": _id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": reply.usage(output=1),
    }
    yield "message_start", {"type": "message_start", "message": message}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(reply.blocks):
        if isinstance(block, Text):
            start = {"type": "text", "text": ""}
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
            for piece in _pieces(block.text, block.chunks):
                delta = {"type": "text_delta", "text": piece}
                yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        else:
            start = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
            encoded = json.dumps(block.input)
            for piece in _pieces(encoded, 2):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
            "usage": reply.usage(output=reply.output_tokens),
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _message(reply: Reply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in reply.blocks:
        if isinstance(block, Text):
            content.append({"type": "text", "text": block.text})
        else:
            content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
    return {
        "id": _id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": reply.usage(output=reply.output_tokens),
    }


@contextlib.contextmanager
def serving(default: str = "done") -> Iterator[AnthropicStandIn]:
    standin = AnthropicStandIn(default).start()
    try:
        yield standin
    finally:
        standin.stop()
