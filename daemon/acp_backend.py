"""The agent-facing side: one ACP agent process and the connection to it.

This is the only module of the daemon that knows ACP's wire types. It turns
the agent's calls into calls on a `BackendHost` with plain Python values, and
offers the core plain methods (`new_session`, `prompt`, ...) in return.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import math
import os
import re
import signal
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args, get_origin

import acp
from acp import schema as s
from pydantic import BaseModel, Field, ValidationError, create_model

# Plain types, kept apart so the core need not import ACP; imported from here too.
from sessiond.daemon.agent_spawn import STDOUT_LIMIT, AgentProc, Spawned, spawn_agent
from sessiond.daemon.agent_types import (
    OPENING_WAIT,
    AgentExited,
    AgentRequestFailed,
    BackendHost,
    Capabilities,
    ClientError,
    PromptOutcome,
    PromptOverdue,
    SessionSetup,
    TerminalResult,  # noqa: F401 (re-exported)
)
from sessiond.daemon.corked import Corked
from sessiond.daemon.direct_requests import DirectRequests
from sessiond.daemon.placements.base import Machine
from sessiond.daemon.placements.repository import LOCAL
from sessiond.daemon.terminals import Terminals
from sessiond.protocol import fast_json

log = logging.getLogger("sessiond.acp")

INITIALIZE_TIMEOUT = 60.0
# Seconds `initialize` is waited for once the process wrote to its output a line that is no
# JSON-RPC message (a banner, a prompt: not an ACP agent, or one missing its flag): not the whole
# INITIALIZE_TIMEOUT, and the failure quotes the line.
STRAY_GRACE = 3.0
AUTH_REQUIRED = -32000
SESSION_SETUP_TIMEOUT = 120.0  # the agent option session_timeout's default
# Sessions asked of an agent at once (by the name its initialize answer gives) where
# max_opening_sessions does not say: gemini-cli locks ~/.gemini/projects.json in each session/new,
# and its waiters retry after 0.1, 0.2, 0.4 ... s, so of 15 at once the last were answered minutes
# later (one at a time, 30 took 2.7 s); claude-agent-acp starts a Claude Code process for each
# session, and 100 at once on two cores missed the 120 s session_timeout, half or all of them
# (four at once, all 100 opened).
OPENING_AT_ONCE = {
    "gemini-cli": 1,
    "@zed-industries/claude-agent-acp": 4,
    "@agentclientprotocol/claude-agent-acp": 4,
}


def _update_kind(update: Any) -> str:
    return str(getattr(update, "session_update", type(update).__name__))


# ---------------------------------------------------------------- updates

_SALVAGE_ROUNDS = 32


def _dumped(model: BaseModel) -> dict[str, Any]:
    """A model of the schema in its wire form: by alias, without nulls."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _update_models() -> dict[str, type[BaseModel]]:
    """Each `sessionUpdate` tag of the schema with the model that reads it."""
    models: dict[str, type[BaseModel]] = {}
    for model in get_args(s.SessionNotification.model_fields["update"].annotation):
        for tag in get_args(model.model_fields["session_update"].annotation):
            models[str(tag)] = model
    return models


_UPDATE_MODELS = _update_models()


@dataclass(slots=True)
class ReadUpdate:
    """An agent's update as far as it could be read: what did not fit the schema is left out."""

    kind: str
    payload: dict[str, Any] | None  # wire form (camelCase); None: nothing of it could be read
    unreadable: list[str] = field(default_factory=list)  # "used: Input should be a valid integer"


def _find(node: Any, loc: tuple[int | str, ...]) -> tuple[Any, int | str] | None:
    """The container and key of pydantic's error location in the raw data; a step that is
    not a key there (a union member's tag) is stepped over, the last one must be a key."""
    if not loc:
        return None
    step, rest = loc[0], loc[1:]
    in_dict = isinstance(node, dict) and isinstance(step, str) and step in node
    in_list = isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)
    if in_dict or in_list:
        if not rest:
            return node, step
        if (found := _find(node[step], rest)) is not None:
            return found
    return _find(node, rest)


def _remove(data: Any, loc: tuple[int | str, ...]) -> bool:
    """Remove the value at pydantic's error location from the raw data; True if something went."""
    found = _find(data, loc)
    if found is None:
        return False
    container, key = found
    del container[key]
    return True


_PARTIAL_MODELS: dict[type[BaseModel], type[BaseModel]] = {}


def _partial(model: type[BaseModel]) -> type[BaseModel]:
    """The model with its required fields made optional: what reads the rest of an update
    whose required field could not be read."""
    partial = _PARTIAL_MODELS.get(model)
    if partial is None:
        optional: dict[str, Any] = {
            name: (cast(Any, info.annotation) | None, Field(None, alias=info.alias))
            for name, info in model.model_fields.items()
            if info.is_required() and name != "session_update"
        }
        partial = create_model(f"Partial{model.__name__}", __base__=model, **optional)
        _PARTIAL_MODELS[model] = partial
    return partial


# ---------------------------------------------------------------- the common shapes, read fast
#
# Most updates are a few shapes (a text chunk, usage, a plan, a tool call's progress) that need no
# pydantic: `_fast_payload` builds what validating and dumping them gives, field for field in the
# model's order, and gives up (None) on anything else (a field it does not know, a value of another
# type, an unknown enum value), which then goes the whole way. A test holds the two to each other.


class _Slow(Exception):
    """This value is not one of the plain shapes: let pydantic read it."""


def _str(value: Any) -> str:
    if type(value) is not str:
        raise _Slow
    return value


def _int(value: Any) -> int:
    if type(value) is not int:
        raise _Slow
    return value


def _one_of(values: Any) -> Callable[[Any], str]:
    allowed = frozenset(str(v) for v in values)

    def check(value: Any) -> str:
        if type(value) is not str or value not in allowed:
            raise _Slow
        return value

    return check


def _literals(model: type[BaseModel], name: str) -> tuple[Any, ...]:
    """The values of a field typed `Literal[...]` or `Literal[...] | None`."""
    annotation = model.model_fields[name].annotation
    members = [annotation] if get_origin(annotation) is Literal else get_args(annotation)
    return tuple(value for member in members if get_origin(member) is Literal for value in get_args(member))


def _text_block(value: Any) -> dict[str, Any]:
    if type(value) is not dict or value.keys() != {"type", "text"} or value["type"] != "text":
        raise _Slow
    return {"text": _str(value["text"]), "type": "text"}


