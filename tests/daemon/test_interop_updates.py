"""Agents' updates that do not fit ACP's schema are read field by field, never dropped whole.

Pure: `read_update` and the per-agent reader that counts and logs them (once
per agent and kind), and the auth methods as the daemon reads them; the real
agents' shapes are in test_interop_claude.py and test_interop_codex.py.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from acp import schema as s

from sessiond.daemon.acp_backend import _auth_method, _Updates, read_update


def test_a_null_where_a_number_is_expected_keeps_the_rest() -> None:
    # claude-agent-acp 0.23.1 when the API's usage has no cache fields.
    read = read_update(
        {
            "sessionUpdate": "usage_update",
            "used": None,
            "size": 200000,
            "cost": {"amount": 0.000105, "currency": "USD"},
        }
    )
    assert read.kind == "usage_update"
    assert read.payload == {
        "sessionUpdate": "usage_update",
        "size": 200000,
        "cost": {"amount": 0.000105, "currency": "USD"},
    }
    assert read.unreadable == ["used: null or missing"]


def test_a_well_formed_update_is_read_whole_and_extra_fields_are_no_fault() -> None:
    read = read_update({"sessionUpdate": "usage_update", "used": 5, "size": 10, "somethingNew": 1})
    assert read.payload == {"sessionUpdate": "usage_update", "used": 5, "size": 10}
    assert read.unreadable == []


def test_a_wrong_type_inside_is_dropped_alone() -> None:
    read = read_update({"sessionUpdate": "usage_update", "used": 5, "size": "big"})
    assert read.payload == {"sessionUpdate": "usage_update", "used": 5}
    assert [u.split(":")[0] for u in read.unreadable] == ["size"]
    read = read_update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi", "annotations": 5}}
    )
    assert read.payload is not None
    assert read.payload["content"]["text"] == "hi"


def test_an_unknown_enum_value_is_dropped_and_the_rest_kept() -> None:
    read = read_update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Edit a",
            "kind": "edit",
            "status": "weird",
        }
    )
    assert read.payload is not None
    assert read.payload["toolCallId"] == "t1"
    assert read.payload["kind"] == "edit"
    assert "status" not in read.payload


def test_what_cannot_be_read_at_all_is_named() -> None:
    assert read_update({"sessionUpdate": "brand_new_kind"}).payload is None
    assert read_update("not an object").payload is None
    read = read_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": None}})
    assert read.payload == {"sessionUpdate": "agent_message_chunk"}
    assert read.unreadable


class Host:
    def __init__(self) -> None:
        self.updates: list[tuple[str, str, dict[str, Any]]] = []

    def on_update(self, agent_session_id: str, kind: str, payload: dict[str, Any]) -> None:
        self.updates.append((agent_session_id, kind, payload))


def test_malformed_updates_are_counted_and_logged_once_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    host = Host()
    updates = _Updates("claude", host)  # type: ignore[arg-type]
    usage = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a","update":'
    usage += (
        b'{"sessionUpdate":"usage_update","used":null,"size":200000,"cost":{"amount":1,"currency":"USD"}}}}'
    )
    chunk = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"a","update":'
    chunk += b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}'
    with caplog.at_level(logging.WARNING, logger="sessiond.acp"):
        for line in (usage, chunk, usage, usage):
            assert updates.take(json.loads(line))
        assert not updates.take({"jsonrpc": "2.0", "id": 3, "result": {}})  # a response: not an update
    assert updates.malformed == 3
    assert [kind for _, kind, _ in host.updates] == ["usage_update", "agent_message_chunk"] + [
        "usage_update"
    ] * 2
    assert host.updates[0][2]["cost"] == {"amount": 1, "currency": "USD"}
    warnings = [r for r in caplog.records if "does not fit" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].exc_info is None  # a sentence, not a traceback


def test_env_var_auth_methods_are_satisfied_by_the_agents_env() -> None:
    key = s.EnvVarAuthMethod(
        type="env_var",
        id="openai-api-key",
        name="Use OPENAI_API_KEY",
        vars=[s.AuthEnvVar(name="OPENAI_API_KEY")],
    )
    login = s.AuthMethodAgent(id="chatgpt", name="Login with ChatGPT")
    assert _auth_method(key, {"OPENAI_API_KEY": "sk-1"})["satisfied"] is True
    assert _auth_method(key, {"OPENAI_API_KEY": ""})["satisfied"] is False
    assert _auth_method(key, {})["satisfied"] is False
    agent = _auth_method(login, {"OPENAI_API_KEY": "sk-1"})
    assert (agent["type"], agent["satisfied"]) == ("agent", False)
