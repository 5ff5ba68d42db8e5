"""An agent may speak of a session before the daemon has read the answer that names it: Claude
Code sends its slash commands right after answering session/new, and both can come in one read,
where the update is handled first. The host keeps such updates until the core knows the id.

End to end this is tests/acp_face/test_acp_face_claude.py (Claude Code's commands reach the
editor); here the host on its own, with a recording activity, for the order and the bounds."""

from __future__ import annotations

from typing import Any

from sessiond.daemon.agent_host import EARLY_SESSIONS, EARLY_UPDATES, AgentHost
from sessiond.daemon.records import SessionRecord
from sessiond.protocol.models import SessionStatus


class _Heard:
    def __init__(self) -> None:
        self.updates: list[tuple[str, str, Any]] = []

    def on_update(self, session: SessionRecord, kind: str, payload: dict[str, Any]) -> None:
        self.updates.append((session.id, kind, payload))


def _host(sessions: dict[tuple[str, str], SessionRecord], heard: _Heard) -> AgentHost:
    async def ask(*args: Any) -> str | None:
        return None

    return AgentHost(
        "claude",
        options=None,
        sessions=sessions,
        activity=heard,  # type: ignore[arg-type]  # (only on_update is heard here)
        request_permission=ask,
        may_write=lambda session: True,
        watched=lambda: False,
    )


def _session(session_id: str) -> SessionRecord:
    return SessionRecord(
        id=session_id,
        ordinal=1,
        agent="claude",
        root="/tmp",
        placement="here",
        title=None,
        status=SessionStatus.IDLE,
        status_since=0.0,
        created_at=0.0,
    )


def test_updates_before_the_id_is_known_reach_the_session_once_it_is_in_order() -> None:
    sessions: dict[tuple[str, str], SessionRecord] = {}
    heard = _Heard()
    host = _host(sessions, heard)
    host.on_update("agent-1", "available_commands_update", {"n": 1})
    host.on_update("agent-1", "current_mode_update", {"n": 2})
    assert heard.updates == []  # nobody to tell yet
    sessions[("claude", "agent-1")] = _session("s1")
    host.known("agent-1")
    host.on_update("agent-1", "usage_update", {"n": 3})
    assert heard.updates == [
        ("s1", "available_commands_update", {"n": 1}),
        ("s1", "current_mode_update", {"n": 2}),
        ("s1", "usage_update", {"n": 3}),
    ]
    host.known("agent-1")  # told once: nothing is kept any more
    assert len(heard.updates) == 3


def test_what_is_kept_of_unknown_ids_is_bounded() -> None:
    sessions: dict[tuple[str, str], SessionRecord] = {}
    heard = _Heard()
    host = _host(sessions, heard)
    host.on_update("first", "usage_update", {})
    for n in range(EARLY_SESSIONS + 5):
        host.on_update(f"never-opened-{n}", "usage_update", {})
    sessions[("claude", "first")] = _session("s1")
    host.known("first")
    assert heard.updates == []  # the oldest id was let go to make room for newer ones
    sessions[("claude", "never-opened-10")] = _session("s2")
    host.known("never-opened-10")
    assert heard.updates == [("s2", "usage_update", {})]


def test_a_chatty_unknown_session_keeps_only_its_first_updates() -> None:
    sessions: dict[tuple[str, str], SessionRecord] = {}
    heard = _Heard()
    host = _host(sessions, heard)
    for n in range(EARLY_UPDATES + 10):
        host.on_update("chatty", "agent_message_chunk", {"n": n})
    sessions[("claude", "chatty")] = _session("s1")
    host.known("chatty")
    assert [payload["n"] for _, _, payload in heard.updates] == list(range(EARLY_UPDATES))