def _cost(value: Any) -> dict[str, Any]:
    if type(value) is not dict or value.keys() != {"amount", "currency"}:
        raise _Slow
    amount = value["amount"]
    if type(amount) is not float or not math.isfinite(amount):
        raise _Slow
    return {"amount": amount, "currency": _str(value["currency"])}


_PRIORITY = _one_of(_literals(s.PlanEntry, "priority"))
_ENTRY_STATUS = _one_of(_literals(s.PlanEntry, "status"))


def _plan_entries(value: Any) -> list[dict[str, Any]]:
    if type(value) is not list:
        raise _Slow
    entries = []
    for entry in value:
        if type(entry) is not dict or entry.keys() != {"content", "priority", "status"}:
            raise _Slow
        entries.append(
            {
                "content": _str(entry["content"]),
                "priority": _PRIORITY(entry["priority"]),
                "status": _ENTRY_STATUS(entry["status"]),
            }
        )
    return entries


def _tool_fields(model: type[BaseModel]) -> dict[str, Callable[[Any], Any]]:
    return {
        "tool_call_id": _str,
        "title": _str,
        "kind": _one_of(_literals(model, "kind")),
        "status": _one_of(_literals(model, "status")),
    }


_CHUNK: dict[str, Callable[[Any], Any]] = {"content": _text_block, "message_id": _str}
# Per kind: the fields read fast, by field name, each with what reads it; the session_update
# field is the kind itself. A field not named here, present in the update, means the whole way.
_FAST_FIELDS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "agent_message_chunk": _CHUNK,
    "agent_thought_chunk": _CHUNK,
    "user_message_chunk": _CHUNK,
    "usage_update": {"used": _int, "size": _int, "cost": _cost},
    "plan": {"entries": _plan_entries},
    "tool_call": _tool_fields(s.ToolCallStart),
    "tool_call_update": _tool_fields(s.ToolCallProgress),
}


def _fast_plan(kind: str) -> tuple[tuple[str, bool, Callable[[Any], Any] | None], ...] | None:
    """The model's fields in its order: (wire key, required, reader; None for the tag)."""
    readers = _FAST_FIELDS.get(kind)
    model = _UPDATE_MODELS.get(kind)
    if readers is None or model is None:
        return None
    return tuple(
        (
            info.alias or name,
            info.is_required(),
            None if name == "session_update" else readers.get(name, _slow),
        )
        for name, info in model.model_fields.items()
    )


def _slow(value: Any) -> Any:
    raise _Slow


_FAST_PLANS = {kind: plan for kind in _FAST_FIELDS if (plan := _fast_plan(kind)) is not None}
_FAST_KEYS = {kind: frozenset(key for key, _, _ in plan) for kind, plan in _FAST_PLANS.items()}


def _fast_payload(kind: str, raw: dict[str, Any]) -> dict[str, Any] | None:
    """What validating `raw` with its kind's model and dumping it (JSON, by alias, without
    nulls) gives, for the plain shapes; None for anything else."""
    plan = _FAST_PLANS.get(kind)
    if plan is None or not raw.keys() <= _FAST_KEYS[kind]:
        return None
    payload: dict[str, Any] = {}
    try:
        for key, required, read in plan:
            value = raw.get(key)
            if read is None:
                payload[key] = kind
            elif value is not None:
                payload[key] = read(value)
            elif required:
                return None
    except _Slow:
        return None
    return payload


def read_update(raw: Any) -> ReadUpdate:
    """Read one `session/update`'s `update` field field by field: what fits the schema is kept
    (validated and dumped), what does not is dropped and named in `unreadable`."""
    if not isinstance(raw, dict):
        return ReadUpdate("unknown", None, ["update: not an object"])
    kind = raw.get("sessionUpdate")
    if not isinstance(kind, str):
        return ReadUpdate("unknown", None, ["sessionUpdate: missing"])
    if (payload := _fast_payload(kind, raw)) is not None:
        return ReadUpdate(kind, payload)
    return _read_validated(kind, raw)


def _read_validated(kind: str, raw: dict[str, Any]) -> ReadUpdate:
    """`read_update` by the schema's models: validated whole, else salvaged field by field."""
    model = _UPDATE_MODELS.get(kind)
    if model is None:
        return ReadUpdate(kind, None, [f"sessionUpdate: {kind!r} is not a kind this daemon knows"])
    try:
        update = model.model_validate(raw)
    except ValidationError:
        pass
    else:
        return ReadUpdate(kind, _dumped(update))
    # Salvage: drop what does not fit, one field at a time (locations shift once one goes).
    partial = _partial(model)
    data = json.loads(json.dumps(raw))  # a private copy to cut down
    unreadable: list[str] = []
    for _ in range(_SALVAGE_ROUNDS):
        try:
            update = partial.model_validate(data)
            break
        except ValidationError as exc:
            error = exc.errors()[0]
        loc = tuple(error["loc"])
        # An object inside that lacks a field it needs goes whole (its innermost one in the data).
        tries = [loc[:end] for end in range(len(loc) - 1, 0, -1)] if error["type"] == "missing" else [loc]
        if not any(_remove(data, where) for where in tries):
            return ReadUpdate(kind, None, [*unreadable, f"{_where(error['loc'])}: {error['msg']}"])
        unreadable.append(f"{_where(error['loc'])}: {error['msg']}")
    else:
        return ReadUpdate(kind, None, unreadable)
    payload = _dumped(update)
    for name, info in model.model_fields.items():
        key = info.alias or name
        named = any(u.startswith(f"{key}:") for u in unreadable)
        if info.is_required() and key not in payload and not named:
            unreadable.append(f"{key}: null or missing")
    return ReadUpdate(kind, payload, unreadable)


def _where(loc: Any) -> str:
    return ".".join(str(step) for step in loc)


