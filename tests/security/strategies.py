"""Hypothesis strategies for what a hostile or broken client may send the daemon.

Shared by tests/security/test_fuzz.py and `python -m bench.fuzz` (`./dev fuzz`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from sessiond.protocol.methods import DAEMON_STOP, METHODS, SESSION_OPEN
from tests.security.wire import RawJson, dump

MODES = ("unix", "unix-noinit", "tcp", "tcp-notoken")
METHOD_NAMES = sorted(METHODS)

# ------------------------------------------------------------------ JSON values

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
huge_strings = st.builds(
    lambda size, char: char * size,
    st.sampled_from([5_000, 70_000, 300_000]),
    st.sampled_from(["a", "é", "\u2028", "\x00", "😀", "\\", '"']),
)


def _deep(depth: int, kind: str) -> RawJson:
    if kind == "list":
        return RawJson("[" * depth + "]" * depth)
    return RawJson('{"a":' * depth + "1" + "}" * depth)


deep_values = st.builds(
    _deep, st.sampled_from([64, 1_000, 5_000, 100_000]), st.sampled_from(["list", "dict"])
)
big_numbers = st.builds(
    lambda digits, sign: RawJson(sign + "9" * digits),
    st.sampled_from([20, 400, 5_000]),
    st.sampled_from(["", "-"]),
)
odd_values = json_values | huge_strings | deep_values | big_numbers

# ------------------------------------------------------------------ ids


@dataclass(frozen=True)
class Id:
    """A request id as sent, and whether a client could match a response to it."""

    value: Any
    usable: bool

    def __repr__(self) -> str:
        return f"Id({self.value!r})"


usable_ids = st.builds(
    lambda v: Id(v, True),
    st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=40),
)
odd_ids = st.builds(
    lambda v: Id(v, False),
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(json_scalars, max_size=3)
    | st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)
    | big_numbers
    | st.just(RawJson("NaN"))
    | st.just(RawJson("1e400")),
)

# ------------------------------------------------------------------ params per method

# A plausible value for each required field, by its wire name: params that get past the
# first check and reach the handler (which must then refuse them properly).
PLAUSIBLE: dict[str, Any] = {
    "name": "fz-nobody",
    "command": ["true"],
    "session": "s-nobody",
    "prompt": "hello",
    "title": "a title",
    "task": "k-nobody",
    "reason": "not now",
    "parent": "s-nobody",
    "thread": "s-nobody",
    "threads": ["s-nobody"],
    "outcome": "failed",
    "cwd": "/tmp",
    "run": "r-nobody",
    "permission": "p-nobody",
    "optionId": None,
    "subscription": "sub-nobody",
}


def wire_fields(model: type[BaseModel]) -> dict[str, bool]:
    """Wire name -> required, for a params model."""
    return {(f.alias or name): f.is_required() for name, f in model.model_fields.items()}


def plausible(method: str) -> dict[str, Any]:
    fields = wire_fields(METHODS[method].params)
    return {name: PLAUSIBLE.get(name, "x") for name, required in fields.items() if required}


MUTATIONS = ("plausible", "missing", "wrong-type", "unknown-field", "huge", "deep", "not-an-object", "absent")


@st.composite
def params_for(draw: st.DrawFn, method: str) -> tuple[str, Any]:
    """(mutation, params); params `...` (Ellipsis) means the key is left out."""
    mutation = draw(st.sampled_from(MUTATIONS))
    base = plausible(method)
    names = sorted(wire_fields(METHODS[method].params)) or ["x"]
    if mutation == "plausible":
        return mutation, base
    if mutation == "absent":
        return mutation, ...
    if mutation == "not-an-object":
        return mutation, draw(json_scalars | st.lists(json_values, max_size=3) | huge_strings)
    if mutation == "missing":
        drop = draw(st.sets(st.sampled_from(sorted(base) or ["x"]), min_size=1))
        return mutation, {k: v for k, v in base.items() if k not in drop}
    if mutation == "unknown-field":
        extra = draw(
            st.dictionaries(
                st.text(max_size=12).filter(lambda k: k not in names), odd_values, min_size=1, max_size=3
            )
        )
        return mutation, {**base, **extra}
    target = draw(st.sampled_from(names))
    value = {"wrong-type": json_values, "huge": huge_strings, "deep": deep_values}[mutation]
    return mutation, {**base, target: draw(value)}


def locally_valid(method: str, params: Any) -> bool | None:
    """Whether the method's own model takes `params`; None when Python cannot even read them."""
    import json

    if params is ...:
        params = None
    try:
        value = json.loads(dump(params))
    except (RecursionError, ValueError):
        return None
    try:
        METHODS[method].params.model_validate({} if value is None else value)
    except ValidationError:
        return False
    except (RecursionError, ValueError, TypeError):
        return None
    return True


