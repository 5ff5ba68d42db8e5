"""What the core and an agent process tell each other, in plain Python: no ACP wire types.

Kept apart from `acp_backend` so that a daemon that has not started an agent
has not imported the ACP SDK (its models take most of a cold start).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

# Told, in the task that asks the agent to open a session (new, load, resume, fork), when that
# request waits for others to be opened first (max_opening_sessions): True as it starts waiting,
# False once it is asked. Set by the core around its opening of a session; None: nobody listens.
OPENING_WAIT: ContextVar[Callable[[bool], None] | None] = ContextVar("opening_wait", default=None)


class ClientError(Exception):
    """An error the daemon answers one of the agent's requests with."""


class AgentExited(Exception):
    """The agent process went away while a request to it was outstanding."""


class PromptOverdue(Exception):
    """The agent worked on a prompt past its deadline: it was told to stop (session/cancel), and
    its answer waited for a grace period more."""


class AgentRequestFailed(Exception):
    """The agent answered a request with an error."""

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


@dataclass(frozen=True, slots=True)
class Capabilities:
    load_session: bool = False
    list: bool = False
    resume: bool = False
    fork: bool = False
    close: bool = False
    mcp_http: bool = False  # takes MCP servers over streamable HTTP


@dataclass(slots=True)
class PromptOutcome:
    stop_reason: str
    usage: dict[str, int] | None = None


@dataclass(slots=True)
class TerminalResult:
    output: str
    truncated: bool
    exit_code: int | None
    signal: str | None


@dataclass(slots=True)
class SessionSetup:
    """What the agent said about a session it opened: its modes (ACP SessionMode objects) and
    current mode, and its config options (ACP SessionConfigOption objects, by id)."""

    modes: list[dict[str, Any]] = field(default_factory=list)
    mode: str | None = None
    config: dict[str, dict[str, Any]] = field(default_factory=dict)


class BackendHost(Protocol):
    """What the agent may ask of the daemon, by the agent's session id."""

    def on_update(self, agent_session_id: str, kind: str, payload: dict[str, Any]) -> None: ...

    def known(self, agent_session_id: str) -> None:
        """The daemon has the session by this id now: what the agent said of it before, told now."""

    def watched(self) -> bool:
        """Clients are subscribed to the events the agent's updates make (they wait for them)."""

    async def request_permission(
        self, agent_session_id: str, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> str | None: ...

    async def read_text_file(
        self, agent_session_id: str, path: str, line: int | None, limit: int | None
    ) -> str: ...

    async def write_text_file(self, agent_session_id: str, path: str, content: str) -> None: ...

    async def create_terminal(
        self,
        agent_session_id: str,
        command: str,
        args: list[str],
        env: dict[str, str],
        cwd: str | None,
        output_byte_limit: int | None,
    ) -> str: ...

    async def terminal_output(self, agent_session_id: str, terminal_id: str) -> TerminalResult: ...

    async def wait_for_terminal_exit(
        self, agent_session_id: str, terminal_id: str
    ) -> tuple[int | None, str | None]: ...

    async def kill_terminal(self, agent_session_id: str, terminal_id: str) -> None: ...

    async def release_terminal(self, agent_session_id: str, terminal_id: str) -> None: ...

    def child_environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The agent process's environment: the daemon's, filtered by the agent's rules, plus `extra`."""
        ...