class _Updates:
    """The agent's `session/update` notifications, read as they arrive (in order) and handed
    to the host; those that do not fit the schema are salvaged, counted, and logged once per kind."""

    def __init__(self, agent: str, host: BackendHost) -> None:
        self._agent = agent
        self._host = host
        self.malformed = 0
        self._logged: set[str] = set()

    def handle(self, params: Any) -> None:
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if not isinstance(session_id, str):
            self._count("session/update", ["sessionId: missing"], kept=False)
            return
        read = read_update(params.get("update"))
        if read.unreadable:
            self._count(read.kind, read.unreadable, kept=read.payload is not None)
        if read.payload is not None:
            try:
                self._host.on_update(session_id, read.kind, read.payload)
            except Exception:
                # Never let one update stop the reading of the agent's output.
                log.exception("handling agent %r's %s update failed", self._agent, read.kind)

    def _count(self, kind: str, unreadable: list[str], *, kept: bool) -> None:
        self.malformed += 1
        if kind in self._logged:
            return
        self._logged.add(kind)
        log.warning(
            "agent %r sent a %s that does not fit ACP's schema (%s); %s. Further ones of this kind "
            "are only counted (malformedUpdates in agent/get)",
            self._agent,
            kind,
            "; ".join(unreadable),
            "the rest of it was kept" if kept else "it was dropped",
        )

    def take(self, message: dict[str, Any]) -> bool:
        """True if the message was a session/update notification, now handled."""
        if message.get("method") != "session/update" or "id" in message:
            return False
        self.handle(message.get("params"))
        return True


# Seconds of an agent's buffered output handled before the loop is let go, while clients watch the
# events (they are stored and sent meanwhile), then the next line. A line already buffered is read
# without a wait: a pipe's worth of updates (~500) held the loop ~25 ms at a time. Measured with
# bench/streaming.py (200 sessions x 40 chunks, 3 subscribers), 7 runs against 7: the delay from
# an update to a client, median 18-28 ms against 34-45, p99 36-79 ms against 69-128; the burst
# ~5% longer. With nobody subscribed, nothing waits on the events: the loop is not let go.
READ_SLICE = 0.005


async def pump_lines(
    source: asyncio.StreamReader, handle: Callable[[bytes], None], watched: Callable[[], bool]
) -> None:
    """Every line of `source` to `handle`, in order, until its end; the loop is let go after each
    READ_SLICE seconds spent without waiting, while `watched()`."""
    loop = asyncio.get_running_loop()
    since = loop.time()
    while line := await _read_line(source):
        handle(line)
        if loop.time() - since >= READ_SLICE:
            if watched():
                await asyncio.sleep(0)
            since = loop.time()


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunks.append(await reader.readuntil(b"\n"))
                return b"".join(chunks)
            except asyncio.LimitOverrunError as exc:
                chunks.append(await reader.readexactly(exc.consumed))
    except asyncio.IncompleteReadError as exc:
        chunks.append(exc.partial)
        return b"".join(chunks)


class _Client:
    """The ACP client side: every call from the agent goes to the host."""

    def __init__(self, host: BackendHost) -> None:
        self._host = host

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        # Runs before any await: the SDK starts one task per notification, in
        # arrival order, so handling it synchronously keeps the agent's order.
        payload = _dumped(update)
        self._host.on_update(session_id, _update_kind(update), payload)

    async def request_permission(
        self, session_id: str, tool_call: s.ToolCallUpdate, options: list[s.PermissionOption], **kwargs: Any
    ) -> s.RequestPermissionResponse:
        chosen = await self._host.request_permission(
            session_id,
            _dumped(tool_call),
            [_dumped(option) for option in options],
        )
        outcome: s.AllowedOutcome | s.DeniedOutcome
        if chosen is None:
            outcome = s.DeniedOutcome(outcome="cancelled")
        else:
            outcome = s.AllowedOutcome(outcome="selected", option_id=chosen)
        return s.RequestPermissionResponse(outcome=outcome)

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> s.ReadTextFileResponse:
        with _as_request_error():
            content = await self._host.read_text_file(session_id, path, line, limit)
        return s.ReadTextFileResponse(content=content)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> s.WriteTextFileResponse:
        with _as_request_error():
            await self._host.write_text_file(session_id, path, content)
        return s.WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[s.EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> s.CreateTerminalResponse:
        with _as_request_error():
            terminal_id = await self._host.create_terminal(
                session_id,
                command,
                list(args or []),
                {variable.name: variable.value for variable in env or []},
                cwd,
                output_byte_limit,
            )
        return s.CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> s.TerminalOutputResponse:
        with _as_request_error():
            result = await self._host.terminal_output(session_id, terminal_id)
        exit_status = None
        if result.exit_code is not None or result.signal is not None:
            exit_status = s.TerminalExitStatus(exit_code=result.exit_code, signal=result.signal)
        return s.TerminalOutputResponse(
            output=result.output, truncated=result.truncated, exit_status=exit_status
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> s.WaitForTerminalExitResponse:
        with _as_request_error():
            exit_code, signal_name = await self._host.wait_for_terminal_exit(session_id, terminal_id)
        return s.WaitForTerminalExitResponse(exit_code=exit_code, signal=signal_name)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> s.KillTerminalResponse:
        with _as_request_error():
            await self._host.kill_terminal(session_id, terminal_id)
        return s.KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> s.ReleaseTerminalResponse:
        with _as_request_error():
            await self._host.release_terminal(session_id, terminal_id)
        return s.ReleaseTerminalResponse()

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> s.CreateElicitationResponse:
        # No person stands behind a form here yet: decline, so the agent carries on.
        return s.DeclineElicitationResponse(action="decline")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None


@contextlib.contextmanager
def _as_request_error() -> Any:
    try:
        yield
    except ClientError as exc:
        if str(exc).startswith("no such file"):
            # ACP's own code and words for it: agents (gemini-cli) read a missing file so, before a write.
            raise acp.RequestError(-32002, f"Resource not found ({exc})", {"uri": str(exc)}) from None
        raise acp.RequestError(-32602, str(exc)) from None
    except OSError as exc:
        raise acp.RequestError(-32603, f"{exc.strerror or exc}: {exc.filename or ''}".strip(": ")) from None


def describe_request_error(exc: acp.RequestError) -> str:
    """The agent's own words: its message, with the details it attached."""
    message = str(exc) or "the agent answered with an error"
    data = exc.data
    details: list[str] = []
    if isinstance(data, dict):
        for key in ("details", "message", "error", "reason"):
            value = data.get(key)
            if isinstance(value, str) and value and value not in message:
                details.append(value)
    elif isinstance(data, str) and data and data not in message:
        details.append(data)
    text = ": ".join([message, *details])
    if exc.code == AUTH_REQUIRED:
        text += "; give the agent its credentials (an API key in its env, say) and send the prompt again"
    return text


_RELEVANT = ("error", "fail", "retry", "retrying", "refused", "unreachable", "timed out", "timeout", "status")
_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        (
            " 401",
            " 403",
            "authenticat",
            "api key",
            "api_key",
            "x-api-key",
            "unauthorized",
            "permission_denied",
        ),
        "the model API refused the agent's credentials: check the API key in its env "
        "(its `env` in agents.toml, or agent/update), then send the prompt again",
    ),
    (
        (
            "econnrefused",
            "enotfound",
            "unable to connect",
            "connection error",
            "fetch failed",
            "eai_again",
            "unreachable",
            "etimedout",
            "timed out",
            "socket hang up",
            "error sending request",
        ),
        "the agent could not reach its model API: check the network and the API's address in the agent's "
        "env (a base URL setting), then send the prompt again",
    ),
    (
        (" 429", "rate limit", "rate_limit", "resource_exhausted", "quota"),
        "the model API is limiting the agent's requests: wait, then send the prompt again",
    ),
    (
        (
            " 500",
            " 502",
            " 503",
            " 504",
            " 529",
            "overloaded",
            "internal server error",
            "server error",
            "status 5",
            "unavailable",
            "internalservererror",
            "high demand",
        ),
        "the model API is failing on its side: send the prompt again later",
    ),
)