def harmful(method: str, params: Any) -> bool:
    """Valid requests the fuzzer must not send: they would stop the daemon or flood it, by design."""
    if locally_valid(method, params) is False:
        return False
    if method == DAEMON_STOP:
        return True
    return method == SESSION_OPEN and isinstance(params, dict) and params.get("count", 1) != 1


# ------------------------------------------------------------------ whole messages


@dataclass
class Message:
    """One frame's worth: a JSON-RPC message (maybe broken) and what the daemon owes for it."""

    mode: str
    body: dict[str, Any]
    id: Id
    method: Any
    note: str
    expect_code: frozenset[int] | None = None  # the codes allowed, when the input decides it
    extreme: bool = False  # Python cannot parse it: the daemon may answer with id null
    params: Any = field(default=...)

    def encoded(self) -> bytes:
        return dump(self.body).encode("utf-8", "surrogatepass")

    def __repr__(self) -> str:
        text = dump(self.body)
        if len(text) > 300:
            text = text[:200] + f"...({len(text)} chars)..." + text[-60:]
        return f"Message(mode={self.mode!r}, note={self.note!r}, body={text})"


def _has_extreme(value: Any) -> bool:
    if isinstance(value, RawJson):
        return True
    if isinstance(value, dict):
        return any(_has_extreme(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_extreme(v) for v in value)
    return False


@st.composite
def table_messages(draw: st.DrawFn, modes: tuple[str, ...] = MODES) -> Message:
    """Requests of every method of the table, with params that mostly do not fit."""
    mode = draw(st.sampled_from(modes))
    method = draw(st.sampled_from(METHOD_NAMES))
    mutation, params = draw(params_for(method))
    msg_id = draw(usable_ids | odd_ids)
    if harmful(method, params):
        params = {**(params if isinstance(params, dict) else {}), "fuzzUnknownField": 1}
        mutation += "+unknown"
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    body["id"] = msg_id.value
    body["method"] = method
    if params is not ...:
        body["params"] = params
    expect: frozenset[int] | None = None
    gated = mode in ("unix-noinit", "tcp-notoken")
    valid = locally_valid(method, params)
    if gated:
        # Params neither object nor array make it no Request at all: Invalid Request may come first.
        structured = isinstance(params, dict | list) or params is ...
        expect = frozenset({-32002, -33010} if structured else {-32002, -33010, -32600})
    elif valid is False:
        expect = (
            frozenset({-32602, -32600}) if not isinstance(params, dict | type(None)) else frozenset({-32602})
        )
    return Message(
        mode,
        body,
        msg_id,
        method,
        f"{method} {mutation}",
        expect,
        extreme=_has_extreme(params) or isinstance(msg_id.value, RawJson),
        params=params,
    )


@st.composite
def envelope_messages(draw: st.DrawFn) -> Message:
    """The envelope itself broken: odd ids, jsonrpc missing or wrong, method not a string or unknown."""
    mode = draw(st.sampled_from(MODES))
    msg_id = draw(usable_ids | odd_ids)
    fault = draw(
        st.sampled_from(
            ["id", "jsonrpc-missing", "jsonrpc-wrong", "method-not-string", "method-unknown", "extra"]
        )
    )
    method: Any = draw(st.sampled_from([*METHOD_NAMES, "initialize", "shutdown", "$/cancelRequest"]))
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id.value, "method": method, "params": {}}
    expect: frozenset[int] | None = None
    gated = mode in ("unix-noinit", "tcp-notoken")
    if fault == "jsonrpc-missing":
        del body["jsonrpc"]
        expect = frozenset({-32600})
    elif fault == "jsonrpc-wrong":
        body["jsonrpc"] = draw(st.sampled_from(["1.0", "2", "2.0 ", 2.0, None, ["2.0"]]))
        expect = frozenset({-32600})
    elif fault == "method-not-string":  # (or the empty string: no method at all)
        body["method"] = method = draw(json_values.filter(lambda v: not isinstance(v, str)) | st.just(""))
        expect = frozenset({-32600})
    elif fault == "method-unknown":
        body["method"] = method = draw(
            st.text(min_size=1, max_size=30).filter(
                lambda s: s not in METHODS and s not in ("initialize", "shutdown", "exit")
            )
            | st.sampled_from(
                ["textDocument/didOpen", "workspace/executeCommand", "$/setTrace", "Agent/Create"]
            )
        )
        expect = frozenset({-32002, -33010, -32601}) if gated else frozenset({-32601})
    elif fault == "extra":
        body[draw(st.sampled_from(["result", "error", "params2"]))] = draw(json_values)
    if method in ("initialize", "shutdown") or method == DAEMON_STOP:
        # initialize has its own rules; shutdown ends the connection's use; stop would stop the daemon.
        body["method"] = method = "daemon/status"
    if fault in ("id", "extra"):
        expect = frozenset({-32002, -33010}) if gated else None
        if method == "$/cancelRequest":
            expect = None
    return Message(
        mode, body, msg_id, method, f"envelope {fault}", expect, extreme=isinstance(msg_id.value, RawJson)
    )


