"""The agent-facing side: one ACP agent process and the connection to it.

This is the only module of the daemon that knows ACP's wire types. It turns
the agent's calls into calls on a `BackendHost` with plain Python values, and
offers the core plain methods (`new_session`, `prompt`, ...) in return.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import acp
from acp import schema as s

log = logging.getLogger("sessiond.acp")

INITIALIZE_TIMEOUT = 60.0
AUTH_REQUIRED = -32000
SESSION_SETUP_TIMEOUT = 120.0


class ClientError(Exception):
    """An error the daemon answers one of the agent's requests with."""


class AgentExited(Exception):
    """The agent process went away while a request to it was outstanding."""


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
    """What the agent said about a session it opened: modes and config options."""

    modes: list[str] = field(default_factory=list)
    config: dict[str, dict[str, Any]] = field(default_factory=dict)


class BackendHost(Protocol):
    """What the agent may ask of the daemon, by the agent's session id."""

    def on_update(self, agent_session_id: str, kind: str, payload: dict[str, Any]) -> None: ...

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


def _update_kind(update: Any) -> str:
    return str(getattr(update, "session_update", type(update).__name__))


class _Client:
    """The ACP client side: every call from the agent goes to the host."""

    def __init__(self, host: BackendHost) -> None:
        self._host = host

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        # Runs before any await: the SDK starts one task per notification, in
        # arrival order, so handling it synchronously keeps the agent's order.
        payload = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        self._host.on_update(session_id, _update_kind(update), payload)

    async def request_permission(
        self, session_id: str, tool_call: s.ToolCallUpdate, options: list[s.PermissionOption], **kwargs: Any
    ) -> s.RequestPermissionResponse:
        chosen = await self._host.request_permission(
            session_id,
            tool_call.model_dump(mode="json", by_alias=True, exclude_none=True),
            [option.model_dump(mode="json", by_alias=True, exclude_none=True) for option in options],
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
    ) -> None:
        self.name = name
        self.command = list(command)
        self.env = dict(env)
        self.log_path = log_path
        self._host = host
        self._client_version = client_version
        self._proc: asyncio.subprocess.Process | None = None
        self._conn: Any = None
        self._watcher: asyncio.Task[None] | None = None
        self.capabilities = Capabilities()
        self.agent_info: dict[str, Any] | None = None
        self.exited = asyncio.Event()
        self.exit_code: int | None = None
        self.started_at: float | None = None
        self.stopping = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and not self.exited.is_set()

    async def start(self) -> None:
        """Spawn the process and run ACP initialize; raises AgentExited with a reason on failure."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, **self.env}
        # The agent's stderr goes straight to its log file: nothing to drain, nothing to block on.
        with open(self.log_path, "ab") as stderr:
            stderr.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.command}\n".encode())
            stderr.flush()
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=stderr,
                    env=environment,
                    start_new_session=True,
                    limit=50 * 1024 * 1024,
                )
            except OSError as exc:
                self.exited.set()
                raise AgentExited(
                    f"could not start agent {self.name!r} with {self.command!r}: {exc.strerror or exc}; "
                    f"check the agent's command (sessiond agent update)"
                ) from None
        self.started_at = time.time()
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._conn = acp.connect_to_agent(
            _Client(self._host), self._proc.stdin, self._proc.stdout, use_unstable_protocol=True
        )
        self._watcher = asyncio.create_task(self._watch(), name=f"agent-{self.name}-watch")
        response = await self._call(
            self._conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=s.ClientCapabilities(
                    fs=s.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                ),
                client_info=s.Implementation(name="sessiond", title="sessiond", version=self._client_version),
            ),
            timeout=INITIALIZE_TIMEOUT,
            what="initialize",
        )
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

    async def _watch(self) -> None:
        assert self._proc is not None
        self.exit_code = await self._proc.wait()
        self.exited.set()
        if self._conn is not None:
            # Rejects every request still waiting for the agent.
            await self._conn.close()

    async def _call(self, awaitable: Any, *, timeout: float | None = None, what: str = "request") -> Any:
        """Await a request to the agent, racing the process's exit, with an optional timeout."""
        request = asyncio.ensure_future(awaitable)
        exited = asyncio.ensure_future(self.exited.wait())
        try:
            done, _ = await asyncio.wait(
                {request, exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            request.cancel()
            raise
        finally:
            exited.cancel()
        if request in done:
            try:
                return request.result()
            except acp.RequestError as exc:
                raise AgentRequestFailed(describe_request_error(exc), exc.code, exc.data) from None
            except ConnectionError:
                raise AgentExited(await self._exit_reason_when_gone(what)) from None
        request.cancel()
        if self.exited.is_set():
            raise AgentExited(await self._exit_reason_when_gone(what))
        raise TimeoutError(f"agent {self.name!r} did not answer {what} within {timeout:g} s")

    async def _exit_reason_when_gone(self, what: str) -> str:
        # The pipe closes a moment before the exit status is known: wait for it.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.exited.wait(), 5)
        return self.exit_reason(what)

    def exit_reason(self, what: str) -> str:
        code = self.exit_code
        if code is None:
            how = "closed its connection"
        elif code >= 0:
            how = f"exited with code {code}"
        else:
            how = f"was killed by signal {-code}"
            with contextlib.suppress(ValueError):
                how = f"was killed by {signal.Signals(-code).name}"
        return (
            f"agent {self.name!r} {how} during {what}; it starts again on the next turn "
            f"(its log: {self.log_path})"
        )

    # ------------------------------------------------------------ sessions

    async def new_session(
        self, cwd: str, mcp: list[dict[str, Any]] | None = None
    ) -> tuple[str, SessionSetup]:
        response = await self._call(
            self._conn.new_session(cwd=cwd, mcp_servers=_mcp(mcp)),
            timeout=SESSION_SETUP_TIMEOUT,
            what="session/new",
        )
        return response.session_id, _setup(response)

    async def fork_session(
        self, session_id: str, cwd: str, mcp: list[dict[str, Any]] | None = None
    ) -> tuple[str, SessionSetup]:
        response = await self._call(
            self._conn.fork_session(session_id=session_id, cwd=cwd, mcp_servers=_mcp(mcp)),
            timeout=SESSION_SETUP_TIMEOUT,
            what="session/fork",
        )
        return response.session_id, _setup(response)

    async def resume_session(
        self, session_id: str, cwd: str, mcp: list[dict[str, Any]] | None = None
    ) -> SessionSetup:
        response = await self._call(
            self._conn.resume_session(session_id=session_id, cwd=cwd, mcp_servers=_mcp(mcp)),
            timeout=SESSION_SETUP_TIMEOUT,
            what="session/resume",
        )
        return _setup(response)

    async def load_session(
        self, session_id: str, cwd: str, mcp: list[dict[str, Any]] | None = None
    ) -> SessionSetup:
        response = await self._call(
            self._conn.load_session(cwd=cwd, session_id=session_id, mcp_servers=_mcp(mcp)),
            timeout=SESSION_SETUP_TIMEOUT,
            what="session/load",
        )
        return _setup(response)

    async def close_session(self, session_id: str) -> None:
        await self._call(self._conn.close_session(session_id=session_id), timeout=30, what="session/close")

    async def set_mode(self, session_id: str, mode: str) -> None:
        await self._call(
            self._conn.set_session_mode(session_id=session_id, mode_id=mode),
            timeout=30,
            what="session/set_mode",
        )

    async def set_config_option(self, session_id: str, config_id: str, value: str | bool) -> None:
        await self._call(
            self._conn.set_config_option(config_id=config_id, session_id=session_id, value=value),
            timeout=30,
            what="session/set_config_option",
        )

    async def prompt(self, session_id: str, text: str) -> PromptOutcome:
        response = await self._call(
            self._conn.prompt(session_id=session_id, prompt=[s.TextContentBlock(type="text", text=text)]),
            what="session/prompt",
        )
        usage = None
        if response.usage is not None:
            usage = response.usage.model_dump(mode="json", by_alias=True, exclude_none=True)
        return PromptOutcome(stop_reason=response.stop_reason, usage=usage)

    async def cancel(self, session_id: str) -> None:
        if self.alive:
            with contextlib.suppress(ConnectionError, OSError):
                await self._conn.cancel(session_id=session_id)

    # ------------------------------------------------------------ stopping

    async def stop(self, grace: float = 3.0) -> None:
        """Close stdin, wait `grace` seconds, then terminate, then kill."""
        self.stopping = True
        proc = self._proc
        if proc is None or self.exited.is_set():
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
            try:
                await asyncio.wait_for(asyncio.shield(self.exited.wait()), grace)
                break
            except TimeoutError:
                continue
        if self._watcher is not None:
            await asyncio.gather(self._watcher, return_exceptions=True)


def _mcp(servers: list[dict[str, Any]] | None) -> list[Any]:
    """MCP servers offered to a session: http ones (name, url, headers) or stdio ones
    (name, command, args, env)."""
    return [
        s.HttpMcpServer.model_validate(server)
        if server.get("type") == "http"
        else s.McpServerStdio.model_validate(server)
        for server in servers or []
    ]


def _setup(response: Any) -> SessionSetup:
    setup = SessionSetup()
    if response is None:
        return setup
    modes = getattr(response, "modes", None)
    if modes is not None:
        setup.modes = [mode.id for mode in modes.available_modes]
    for option in getattr(response, "config_options", None) or []:
        setup.config[option.id] = option.model_dump(mode="json", by_alias=True, exclude_none=True)
    return setup