def model_api_hint(text: str, agent: str) -> str:
    """What to do about a failed turn whose words say how the agent's model API failed, or ''."""
    lowered = f" {text.lower()}"
    for needles, hint in _HINTS:
        if any(needle in lowered for needle in needles):
            return f"; {hint}"
    return ""


@dataclass(frozen=True, slots=True)
class LogSince:
    """An agent's log from `start` (bytes) on: called, its last line that speaks of an error or
    a retry."""

    path: Path
    start: int

    def __call__(self) -> str | None:
        return _last_relevant_line(self.path, self.start, "", limit=64 * 1024)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


_COLOURS = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # terminal escapes (codex-acp colours its log)


def _last_relevant_line(path: Path, start: int, known: str, limit: int = 256 * 1024) -> str | None:
    """The agent's last stderr line since `start` that speaks of an error or a retry and adds to `known`."""
    try:
        with open(path, "rb") as log:
            log.seek(max(start, _size(path) - limit))
            tail = log.read(limit).decode("utf-8", "replace")
    except OSError:
        return None
    # What the error says past its JSON-RPC prefix ("Internal error: "): a line that holds it repeats it.
    said = known.split(": ", 1)[-1] if known.startswith("Internal error: ") else known
    for raw in reversed(tail.splitlines()):
        line = " ".join(_COLOURS.sub("", raw).split())
        # A piece of a printed object or stack ("errorName: ..." ending in a comma) says little.
        if len(line) < 8 or line.startswith(("at ", "---")) or line.endswith(("{", "[", "(", ",")):
            continue
        if not any(word in line.lower() for word in _RELEVANT):
            continue
        if line in known or (len(said) >= 12 and said in line):
            continue
        if any(part and part in known for part in line.split("'")[1::2]):
            continue
        return line[:300]
    return None


def _auth_method(method: Any, env: Mapping[str, str]) -> dict[str, Any]:
    """An auth method as the agent declared it, with `satisfied`: the agent's environment holds
    every variable an env_var method needs (other kinds need a person, so never)."""
    info: dict[str, Any] = _dumped(method)
    info.setdefault("type", "agent")
    needed = [v for v in info.get("vars", []) if not v.get("optional")]
    info["satisfied"] = info["type"] == "env_var" and all(env.get(v["name"]) for v in needed)
    return info


# Memory one open session holds at an agent, where that is large enough to bound by default (by
# the name its initialize answer gives): claude-agent-acp starts a Claude Code process for each
# session (170-250 MB measured). Where max_live_sessions does not say, a process keeps open as many
# as fit in LIVE_MEMORY_SHARE of this machine's memory, at least LIVE_AT_LEAST (a batch of 100 held
# 10-17 GB).
SESSION_MEMORY = {
    "@zed-industries/claude-agent-acp": 256 * 2**20,
    "@agentclientprotocol/claude-agent-acp": 256 * 2**20,
}
LIVE_MEMORY_SHARE = 0.5
LIVE_AT_LEAST = 4
# The context window of an agent that never says it (no `usage_update` with a size), by the name
# its initialize answer gives, for the fill the daemon estimates: gemini-cli runs Gemini models,
# whose windows are 1,048,576 tokens (against the 200,000 assumed otherwise).
WINDOW_BY_AGENT = {"gemini-cli": 1_048_576}
# Agents that replay a loaded session's history after they answered session/load, not before (by
# the name their initialize gives): gemini-cli starts its replay without waiting for it.
REPLAYS_AFTER_LOAD = {"gemini-cli"}
# Agents that keep one MCP server of a name for all their sessions in a folder, the one a session
# offered last (opencode's `mcp.add` is by directory and name): whatever session calls it, the
# call carries the token of the session that offered it last.
SHARES_MCP_BY_FOLDER = {"OpenCode"}
# Agents whose `usage_update` cost is the session's own total, kept across their processes and
# loads (a fork's includes what it copied), by their initialize name: others may count from 0
# again (claude-agent-acp in each process and resumed session).
COST_IS_SESSION_TOTAL = {"OpenCode"}