# ------------------------------------------------------------------ broken framing


@dataclass
class Framing:
    mode: str
    data: bytes
    eof: bool  # half-close after sending: the daemon must close promptly
    note: str

    def __repr__(self) -> str:
        data = self.data if len(self.data) <= 200 else self.data[:150] + b"..." + self.data[-40:]
        return f"Framing(mode={self.mode!r}, note={self.note!r}, eof={self.eof}, data={data!r})"


GOOD_BODY = b'{"jsonrpc":"2.0","id":"fz-inner","method":"daemon/status"}'


@st.composite
def framings(draw: st.DrawFn) -> Framing:
    mode = draw(st.sampled_from(MODES))
    fault = draw(
        st.sampled_from(
            [
                "no-length",
                "duplicate-length",
                "non-numeric-length",
                "length-too-large-eof",
                "length-too-small",
                "garbage",
                "header-no-newline",
                "lf-only",
                "zero-length",
                "bad-body",
                "huge-length",
                "long-header-line",
            ]
        )
    )
    body = GOOD_BODY
    eof = draw(st.booleans())
    if fault == "no-length":
        data = b"Content-Type: application/json\r\n\r\n" + body
    elif fault == "duplicate-length":
        a, b = draw(st.sampled_from([(len(body), len(body)), (len(body), 5), (5, len(body)), (len(body), 0)]))
        data = b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (a, b) + body
    elif fault == "non-numeric-length":
        value = draw(
            st.sampled_from(
                [b"abc", b"-5", b"1e3", b"0x10", b"\xef\xbc\x95\xef\xbc\x98", b"", b"12 34", b"+58"]
            )
            | st.binary(max_size=10).filter(lambda v: b"\n" not in v and not v.strip().isdigit())
        )
        data = b"Content-Length: " + value + b"\r\n\r\n" + body
    elif fault == "length-too-large-eof":
        data = b"Content-Length: %d\r\n\r\n" % (len(body) + draw(st.integers(1, 10_000))) + body
        eof = True
    elif fault == "length-too-small":
        data = b"Content-Length: %d\r\n\r\n" % draw(st.integers(0, len(body) - 1)) + body
    elif fault == "garbage":
        data = draw(st.binary(min_size=1, max_size=300))
    elif fault == "header-no-newline":
        data = draw(st.sampled_from([b"Content-Length: 57", b"X-Junk: 1", b"garbage"]))
    elif fault == "lf-only":
        data = b"Content-Length: %d\n\n" % len(body) + body
    elif fault == "zero-length":
        data = b"Content-Length: 0\r\n\r\n"
    elif fault == "bad-body":
        bad = draw(
            st.sampled_from(
                [
                    b"\xff\xfe\x00",
                    b"{",
                    b"[]",
                    b"null",
                    b"1",
                    b'"x"',
                    b"{}",
                    b'{"jsonrpc":"2.0","id":NaN,"method":"daemon/status"}',
                ]
            )
            | st.binary(max_size=50)
        )
        data = b"Content-Length: %d\r\n\r\n" % len(bad) + bad
    elif fault == "huge-length":
        data = (
            b"Content-Length: "
            + draw(st.sampled_from([b"99999999999", b"9" * 5000, b"67108865"]))
            + b"\r\n\r\n"
        )
    else:  # long-header-line
        data = (
            b"X-Long: "
            + b"a" * draw(st.sampled_from([70_000, 300_000]))
            + draw(st.sampled_from([b"", b"\r\n"]))
        )
    return Framing(mode, data, eof, fault)


