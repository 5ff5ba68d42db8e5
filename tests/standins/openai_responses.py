"""A stand-in of the OpenAI Responses API on loopback, scripted per test: text, and tool calls.

Codex (codex-acp) is pointed here through a `config.toml` in its CODEX_HOME
(`codex_home()` writes one: a model provider whose base_url is this server,
wire_api "responses", the key from OPENAI_API_KEY). Each `POST /v1/responses`
takes the next scripted reply off the queue (`default` when it is empty) and
streams it as server-sent events the way the real API does
(`response.created`, `response.output_item.added`, `response.output_text.delta`,
..., `response.output_item.done`, `response.completed` with usage). A reply is
text, or a tool call (`Call`): a function call (`exec_command`, `update_plan`)
or a freeform one (`apply_patch`), which Codex carries out and answers in the
next request's input (`function_call_output`, `custom_tool_call_output`), or
several of them in one response (`Many`: words, then a call).
Everything received is recorded (`requests`).

`fail_with(status)` makes every `POST /v1/responses` answer that HTTP error
(the API's JSON error body) instead, to test how an agent fails when its model
API refuses or breaks.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.standins.http_server import StandInServer

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_standin{next(_ids):06d}"


@dataclass(frozen=True)
class Call:
    """A tool call as the model makes one: a function's JSON arguments, or a freeform tool's input."""

    name: str
    arguments: dict[str, Any] | None = None
    freeform: str | None = None

    @classmethod
    def command(cls, cmd: str) -> Call:
        return cls("exec_command", {"cmd": cmd})

    @classmethod
    def plan(cls, *steps: tuple[str, str]) -> Call:
        return cls("update_plan", {"plan": [{"step": step, "status": status} for step, status in steps]})

    @classmethod
    def add_file(cls, path: str, text: str) -> Call:
        lines = "".join(f"+{line}\n" for line in text.splitlines())
        return cls("apply_patch", freeform=f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n")


@dataclass(frozen=True)
class Slow:
    """Text streamed in `chunks` pieces, `delay` seconds apart (a long answer to leave or kill)."""

    text: str
    chunks: int = 100
    delay: float = 0.05


@dataclass(frozen=True, init=False)
class Many:
    """Several output items in one response, in order: messages (text) and tool calls, as a model
    says what it is about to do and calls a tool in one reply."""

    items: tuple[str | Slow | Call, ...]

    def __init__(self, *items: str | Slow | Call) -> None:
        object.__setattr__(self, "items", items)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None

    def texts(self) -> list[str]:
        """The input's texts, in order."""
        out: list[str] = []
        for item in self.items():
            content = item.get("content")
            if isinstance(content, str):
                out.append(content)
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    out.append(part["text"])
        return out

    def items(self) -> list[dict[str, Any]]:
        return [item for item in (self.body or {}).get("input") or [] if isinstance(item, dict)]

    def outputs(self) -> list[str]:
        """What the agent answered the tool calls it made, in order (their output texts)."""
        kinds = ("function_call_output", "custom_tool_call_output")
        return [str(item.get("output")) for item in self.items() if item.get("type") in kinds]


class OpenAIResponsesStandIn:
    def __init__(self, default: str = "done") -> None:
        self.default = default
        self.websocket_status = 426
        self.script: deque[str | Call | Slow | Many] = deque()
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.failing: int | None = None  # every POST answers this HTTP error (fail_with)
        self._server = StandInServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAIResponsesStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def push(self, *replies: str | Call | Slow | Many) -> None:
        with self.lock:
            self.script.extend(replies)

    def fail_with(self, status: int | None) -> None:
        """Answer every POST with this HTTP error (401, 500, ...) until given None."""
        with self.lock:
            self.failing = status

    def codex_home(
        self,
        home: Path,
        model: str = "gpt-5.4-mini",
        *,
        approval: str = "never",
        sandbox: str = "danger-full-access",
        retries: int | None = None,
        base_url: str | None = None,
    ) -> Path:
        """A CODEX_HOME whose config sends every model call here (or to `base_url`). Codex's own
        sandbox (bubblewrap with a helper binary the npm package lacks) is off.

        `retries` None: the built-in OpenAI provider, with its own retries (a failing API costs
        ~30 s of them). A number: a provider of the config's own, as OpenAI's, with that many
        retries of a request and of a stream: Codex refuses to change the built-in provider
        ("reserved built-in provider IDs"), so this is the only way to fail fast."""
        home.mkdir(parents=True, exist_ok=True)
        url = base_url or self.base_url
        if retries is None:
            # The built-in provider, here: it needs ACP authenticate before a session.
            provider = f'openai_base_url = "{url}"\n'
            providers = ""
        else:
            provider = 'model_provider = "standin"\n'
            providers = (
                "[model_providers.standin]\n"
                'name = "Stand-in"\n'
                f'base_url = "{url}"\n'
                'env_key = "OPENAI_API_KEY"\n'
                'wire_api = "responses"\n'
                "requires_openai_auth = true\n"  # ACP authenticate as with OpenAI's own
                "supports_websockets = false\n"
                f"request_max_retries = {retries}\n"
                f"stream_max_retries = {retries}\n"
            )
        (home / "config.toml").write_text(
            f'model = "{model}"\n'
            f"{provider}"
            f'approval_policy = "{approval}"\n'
            f'sandbox_mode = "{sandbox}"\n'
            "check_for_update_on_startup = false\n"
            "[analytics]\nenabled = false\n"
            "[feedback]\nenabled = false\n"
            f"{providers}"
        )
        return home

    def responses(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path.split("?")[0].endswith("/responses")]

    def _take(self) -> str | Call | Slow | Many:
        with self.lock:
            return self.script.popleft() if self.script else self.default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _record(self, body: dict[str, Any] | None) -> None:
                request = Request(self.command, self.path, dict(self.headers.items()), body)
                with standin.lock:
                    standin.requests.append(request)

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._record(None)
                if self.path.split("?")[0].endswith("/responses"):
                    # A WebSocket upgrade: refuse it, so the agent falls back to plain HTTPS.
                    self._json(standin.websocket_status, {"error": {"message": "no WebSockets here"}})
                elif self.path.split("?")[0].rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [], "models": []})
                else:
                    self._json(404, {"error": {"message": f"the stand-in has no {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                self._record(body)
                if not self.path.split("?")[0].endswith("/responses"):
                    self._json(404, {"error": {"message": f"the stand-in has no {self.path}"}})
                    return
                with standin.lock:
                    failing = standin.failing
                if failing is not None:
                    self._json(failing, _error(failing))
                    return
                model = str((body or {}).get("model", "gpt-standin"))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for name, data in _events(standin._take(), model):
                        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


_ERRORS = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
}


def _error(status: int) -> dict[str, Any]:
    """The API's error body for an HTTP status, its message saying it is the stand-in's."""
    kind, code = _ERRORS.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"error": {"message": f"the stand-in answers {status}", "type": kind, "param": None, "code": code}}


_USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 120,
}