def last_words(log_path: Path, tail: int = 16384) -> str | None:
    """The last line the agent's latest start wrote to its log (its stderr, after the daemon's
    "--- … starting" line), cut to 200 characters; None when it wrote none."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(0, log.seek(0, 2) - tail))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = [line.strip() for line in text.rsplit("\n--- ", 1)[-1].splitlines()[1:]]
    said = next((line for line in reversed(lines) if line), None)
    return None if said is None else said if len(said) <= 200 else said[:199] + "…"


def machine_memory() -> int | None:
    """Bytes of physical memory on this machine; None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def live_by_memory(agent_name: str, memory: int | None) -> int | None:
    """The sessions an agent keeps open at once by default: None (no cap) unless its sessions are
    known to be large (SESSION_MEMORY)."""
    per_session = SESSION_MEMORY.get(agent_name)
    if per_session is None or not memory:
        return None
    return max(LIVE_AT_LEAST, int(memory * LIVE_MEMORY_SHARE) // per_session)


class AgentProcess:
    """One agent process: started once, holds every session of its agent."""

    def __init__(
        self,
        name: str,
        command: list[str],
        env: Mapping[str, str],
        log_path: Path,
        host: BackendHost,
        client_version: str,
        session_timeout: float = SESSION_SETUP_TIMEOUT,
        max_opening_sessions: int | None = None,
        max_live_sessions: int | None = None,
    ) -> None:
        self.name = name
        self.session_timeout = session_timeout
        self._max_opening = max_opening_sessions
        # Sessions kept open here at once (the least recently used idle one is closed past it);
        # max_live_sessions, else the agent's default once initialize says who it is.
        self.live_cap = max_live_sessions
        self._opening: asyncio.Semaphore | None = None  # (set once initialize says who it is)
        self._opening_cap: int | None = None
        self._closing: set[asyncio.Task[None]] = set()  # sessions opened after they were given up
        self.command = list(command)
        self.env = dict(env)
        self.log_path = log_path
        self._host = host
        self._client_version = client_version
        self._proc: AgentProc | None = None
        self._conn: Any = None
        self._direct: DirectRequests | None = None  # a turn's requests, past the SDK
        self._watcher: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stdin: Corked | None = None  # the process's stdin: what a turn of the loop wrote, sent as one
        self._updates = _Updates(name, host)
        self._spawn_env: Mapping[str, str] = {}
        self.auth_methods: list[dict[str, Any]] = []  # as declared, each with "satisfied"
        self.authenticated: str | None = None
        self._auth_lock = asyncio.Lock()
        self.capabilities = Capabilities()
        self.agent_info: dict[str, Any] | None = None
        self.exited = asyncio.Event()  # set through _set_exited, which wakes the calls waiting
        self._scopes: set[asyncio.Timeout] = set()  # each call's, while it waits
        self.exit_code: int | None = None
        self.started_at: float | None = None
        self.stopping = False
        self._initialized = False
        # The first line of its output before initialize was answered that was no message.
        self._stray_line: str | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and not self.exited.is_set()

    async def start(self, spawned: Spawned | None = None) -> None:
        """Run ACP initialize with the agent, first starting its process unless given it started;
        raises AgentExited with a reason on failure."""
        if spawned is None:
            # The daemon's environment as the agent's options filter it (child_env), then its own env.
            environment = self._host.child_environment(self.env)
            try:
                spawned = await spawn_agent(self.name, self.command, environment, self.log_path)
            except AgentExited:
                self._set_exited()
                raise
        self._proc = spawned.proc
        self.started_at = spawned.started_at
        self._spawn_env = spawned.environment  # what its env_var auth methods are checked against
        # Updates are read off the agent's stdout here, in order, before the SDK sees the rest.
        sdk_stdout = asyncio.StreamReader(limit=STDOUT_LIMIT)
        self._reader = asyncio.create_task(
            self._read_stdout(self._proc.stdout, sdk_stdout), name=f"agent-{self.name}-stdout"
        )
        stdin = self._proc.stdin
        if isinstance(stdin, asyncio.StreamWriter):
            stdin = self._stdin = Corked(stdin)
        self._direct = DirectRequests(stdin, acp.RequestError)
        self._conn = acp.connect_to_agent(_Client(self._host), stdin, sdk_stdout, use_unstable_protocol=True)
        self._watcher = asyncio.create_task(self._watch(), name=f"agent-{self.name}-watch")
        try:
            response = await self._call(
                self._conn.initialize(
                    protocol_version=acp.PROTOCOL_VERSION,
                    client_capabilities=s.ClientCapabilities(
                        fs=s.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                        terminal=True,
                    ),
                    client_info=s.Implementation(
                        name="sessiond", title="sessiond", version=self._client_version
                    ),
                ),
                timeout=INITIALIZE_TIMEOUT,
                what="initialize",
            )
        except TimeoutError as exc:
            if self._stray_line is None:
                raise TimeoutError(f"{exc}, and wrote nothing to its output: {self._is_it_acp()}") from None
            raise AgentExited(
                f"agent {self.name!r} did not answer initialize, and wrote to its output "
                f"{self._stray_line!r}, which is no ACP (JSON-RPC) message: {self._is_it_acp()}"
            ) from None
        except AgentRequestFailed as exc:  # (`cat` as the agent: our own request came back)
            raise AgentRequestFailed(
                f"agent {self.name!r} answered initialize with an error ({exc}): {self._is_it_acp()}",
                exc.code,
                exc.data,
            ) from None
        self._initialized = True
        caps = response.agent_capabilities or s.AgentCapabilities()
        session_caps = caps.session_capabilities or s.SessionCapabilities()
        self.capabilities = Capabilities(
            load_session=bool(caps.load_session),
            list=session_caps.list is not None,
            resume=session_caps.resume is not None,
            fork=session_caps.fork is not None,
            close=session_caps.close is not None,
            mcp_http=bool(caps.mcp_capabilities and caps.mcp_capabilities.http),
        )
        if response.agent_info is not None:
            self.agent_info = response.agent_info.model_dump(mode="json", exclude_none=True)
        at_once = self._max_opening
        if at_once is None:
            at_once = OPENING_AT_ONCE.get(self.agent_name)
        if at_once is not None:
            self._opening, self._opening_cap = asyncio.Semaphore(at_once), at_once
        if self.live_cap is None:
            self.live_cap = live_by_memory(self.agent_name, machine_memory())
        self.auth_methods = [_auth_method(method, self._spawn_env) for method in response.auth_methods or []]

    @property
    def malformed_updates(self) -> int:
        """Updates from the agent that did not fit ACP's schema (salvaged or dropped)."""
        return self._updates.malformed

    async def _read_stdout(self, source: asyncio.StreamReader, sdk: asyncio.StreamReader) -> None:
        """Hand session/update notifications to `_Updates` as they arrive, and the answers to a
        turn's requests to `DirectRequests`; the rest to the SDK."""
        direct = self._direct
        assert direct is not None

        def handle(line: bytes) -> None:
            if not self._initialized and not line.lstrip().startswith(b"{") and line.strip():
                self._strayed(line)
            if b'"session/update"' in line or direct.waiting:
                try:
                    message = fast_json.loads(line)
                except (ValueError, RecursionError):
                    message = None  # the SDK reports it
                if isinstance(message, dict) and (self._updates.take(message) or direct.take(message)):
                    return
            sdk.feed_data(line)

        try:
            await pump_lines(source, handle, self._host.watched)
        except Exception:
            log.exception("reading agent %r's output failed", self.name)
        finally:
            direct.ended(f"agent {self.name!r} closed its output")
            sdk.feed_eof()

    def _strayed(self, line: bytes) -> None:
        """A line that is no message before `initialize` was answered: that answer is waited for
        STRAY_GRACE seconds more at most (an ACP agent may print a banner first, and then speak)."""
        if self._stray_line is not None:
            return
        self._stray_line = line.decode(errors="replace").strip()[:200]
        log.warning("agent %r wrote to its output before initialize: %r", self.name, self._stray_line)
        deadline = asyncio.get_running_loop().time() + STRAY_GRACE
        for scope in self._scopes:
            when = scope.when()
            if when is None or when > deadline:
                scope.reschedule(deadline)

    async def _watch(self) -> None:
        assert self._proc is not None
        self.exit_code = await self._proc.wait()
        self._set_exited()
        if self._conn is not None:
            # Rejects every request still waiting for the agent.
            await self._conn.close()

    def _set_exited(self) -> None:
        self.exited.set()
        now = asyncio.get_running_loop().time()
        for scope in list(self._scopes):
            scope.reschedule(now)  # its call ends as its timeout would, and says the agent exited

    async def _call(self, awaitable: Any, *, timeout: float | None = None, what: str = "request") -> Any:
        """Await a request to the agent, racing the process's exit, with an optional timeout.

        The request runs in the caller's task, inside one cancel scope that the timeout and the
        exit both end: a call costs no task of its own, nor a future to race them."""
        if self.exited.is_set():
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never sent
            raise AgentExited(await self._exit_reason_when_gone(what))
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                self._scopes.add(scope)  # (only while entered: an exit reschedules it)
                try:
                    return await awaitable
                finally:
                    self._scopes.discard(scope)
        except TimeoutError:
            if not scope.expired():
                raise  # (the request's own, not ours)
            if self.exited.is_set():
                raise AgentExited(await self._exit_reason_when_gone(what)) from None
            raise TimeoutError(f"agent {self.name!r} did not answer {what} within {timeout:g} s") from None
        except acp.RequestError as exc:
            raise AgentRequestFailed(describe_request_error(exc), exc.code, exc.data) from None
        except ConnectionError:
            raise AgentExited(await self._exit_reason_when_gone(what)) from None

    def _is_it_acp(self) -> str:
        """The question to ask of an agent that did not start speaking ACP."""
        return (
            f"check its command ({' '.join(self.command)}): is it an ACP agent, or does it need a flag "
            "to speak ACP (as `gemini --acp` and `opencode acp` do)?"
        )

    async def _exit_reason_when_gone(self, what: str) -> str:
        # The pipe closes a moment before the exit status is known: wait for it.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.exited.wait(), 5)
        return self.exit_reason(what)

    @property
    def node(self) -> str | None:
        """Where it runs when not on this machine."""
        return self._proc.node if self._proc is not None else None

    async def root_problem(self, root: str) -> str | None:
        """Why a session rooted at `root` cannot work where the process runs (None: it can)."""
        return await self._proc.root_problem(root) if self._proc is not None else None

    def terminals(self) -> Terminals | None:
        """Terminals running commands where the process runs (None: the placement's own)."""
        return self._proc.terminals() if self._proc is not None else None

    def machine(self) -> Machine:
        """The machine it runs on, for a placement made there (a worktree of a repository)."""
        return self._proc.machine() if self._proc is not None else LOCAL

    def memory(self) -> int | None:
        """Resident bytes of the process and its children (None: not known)."""
        return self._proc.memory() if self._proc is not None else None

    def exit_reason(self, what: str) -> str:
        code = self.exit_code
        lost = self._proc.lost if self._proc is not None else None
        if lost is not None:
            how = lost
        elif code is None:
            how = "closed its connection"
        elif code >= 0:
            how = f"exited with code {code}"
            if (said := last_words(self.log_path)) is not None:
                how += f" (its last words: {said!r})"
        else:
            how = f"was killed by signal {-code}"
            with contextlib.suppress(ValueError):
                how = f"was killed by {signal.Signals(-code).name}"
        return (
            f"agent {self.name!r} {how} during {what}; it starts again on the next turn "
            f"(its log: {self.log_path})"
        )

    # ------------------------------------------------------------ authentication

    async def authenticate(self) -> None:
        """ACP `authenticate` with the first env_var method the agent's environment satisfies,
        once, before its first session. Agents that declare no such method (or none whose
        variables are set) are left to say themselves whether they need credentials."""
        if self.authenticated is not None:
            return
        async with self._auth_lock:
            if self.authenticated is not None:
                return
            method = next((m for m in self.auth_methods if m["satisfied"]), None)
            if method is None:
                return
            try:
                await self._call(
                    self._conn.authenticate(method_id=method["id"]), timeout=60, what="authenticate"
                )
            except AgentRequestFailed as exc:
                raise AgentRequestFailed(
                    f"agent {self.name!r} refused authentication with {method['id']!r}: {exc}",
                    exc.code,
                    exc.data,
                ) from None
            self.authenticated = method["id"]
            log.info("agent %r authenticated with %r", self.name, method["id"])

    def auth_help(self) -> str:
        """The agent's auth methods and what each needs, for an error a person reads."""
        if not self.auth_methods:
            return ""
        parts = []
        for method in self.auth_methods:
            names = [v["name"] for v in method.get("vars", []) if not v.get("optional")]
            if method.get("type") == "env_var":
                need = f"set {' and '.join(names)} in the agent's env (agents.toml, or agent/update)"
            elif method.get("type") == "terminal":
                need = f"run `{' '.join([*self.command, *method.get('args', [])])}` in a terminal and log in"
            else:
                need = method.get("description") or "done by the agent itself (an interactive login)"
            parts.append(f"{method['id']} ({need})")
        return f"; agent {self.name!r} offers these ways to authenticate: " + ", ".join(parts)

    async def _session_call(self, request: Callable[[], Awaitable[Any]], what: str) -> Any:
        """A session/new, load, resume or fork: authenticated first, auth errors explained."""
        await self.authenticate()
        try:
            if self._opening is None:
                return await self._call(request(), timeout=self.session_timeout, what=what)
            await self._wait_to_open(self._opening)
            try:  # (its deadline counts from when it is asked)
                return await self._call(request(), timeout=self.session_timeout, what=what)
            finally:
                self._opening.release()
        except TimeoutError as exc:
            raise TimeoutError(
                f"{exc} (its session_timeout): the turn failed; the session is kept. An agent asked "
                f"to open many sessions at once may need fewer at a time (max_opening_sessions in "
                f"agents.toml, or `sessiond batch --max-concurrency N`); a slow one, a longer "
                f"session_timeout"
            ) from None
        except AgentRequestFailed as exc:
            if exc.code == AUTH_REQUIRED and self.auth_methods:
                raise AgentRequestFailed(str(exc) + self.auth_help(), exc.code, exc.data) from None
            raise

    # ------------------------------------------------------------ sessions

    async def new_session(
        self, cwd: str, mcp: list[dict[str, Any]] | None = None
    ) -> tuple[str, SessionSetup]:
        return await self._open("session/new", s.NewSessionResponse, cwd=cwd, mcpServers=mcp or [])

    async def fork_session(
        self, session_id: str, cwd: str, mcp: list[dict[str, Any]] | None = None
    ) -> tuple[str, SessionSetup]:
        return await self._open(
            "session/fork", s.ForkSessionResponse, sessionId=session_id, cwd=cwd, mcpServers=mcp or []
        )

    async def resume_session(
        self, session_id: str, cwd: str, mcp: list[dict[str, Any]] | None = None
    ) -> SessionSetup:
        _, setup = await self._open(
            "session/resume", s.ResumeSessionResponse, sessionId=session_id, cwd=cwd, mcpServers=mcp or []
        )
        return setup

    async def load_session(
        self, session_id: str, cwd: str, mcp: list[dict[str, Any]] | None = None
    ) -> SessionSetup:
        _, setup = await self._open(
            "session/load", s.LoadSessionResponse, sessionId=session_id, cwd=cwd, mcpServers=mcp or []
        )
        return setup

    async def _open(self, method: str, answer: type[BaseModel], **params: Any) -> tuple[str, SessionSetup]:
        """A session/new, load, resume or fork (its MCP servers already in ACP's `McpServer`
        shapes, as `Around.mcp_servers` gives them): the session's id (new and fork name one)
        and its setup."""
        late = self._close_late if method in ("session/new", "session/fork") else None
        raw = await self._session_call(lambda: self._requests().request(method, params, late=late), method)
        return _opened(raw, answer)

    @property
    def agent_name(self) -> str:
        """The name its initialize answer gave ("None" before, or when it gave none): what the
        defaults known of particular agents go by."""
        return str((self.agent_info or {}).get("name"))

    @property
    def cost_is_session_total(self) -> bool:
        """Whether the cost it reports of a session is that session's whole total (see above)."""
        return self.agent_name in COST_IS_SESSION_TOTAL

    @property
    def shares_mcp_servers(self) -> bool:
        """Whether its sessions in one folder share each MCP server (the one offered last)."""
        return self.agent_name in SHARES_MCP_BY_FOLDER

    @property
    def replays_after_load(self) -> bool:
        """Whether what it replays of a loaded session may still come after its answer to the load."""
        return self.agent_name in REPLAYS_AFTER_LOAD

    @property
    def context_window(self) -> int | None:
        """Its sessions' context window where the agent is known never to say it (None: it says,
        or it is not known)."""
        return WINDOW_BY_AGENT.get(self.agent_name)

    @property
    def opening_at_once(self) -> int | None:
        """Sessions it is asked to open at once (None: no cap)."""
        return self._opening_cap

    @staticmethod
    async def _wait_to_open(opening: asyncio.Semaphore) -> None:
        """A turn at opening; whoever listens (OPENING_WAIT) is told while it waits for others."""
        told = OPENING_WAIT.get() if opening.locked() else None
        if told is None:
            await opening.acquire()
            return
        told(True)
        try:
            await opening.acquire()
        finally:
            told(False)

    def _close_late(self, result: Any) -> None:
        """A session the agent opened after the daemon stopped waiting (past session_timeout, or
        its turn cancelled): nobody will use it, and claude-agent-acp keeps a Claude Code process
        (~170 MiB) for each. Closed where the agent can close sessions."""
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str):
            return
        if not self.capabilities.close:
            log.info(
                "agent %r opened session %s after it was given up; it cannot close it", self.name, session_id
            )
            return

        async def close() -> None:
            try:
                await self.close_session(session_id)
            except (AgentRequestFailed, AgentExited, TimeoutError) as exc:
                log.info("closing session %s, opened after it was given up, failed: %s", session_id, exc)

        task = asyncio.get_running_loop().create_task(close(), name=f"close-late-{session_id}")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _requests(self) -> DirectRequests:
        assert self._direct is not None, "the agent was not started"
        return self._direct

    def known(self, session_id: str) -> None:
        """The daemon has the session by this id now (its session/new, load, resume or fork
        answered): the updates the agent sent of it before are handled now, in order."""
        self._host.known(session_id)

    async def close_session(self, session_id: str) -> None:
        await self._call(self._conn.close_session(session_id=session_id), timeout=30, what="session/close")

    async def set_mode(self, session_id: str, mode: str) -> None:
        await self._call(
            self._conn.set_session_mode(session_id=session_id, mode_id=mode),
            timeout=30,
            what="session/set_mode",
        )

    async def set_config_option(
        self, session_id: str, config_id: str, value: str | bool
    ) -> list[dict[str, Any]]:
        """Set one config option; every option as the agent says they are now."""
        response = await self._call(
            self._conn.set_config_option(config_id=config_id, session_id=session_id, value=value),
            timeout=30,
            what="session/set_config_option",
        )
        options = getattr(response, "config_options", None) or []
        return [_dumped(option) for option in options]

    def log_reader(self) -> LogSince:
        """Its log's last line that speaks of an error or a retry, written after this call."""
        return LogSince(self.log_path, _size(self.log_path))

    async def prompt(
        self,
        session_id: str,
        text: str,
        *,
        timeout: float | None = None,
        grace: float = 0.0,
        log: LogSince | None = None,
    ) -> PromptOutcome:
        """Send the prompt and wait for its answer. Past `timeout` seconds the agent is told to stop
        (session/cancel) and its answer waited for `grace` seconds more, so that the session's next
        prompt does not find it still busy with this one; then PromptOverdue, answered or not.
        An error is explained from the log written since `log` began (else since this call)."""
        log_start = log.start if log is not None else _size(self.log_path)
        loop = asyncio.get_running_loop()
        told: list[asyncio.Future[None]] = []  # the session/cancel sent at the deadline, if it passed
        deadline = (
            loop.call_later(timeout, lambda: told.append(asyncio.ensure_future(self.cancel(session_id))))
            if timeout is not None
            else None
        )
        try:
            answer = await self._call(
                self._requests().request(
                    "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
                ),
                timeout=None if timeout is None else timeout + grace,
                what="session/prompt",
            )
        except Exception as exc:
            # Past its deadline, however the prompt then ended (answered with an error once told
            # to stop, say), the deadline is what ended it.
            if told or isinstance(exc, TimeoutError):
                raise PromptOverdue(f"session/prompt ran past {timeout:g} s") from None
            if isinstance(exc, AgentRequestFailed):
                raise self._explained(exc, log_start) from None
            raise
        finally:
            if deadline is not None:
                deadline.cancel()
            if told:
                await asyncio.gather(*told, return_exceptions=True)  # (sent, or the agent is gone)
        if told:
            raise PromptOverdue(f"session/prompt ran past {timeout:g} s")
        return _outcome(answer)

    def _explained(self, exc: AgentRequestFailed, log_start: int) -> AgentRequestFailed:
        """A prompt's error as the agent said it, with what to do: authenticate, or what its log
        said since the prompt was sent and what that points to (a model API's failure, say)."""
        if exc.code == AUTH_REQUIRED:
            if not self.auth_methods:
                return exc
            return AgentRequestFailed(str(exc) + self.auth_help(), exc.code, exc.data)
        said = _last_relevant_line(self.log_path, log_start, str(exc))
        explained = (
            str(exc)
            + (f" (its log says: {said})" if said else "")
            + model_api_hint(f"{exc} {said or ''}", self.name)
        )
        return AgentRequestFailed(explained, exc.code, exc.data)

    async def cancel(self, session_id: str) -> None:
        if self.alive:
            with contextlib.suppress(ConnectionError, OSError):
                await self._requests().notify("session/cancel", {"sessionId": session_id})

    # ------------------------------------------------------------ stopping

    async def stop(self, grace: float = 3.0) -> None:
        """Close stdin, wait `grace` seconds, then terminate, then kill."""
        self.stopping = True
        proc = self._proc
        if proc is None or self.exited.is_set():
            return
        with contextlib.suppress(Exception):
            (self._stdin or proc.stdin).close()  # what is held goes out first
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                proc.signal(sig)
            try:
                await asyncio.wait_for(asyncio.shield(self.exited.wait()), grace)
                break
            except TimeoutError:
                continue
        if self._watcher is not None:
            await asyncio.gather(self._watcher, return_exceptions=True)
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(self._reader, return_exceptions=True), grace)


