"""The common shapes of an agent's updates are read without pydantic: what that gives must be
what validating them with the schema's models gives, key order included, and anything else must
still go the whole way (validated, else salvaged field by field).

Pure: `read_update` against `_read_validated` (the models' reading), on shapes chosen by hand and
drawn by hypothesis, well formed and not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiond.daemon.acp_backend import _fast_payload, _read_validated, read_update


def _same(raw: dict[str, Any]) -> dict[str, Any] | None:
    """Read both ways; they agree, key order included. The fast payload (None: none)."""
    fast = read_update(raw)
    full = _read_validated(raw["sessionUpdate"], raw)
    assert (fast.kind, fast.unreadable) == (full.kind, full.unreadable)
    assert json.dumps(fast.payload) == json.dumps(full.payload)
    return _fast_payload(raw["sessionUpdate"], raw)


COMMON = [
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}},
    {"sessionUpdate": "agent_thought_chunk", "content": {"text": "hmm", "type": "text"}},
    {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": ""}, "messageId": "m1"},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}, "messageId": None},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lone \ud800 é ☃"}},
    {"sessionUpdate": "usage_update", "used": 3, "size": 200000},
    {
        "sessionUpdate": "usage_update",
        "used": 3,
        "size": 200000,
        "cost": {"amount": 9e-06, "currency": "USD"},
    },
    {"sessionUpdate": "usage_update", "used": 0, "size": 0, "cost": None},
    {"sessionUpdate": "plan", "entries": []},
    {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "read", "priority": "high", "status": "completed"},
            {"status": "in_progress", "priority": "low", "content": "fix"},
        ],
    },
    {
        "sessionUpdate": "tool_call",
        "toolCallId": "t1",
        "title": "Edit a",
        "kind": "edit",
        "status": "pending",
    },
    {"sessionUpdate": "tool_call", "title": "Run", "toolCallId": "t2"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": None, "kind": "execute"},
    {"sessionUpdate": "tool_call_update", "status": "in_progress", "toolCallId": "t1", "title": "Run"},
]


@pytest.mark.parametrize("raw", COMMON, ids=lambda raw: raw["sessionUpdate"])
def test_the_common_shapes_are_read_fast_as_the_models_read_them(raw: dict[str, Any]) -> None:
    assert _same(raw) is not None


MALFORMED = [
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": None}},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": 5}},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi", "annotations": 5}},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "data": "x", "mimeType": "a/b"}},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}},
    {"sessionUpdate": "agent_message_chunk"},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}, "messageId": 7},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}, "_meta": {"a": 1}},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}, "somethingNew": 1},
    {
        "sessionUpdate": "usage_update",
        "used": None,
        "size": 200000,
        "cost": {"amount": 1e-4, "currency": "USD"},
    },
    {"sessionUpdate": "usage_update", "used": 5, "size": "big"},
    {"sessionUpdate": "usage_update", "used": True, "size": 10},
    {"sessionUpdate": "usage_update", "used": 5.0, "size": 10},
    {"sessionUpdate": "usage_update", "used": "5", "size": 10},
    {"sessionUpdate": "usage_update", "used": 5, "size": 10, "cost": {"amount": 1, "currency": "USD"}},
    {
        "sessionUpdate": "usage_update",
        "used": 5,
        "size": 10,
        "cost": {"amount": float("nan"), "currency": "X"},
    },
    {
        "sessionUpdate": "usage_update",
        "used": 5,
        "size": 10,
        "cost": {"amount": float("inf"), "currency": "X"},
    },
    {"sessionUpdate": "usage_update", "used": 5, "size": 10, "cost": {"amount": 0.5}},
    {"sessionUpdate": "usage_update", "used": 5, "size": 10, "cost": "free"},
    {"sessionUpdate": "plan", "entries": None},
    {"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "urgent", "status": "pending"}]},
    {"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high"}]},
    {"sessionUpdate": "plan", "entries": [{"content": 1, "priority": "high", "status": "pending"}]},
    {"sessionUpdate": "plan", "entries": "a, b"},
    {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit a", "kind": "edit", "status": "weird"},
    {"sessionUpdate": "tool_call", "toolCallId": "t1"},
    {"sessionUpdate": "tool_call", "toolCallId": 1, "title": "x"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "kind": "spells"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "locations": [{"path": "/a"}]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "content": [{"type": "diff", "path": "/a"}]},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "rawInput": {"command": "ls"}},
    {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
    {"sessionUpdate": "brand_new_kind", "x": 1},
]


@pytest.mark.parametrize("raw", MALFORMED, ids=lambda raw: raw["sessionUpdate"])
def test_other_shapes_go_the_whole_way(raw: dict[str, Any]) -> None:
    assert _same(raw) is None


_TEXT = st.text(max_size=8)
_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    _TEXT,
    st.sampled_from(["text", "high", "low", "pending", "completed", "in_progress", "edit", "failed"]),
    st.lists(st.integers(), max_size=2),
)
_TEXT_BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
    st.dictionaries(st.sampled_from(["type", "text", "annotations", "_meta"]), _VALUES, max_size=3),
)
_COST = st.one_of(
    st.fixed_dictionaries({"amount": st.floats(), "currency": _TEXT}),
    st.dictionaries(st.sampled_from(["amount", "currency", "_meta"]), _VALUES, max_size=3),
)
_ENTRY = st.one_of(
    st.fixed_dictionaries(
        {
            "content": _TEXT,
            "priority": st.sampled_from(["high", "medium", "low", "urgent"]),
            "status": st.sampled_from(["pending", "in_progress", "completed", "cancelled"]),
        }
    ),
    st.dictionaries(st.sampled_from(["content", "priority", "status", "_meta"]), _VALUES, max_size=4),
)
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "content": st.one_of(_TEXT_BLOCK, _VALUES),
    "messageId": st.one_of(_TEXT, _VALUES),
    "used": st.one_of(st.integers(), _VALUES),
    "size": st.one_of(st.integers(), _VALUES),
    "cost": st.one_of(_COST, _VALUES),
    "entries": st.one_of(st.lists(_ENTRY, max_size=3), _VALUES),
    "toolCallId": st.one_of(_TEXT, _VALUES),
    "title": st.one_of(_TEXT, _VALUES),
    "kind": st.one_of(st.sampled_from(["read", "edit", "execute", "think", "other", "magic"]), _VALUES),
    "status": st.one_of(st.sampled_from(["pending", "in_progress", "completed", "failed", "x"]), _VALUES),
    "_meta": st.one_of(st.none(), st.dictionaries(_TEXT, _VALUES, max_size=2)),
    "locations": st.one_of(st.none(), st.lists(st.fixed_dictionaries({"path": _TEXT}), max_size=2)),
    "somethingNew": _VALUES,
}
_KINDS = {
    "agent_message_chunk": ["content", "messageId", "_meta", "somethingNew"],
    "agent_thought_chunk": ["content", "messageId", "_meta"],
    "user_message_chunk": ["content", "messageId"],
    "usage_update": ["used", "size", "cost", "_meta", "somethingNew"],
    "plan": ["entries", "_meta", "somethingNew"],
    "tool_call": ["toolCallId", "title", "kind", "status", "locations", "_meta"],
    "tool_call_update": ["toolCallId", "title", "kind", "status", "locations", "somethingNew"],
}


@st.composite
def updates(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(_KINDS)))
    names = draw(st.lists(st.sampled_from(_KINDS[kind]), unique=True, max_size=len(_KINDS[kind])))
    # The fields a kind needs, mostly there: else nearly every draw would be malformed.
    needed = {"content"} if "chunk" in kind else {"used", "size"} if kind == "usage_update" else set()
    needed |= {"entries"} if kind == "plan" else {"toolCallId"} if kind.startswith("tool_call") else set()
    needed |= {"title"} if kind == "tool_call" else set()
    if draw(st.integers(0, 4)):
        names = [*needed, *(n for n in names if n not in needed)]
    raw = {name: draw(_FIELDS[name]) for name in names}
    raw["sessionUpdate"] = kind
    return raw


@settings(max_examples=400, deadline=None)
@given(updates())
def test_drawn_updates_read_fast_as_the_models_read_them(raw: dict[str, Any]) -> None:
    _same(raw)