def _response(model: str) -> dict[str, Any]:
    """A response as `response.created` announces it."""
    return {
        "id": _id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": model,
        "output": [],
        "usage": None,
    }


def _events(reply: str | Call | Slow | Many, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """One response as the real API streams it: created, in progress, each output item in turn
    (added, its text or arguments in pieces, done), completed with every item and the usage."""
    response = _response(model)
    seq = itertools.count()
    yield "response.created", {"type": "response.created", "sequence_number": next(seq), "response": response}
    yield (
        "response.in_progress",
        {"type": "response.in_progress", "sequence_number": next(seq), "response": response},
    )
    outputs: list[dict[str, Any]] = []
    for index, item in enumerate(reply.items if isinstance(reply, Many) else (reply,)):
        items = _call_item(item, index, seq) if isinstance(item, Call) else _text_item(item, index, seq)
        outputs.append((yield from items))
    completed = {**response, "status": "completed", "output": outputs, "usage": _USAGE}
    yield (
        "response.completed",
        {"type": "response.completed", "sequence_number": next(seq), "response": completed},
    )


def _text_item(
    reply: str | Slow, index: int, seq: Iterator[int]
) -> Generator[tuple[str, dict[str, Any]], None, dict[str, Any]]:
    """An assistant message at `index`, its text in pieces; returns the item done."""
    slow = reply if isinstance(reply, Slow) else None
    text = slow.text if slow is not None else str(reply)
    item_id = _id("msg")
    item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    yield (
        "response.output_item.added",
        {
            "type": "response.output_item.added",
            "sequence_number": next(seq),
            "output_index": index,
            "item": item,
        },
    )
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    yield (
        "response.content_part.added",
        {
            "type": "response.content_part.added",
            "sequence_number": next(seq),
            **where,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
    )
    size = max(1, len(text) // (slow.chunks if slow is not None else 3))
    for start in range(0, len(text), size):
        if slow is not None and start:
            time.sleep(slow.delay)
        yield (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": next(seq),
                **where,
                "delta": text[start : start + size],
            },
        )
    yield (
        "response.output_text.done",
        {"type": "response.output_text.done", "sequence_number": next(seq), **where, "text": text},
    )
    part = {"type": "output_text", "text": text, "annotations": []}
    yield (
        "response.content_part.done",
        {"type": "response.content_part.done", "sequence_number": next(seq), **where, "part": part},
    )
    done = {**item, "status": "completed", "content": [part]}
    yield (
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "sequence_number": next(seq),
            "output_index": index,
            "item": done,
        },
    )
    return done


def _call_item(
    call: Call, index: int, seq: Iterator[int]
) -> Generator[tuple[str, dict[str, Any]], None, dict[str, Any]]:
    """A tool call at `index`: the item added, its arguments (or freeform input) in pieces, the
    item done; returns the item done."""
    if call.freeform is not None:
        item_id, field, kind, text = _id("ctc"), "input", "custom_tool_call", call.freeform
        delta, done = "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done"
    else:
        item_id, field, kind, text = _id("fc"), "arguments", "function_call", json.dumps(call.arguments or {})
        delta, done = "response.function_call_arguments.delta", "response.function_call_arguments.done"
    item = {
        "id": item_id,
        "type": kind,
        "status": "in_progress",
        "call_id": _id("call"),
        "name": call.name,
        field: "",
    }
    yield (
        "response.output_item.added",
        {
            "type": "response.output_item.added",
            "sequence_number": next(seq),
            "output_index": index,
            "item": item,
        },
    )
    where = {"item_id": item_id, "output_index": index}
    size = max(1, len(text) // 3)
    for start in range(0, len(text), size):
        yield (
            delta,
            {"type": delta, "sequence_number": next(seq), **where, "delta": text[start : start + size]},
        )
    yield done, {"type": done, "sequence_number": next(seq), **where, field: text}
    finished = {**item, "status": "completed", field: text}
    yield (
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "sequence_number": next(seq),
            "output_index": index,
            "item": finished,
        },
    )
    return finished