_STOP_REASONS = frozenset(get_args(s.PromptResponse.model_fields["stop_reason"].annotation))
_USAGE_FIELDS = {str(f.alias or name): f.is_required() for name, f in s.Usage.model_fields.items()}
_USAGE_PLAIN = frozenset(_USAGE_FIELDS) - {"_meta"}  # (integers all)
_USAGE_REQUIRED = [key for key, required in _USAGE_FIELDS.items() if required]


def _outcome(raw: Any) -> PromptOutcome:
    """An answer to session/prompt, as the schema's model reads it (validated, then dumped by
    alias without nulls): read by hand when it is the plain shape (a stop reason the schema knows,
    usage of counts: integers, none below 0), else by the model, which raises as the SDK did for one
    that does not fit (and reads usage that does not fit, an unstable field, as none)."""
    plain = isinstance(raw, dict) and raw.keys() <= {"stopReason", "usage"}
    if plain and raw.get("stopReason") in _STOP_REASONS:
        usage = raw.get("usage")
        if usage is None:
            return PromptOutcome(stop_reason=raw["stopReason"])
        if (
            isinstance(usage, dict)
            and usage.keys() <= _USAGE_PLAIN
            and all(usage.get(key) is not None for key in _USAGE_REQUIRED)
            and all(value is None or (type(value) is int and value >= 0) for value in usage.values())
        ):
            kept = {key: usage[key] for key in _USAGE_FIELDS if usage.get(key) is not None}  # (its order)
            return PromptOutcome(stop_reason=raw["stopReason"], usage=kept)
    response = s.PromptResponse.model_validate(raw)
    usage = _dumped(response.usage) if response.usage is not None else _quota_usage(response.field_meta)
    return PromptOutcome(stop_reason=response.stop_reason, usage=usage)