# ------------------------------------------------------------------ notifications that would change things

# Valid params for each method; $SESSION, $TASK, $AGENT, $ROOT, $N are filled in at run time
# with live objects of the daemon under test, so a notification that is wrongly acted on shows.
NOTIFY: dict[str, list[dict[str, Any]]] = {
    "agent/create": [{"name": "fz-made-$N", "command": ["true"]}],
    "agent/list": [{}],
    "agent/get": [{"name": "$AGENT"}],
    "agent/update": [
        {"name": "$AGENT", "options": {"maxActiveTurns": 7}},
        {"name": "$AGENT", "command": ["false"]},
    ],
    "agent/remove": [{"name": "$AGENT"}],
    "session/open": [{"root": "$ROOT", "title": "fz-notified"}],
    "session/list": [{}],
    "session/get": [{"session": "$SESSION"}],
    "session/prompt": [{"session": "$SESSION", "prompt": "hello"}],
    "session/cancel": [{"session": "$SESSION"}],
    "session/close": [{"session": "$SESSION"}],
    "session/reopen": [{"session": "$SESSION"}],
    "session/prune": [{"closedBefore": "2000-01-01T00:00:00Z", "dryRun": True}],
    "session/transcript": [{"session": "$SESSION"}],
    "session/controls": [{"session": "$SESSION"}],
    "session/setMode": [{"session": "$SESSION", "mode": "plan"}],
    "session/rename": [{"session": "$SESSION", "title": "renamed"}],
    "session/setConfigOption": [{"session": "$SESSION", "configId": "model", "value": "demo-large"}],
    "fleet/summary": [{}],
    "session/side": [{"session": "$SESSION"}],
    "session/tree": [{"session": "$SESSION"}],
    "session/broadcast": [{"prompt": "hello", "sessions": ["$SESSION"]}],
    "task/suggest": [{"agent": "demo", "title": "fz", "prompt": "do it", "root": "$ROOT"}],
    "task/list": [{}],
    "task/accept": [{"task": "$TASK"}],
    "task/dismiss": [{"task": "$TASK", "reason": "fuzzed"}],
    "thread/start": [{"parent": "$SESSION", "prompt": "hello", "placement": "here"}],
    "thread/status": [{"thread": "$SESSION"}],
    "thread/wait": [{"threads": ["$SESSION"], "timeout": 0.01}],
    "merge/request": [{"session": "$SESSION"}],
    "merge/list": [{}],
    "run/declare": [{"name": "fz-run", "cwd": "/tmp"}],
    "run/end": [{"outcome": "failed"}],
    "run/list": [{}],
    "run/get": [{"run": "r-nobody"}],
    "permission/list": [{}, {"session": "$SESSION"}],
    "permission/answer": [{"permission": "p-nobody", "optionId": None}],
    "events/subscribe": [{"snapshot": True}],
    "events/unsubscribe": [{"subscription": "sub-nobody"}],
    "daemon/status": [{}],
    "daemon/stop": [{}],
}
assert set(NOTIFY) == set(METHODS), set(METHODS) ^ set(NOTIFY)


@dataclass
class Notice:
    mode: str
    method: str
    params: Any  # a template (see NOTIFY) or fuzzed params; ... leaves the key out
    note: str


@st.composite
def notifications(draw: st.DrawFn) -> Notice:
    mode = draw(st.sampled_from(MODES))
    method = draw(st.sampled_from(METHOD_NAMES))
    if draw(st.integers(0, 3)) == 0:
        mutation, params = draw(params_for(method))
        return Notice(mode, method, params, f"{method} {mutation}")
    return Notice(mode, method, draw(st.sampled_from(NOTIFY[method])), f"{method} valid")
