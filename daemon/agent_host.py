"""What one agent's process may ask of the daemon: its sessions' files and terminals.

Every call names a session by the agent's own id and is carried out at that
session's placement, which confines paths to the session's root; any failure
becomes a `ClientError` the agent reads as a sentence.

The core makes one per agent process and hands it what it needs: the sessions by
the agent's ids, where the session's work is told (`Activity`, the insight feed),
who decides a permission (`Permissions.request`) and whether a session may write
(`Around.may_write`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol

from sessiond.daemon.agent_types import ClientError, TerminalResult
from sessiond.daemon.child_env import DEFAULT_RULES, EnvRules, child_environment, rules_for_commands
from sessiond.daemon.placements import Placement, PlacementError
from sessiond.daemon.records import SessionRecord
from sessiond.protocol import models as m


class Activity(Protocol):
    """Where the host tells what a session's agent reports and does (`InsightFeed` is one)."""

    def on_update(self, session: SessionRecord, kind: str, payload: dict[str, Any]) -> None: ...
    def touched(self, session: SessionRecord) -> None: ...
    def wrote(self, session: SessionRecord, real_path: str, host: str | None) -> None: ...
    async def command_started(self, session: SessionRecord, key: str) -> None: ...
    async def tool_allowed(self, session: SessionRecord, tool_call: dict[str, Any]) -> None: ...
    def command_ended(self, session: SessionRecord, key: str) -> None: ...
    def command_renamed(self, session: SessionRecord, key: str, new_key: str) -> None: ...


# Updates of a session id the daemon does not know yet are kept for this many ids, this many each.
EARLY_SESSIONS = 64
EARLY_UPDATES = 256

# Decides an agent's permission request (by policy, or by asking a person): the option chosen.
RequestPermission = Callable[[SessionRecord, dict[str, Any], list[dict[str, Any]]], Awaitable[str | None]]


@contextlib.contextmanager
def _as_client_error() -> Iterator[None]:
    try:
        yield
    except PlacementError as exc:
        raise ClientError(str(exc)) from None


class AgentHost:
    def __init__(
        self,
        agent: str,
        *,
        options: m.AgentOptions | None,
        sessions: Mapping[tuple[str, str], SessionRecord],
        activity: Activity,
        request_permission: RequestPermission,
        may_write: Callable[[SessionRecord], bool],
        watched: Callable[[], bool],
    ) -> None:
        self._agent = agent
        self.watched = watched
        self._sessions = sessions  # by (agent, the agent's session id)
        self._activity = activity
        self._request_permission = request_permission
        self._may_write = may_write
        # One host per agent process: the environment rules it starts with hold for its terminals too.
        self.env_rules = EnvRules.of(options) if options is not None else DEFAULT_RULES
        self._early: dict[str, list[tuple[str, dict[str, Any]]]] = {}  # updates of ids not known yet

    def child_environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        return child_environment(extra, self.env_rules)

    def _session(self, agent_session_id: str) -> SessionRecord:
        session = self._sessions.get((self._agent, agent_session_id))
        if session is None:
            raise ClientError(f"unknown session id {agent_session_id!r}")
        return session

    def _placement(self, agent_session_id: str) -> tuple[SessionRecord, Placement]:
        session = self._session(agent_session_id)
        if session.runtime is None:
            raise ClientError(f"session {session.id!r} has no running turn")
        return session, session.runtime.placement

    def on_update(self, agent_session_id: str, kind: str, payload: dict[str, Any]) -> None:
        session = self._sessions.get((self._agent, agent_session_id))
        if session is not None:
            self._activity.on_update(session, kind, payload)
            return
        # An agent may speak of a session before the daemon has read the answer that names it
        # (its commands, right after answering session/new): kept, for `known`, within bounds.
        early = self._early.get(agent_session_id)
        if early is None:
            if len(self._early) >= EARLY_SESSIONS:
                del self._early[next(iter(self._early))]  # the oldest: a session nobody opened
            early = self._early[agent_session_id] = []
        if len(early) < EARLY_UPDATES:
            early.append((kind, payload))

    def known(self, agent_session_id: str) -> None:
        for kind, payload in self._early.pop(agent_session_id, ()):
            self.on_update(agent_session_id, kind, payload)

    async def request_permission(
        self, agent_session_id: str, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> str | None:
        session = self._session(agent_session_id)
        chosen = await self._request_permission(session, tool_call, options)
        allowed = {str(o.get("optionId")) for o in options if str(o.get("kind", "")).startswith("allow")}
        if chosen is not None and chosen in allowed:
            # The tool runs once the agent reads the answer. Some agents (gemini-cli) announce a
            # tool they ask about only in the request, never in a `tool_call` first.
            await self._activity.tool_allowed(session, tool_call)
        return chosen

    async def read_text_file(
        self, agent_session_id: str, path: str, line: int | None, limit: int | None
    ) -> str:
        _, placement = self._placement(agent_session_id)
        with _as_client_error():
            text = await placement.read_text(path)
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        return "".join(lines[start : start + limit if limit is not None else None])

    def _refuse_writes(self, session: SessionRecord) -> None:
        if not self._may_write(session):
            raise ClientError(
                f"session {session.id} is a side chat: it may read files, not change them or run commands"
            )

    async def write_text_file(self, agent_session_id: str, path: str, content: str) -> None:
        session, placement = self._placement(agent_session_id)
        self._refuse_writes(session)
        with _as_client_error():
            real = await placement.write_text(path, content)
        self._activity.wrote(session, real, placement.host)

    async def create_terminal(
        self,
        agent_session_id: str,
        command: str,
        args: list[str],
        env: dict[str, str],
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str:
        session, placement = self._placement(agent_session_id)
        self._refuse_writes(session)
        self._activity.touched(session)
        # In a shared working copy, what changes while it runs is counted as the session's.
        window = f"pending:{id(object())}"
        await self._activity.command_started(session, window)
        try:
            # The command gets the daemon's environment as the agent's rules filter it, plus `env`.
            with _as_client_error(), rules_for_commands(self.env_rules):
                terminal_id = await placement.create_terminal(command, args, env, cwd, output_byte_limit)
        except BaseException:
            self._activity.command_ended(session, window)
            raise
        self._activity.command_renamed(session, window, f"term:{terminal_id}")
        return terminal_id

    async def terminal_output(self, agent_session_id: str, terminal_id: str) -> TerminalResult:
        _, placement = self._placement(agent_session_id)
        with _as_client_error():
            return TerminalResult(*await placement.terminal_output(terminal_id))

    async def wait_for_terminal_exit(
        self, agent_session_id: str, terminal_id: str
    ) -> tuple[int | None, str | None]:
        session, placement = self._placement(agent_session_id)
        with _as_client_error():
            exited = await placement.wait_for_terminal_exit(terminal_id)
        self._activity.command_ended(session, f"term:{terminal_id}")
        return exited

    async def kill_terminal(self, agent_session_id: str, terminal_id: str) -> None:
        session, placement = self._placement(agent_session_id)
        with _as_client_error():
            await placement.kill_terminal(terminal_id)
        self._activity.command_ended(session, f"term:{terminal_id}")

    async def release_terminal(self, agent_session_id: str, terminal_id: str) -> None:
        session, placement = self._placement(agent_session_id)
        try:
            with _as_client_error():
                await placement.release_terminal(terminal_id)
        finally:
            self._activity.command_ended(session, f"term:{terminal_id}")