def _quota_usage(meta: Any) -> dict[str, int] | None:
    """The turn's token counts where gemini-cli gives them: not as `usage`, but in the answer's
    `_meta.quota.token_count` (its model calls' input and output tokens, added up)."""
    quota = meta.get("quota") if isinstance(meta, dict) else None
    counts = quota.get("token_count") if isinstance(quota, dict) else None
    if not isinstance(counts, dict):
        return None
    given, made = counts.get("input_tokens"), counts.get("output_tokens")
    if type(given) is not int or type(made) is not int or given < 0 or made < 0:
        return None
    return {"totalTokens": given + made, "inputTokens": given, "outputTokens": made}


_SETUPS: OrderedDict[bytes, bytes] = OrderedDict()  # a setup as JSON, by the answer it was read from
SETUP_CACHE = 64


def _opened(raw: Any, answer: type[BaseModel]) -> tuple[str, SessionSetup]:
    """An answer to session/new, load, resume or fork: its session id ("" for load and resume,
    which name none) and its setup as `_setup` reads it from the schema's model. An agent tells
    every session it opens the same modes and options: the model reads each answer that differs
    from those before only in its session id once, and each caller gets a fresh copy."""
    data = raw if isinstance(raw, dict) else {}  # (null: the SDK read load's and resume's as {})
    said = data.get("sessionId")
    session_id = said if isinstance(said, str) and said else None
    needs_id = "session_id" in answer.model_fields
    # (In the order the agent wrote it: an agent writes the same answer the same way each time.)
    rest = {k: v for k, v in data.items() if k != "sessionId"}
    key = answer.__name__.encode() + fast_json.dumps(rest)
    known = _SETUPS.get(key)
    if known is None or (needs_id and session_id is None):
        response = answer.model_validate(data)  # raises for an answer that does not fit
        setup = _setup(response)
        _SETUPS[key] = fast_json.dumps([setup.modes, setup.mode, setup.config])
        while len(_SETUPS) > SETUP_CACHE:
            _SETUPS.popitem(last=False)
        return str(getattr(response, "session_id", "")), setup
    _SETUPS.move_to_end(key)
    modes, mode, config = fast_json.loads(known)
    return (session_id or "") if needs_id else "", SessionSetup(modes=modes, mode=mode, config=config)


def _setup(response: Any) -> SessionSetup:
    setup = SessionSetup()
    if response is None:
        return setup
    modes = getattr(response, "modes", None)
    if modes is not None:
        setup.modes = [_dumped(mode) for mode in modes.available_modes]
        setup.mode = modes.current_mode_id
    for option in getattr(response, "config_options", None) or []:
        setup.config[option.id] = _dumped(option)
    return setup
