"""The demo agent's ACP side: sessions, capabilities, and prompt turns with cancellation.

Implements the `acp.Agent` protocol of agent-client-protocol 0.12. One process
serves any number of sessions over one connection. Each session's history is
kept in memory and in one JSON file (see state.py), so a restarted agent can
still load or resume it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import ContentBlock, update_agent_message_text, update_user_message_text
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    ClientCapabilities,
    CloseSessionResponse,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    TextContentBlock,
    UsageUpdate,
    UserMessageChunk,
)

from .mcp_tools import SessionMcp
from .script import COMMANDS, MODE_IDS, ScriptSyntaxError, parse_prompt
from .state import SessionRecord, SessionStore, TurnRecord, UnreadableSessionError, now_iso
from .turn import ScriptRuntimeError, Turn, estimated_tokens, estimated_usage

AGENT_NAME = "sessiond-demo-agent"
AGENT_TITLE = "sessiond demo agent"
AGENT_VERSION = "0.1.0"

MODEL_CONFIG_ID = "model"
MODELS = {"demo-small": "Demo small", "demo-large": "Demo large"}
DEFAULT_MODEL = "demo-small"
MODES = {
    "default": SessionMode(id="default", name="Default", description="Carry out the prompt."),
    "plan": SessionMode(id="plan", name="Plan", description="Plan mode (the demo agent behaves the same)."),
}
DEFAULT_MODE = "default"
assert tuple(MODES) == MODE_IDS
LIST_PAGE_SIZE = 100

# JSON-RPC codes: -32002 is ACP's "resource not found"; a bad script is bad params.
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INVALID_REQUEST = -32600

StopReason = Literal["end_turn", "cancelled"]


@dataclass(frozen=True)
class AgentOptions:
    state_dir: Path
    load: bool = True
    resume: bool = True
    close: bool = True
    fork: bool = True
    list: bool = True
    mcp_http: bool = True


@dataclass(frozen=True)
class TurnEnd:
    stop_reason: StopReason | None  # None: the turn ends with `failure`
    failure: RequestError | None = None
    client_gone: bool = False


def _being_cancelled() -> bool:
    """True when the current task itself is being cancelled (not just something it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _end_of(task: asyncio.Task[None]) -> TurnEnd:
    """Wait for a turn's script task and say how the turn ends."""
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled() or _being_cancelled():
            raise  # the prompt request itself is being torn down: never swallow that
        return TurnEnd("cancelled")  # session/cancel (or session/close) cancelled the script
    except RequestError as exc:  # the script's `fail`
        return TurnEnd(None, failure=exc)
    except ScriptRuntimeError as exc:
        data = {"line": exc.step.line, "text": exc.step.source}
        return TurnEnd(None, failure=RequestError(INVALID_PARAMS, str(exc), data))
    except ConnectionError:
        # The client is gone (the SDK failed our pending requests on disconnect):
        # nobody will read an answer, so end quietly rather than log an error.
        return TurnEnd("cancelled", client_gone=True)
    return TurnEnd("end_turn")


@dataclass
class LiveSession:
    record: SessionRecord
    turn_task: asyncio.Task[None] | None = None
    mcp: SessionMcp = field(default_factory=SessionMcp)  # its MCP servers, started on first use


def prompt_text(blocks: list[Any]) -> str:
    """The text of a prompt: its text blocks joined by line breaks (other blocks are ignored)."""
    return "\n".join(block.text for block in blocks if isinstance(block, TextContentBlock))


def _new_session_id() -> str:
    return f"demo-{uuid.uuid4().hex}"


def _session_not_found(session_id: str) -> RequestError:
    return RequestError(RESOURCE_NOT_FOUND, f"Unknown session: {session_id}", {"sessionId": session_id})


def _withdrawn(method: str) -> RequestError:
    # Answer exactly as an agent without this method would.
    return RequestError.method_not_found(method)


def _require_absolute(cwd: str) -> str:
    if not os.path.isabs(cwd):
        raise RequestError(INVALID_PARAMS, f"cwd must be an absolute path, not {cwd!r}", {"cwd": cwd})
    return _normalise(cwd)


def _normalise(path: str) -> str:
    return os.path.normpath(path)


def _modes(record: SessionRecord) -> SessionModeState:
    return SessionModeState(current_mode_id=record.mode, available_modes=list(MODES.values()))


def _config_options(record: SessionRecord) -> list[SessionConfigOptionSelect]:
    return [
        SessionConfigOptionSelect(
            type="select",
            id=MODEL_CONFIG_ID,
            name="Model",
            category="model",
            current_value=record.model,
            options=[SessionConfigSelectOption(value=value, name=name) for value, name in MODELS.items()],
        )
    ]


class DemoAgent:
    """The scripted ACP agent. See docs/demo-agent.md for what a prompt can make it do."""

    def __init__(self, options: AgentOptions) -> None:
        self._options = options
        self._store = SessionStore(options.state_dir)
        self._sessions: dict[str, LiveSession] = {}
        self._conn: Client | None = None
        self._client_capabilities = ClientCapabilities()

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    @property
    def _client(self) -> Client:
        if self._conn is None:
            raise RuntimeError("the demo agent is not connected to a client")
        return self._conn

    # --- connection ------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self._client_capabilities = client_capabilities or ClientCapabilities()
        options = self._options
        capabilities = AgentCapabilities(
            load_session=options.load,
            prompt_capabilities=PromptCapabilities(),
            session_capabilities=SessionCapabilities(
                list=SessionListCapabilities() if options.list else None,
                resume=SessionResumeCapabilities() if options.resume else None,
                close=SessionCloseCapabilities() if options.close else None,
                fork=SessionForkCapabilities() if options.fork else None,
            ),
            mcp_capabilities=McpCapabilities(http=options.mcp_http),
        )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=capabilities,
            auth_methods=[],
            agent_info=Implementation(name=AGENT_NAME, title=AGENT_TITLE, version=AGENT_VERSION),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None  # nothing to authenticate: the demo agent offers no auth methods

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # --- session lifecycle -----------------------------------------------------

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        record = SessionRecord(
            session_id=_new_session_id(),
            cwd=_require_absolute(cwd),
            model=DEFAULT_MODEL,
            mode=DEFAULT_MODE,
        )
        self._store.save(record)
        live = LiveSession(record)
        await live.mcp.configure(mcp_servers, http=self._options.mcp_http)
        self._sessions[record.session_id] = live
        return NewSessionResponse(
            session_id=record.session_id, modes=_modes(record), config_options=_config_options(record)
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        if not self._options.load:
            raise _withdrawn("session/load")
        live = self._revive(session_id, cwd)
        await live.mcp.configure(mcp_servers, http=self._options.mcp_http)
        # ACP: replay the whole conversation as updates before answering.
        for turn in live.record.turns:
            await self._notify(session_id, update_user_message_text(turn.prompt))
            if turn.reply:
                await self._notify(session_id, update_agent_message_text(turn.reply))
        return LoadSessionResponse(modes=_modes(live.record), config_options=_config_options(live.record))

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        if not self._options.resume:
            raise _withdrawn("session/resume")
        live = self._revive(session_id, cwd)
        await live.mcp.configure(mcp_servers, http=self._options.mcp_http)
        return ResumeSessionResponse(modes=_modes(live.record), config_options=_config_options(live.record))

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        if not self._options.fork:
            raise _withdrawn("session/fork")
        source = self._find(session_id)
        fork = source.model_copy(
            deep=True,
            update={
                "session_id": _new_session_id(),
                "cwd": _require_absolute(cwd),
                "created_at": now_iso(),
                "updated_at": now_iso(),
                "threads": [],  # the threads stay the source's: the fork started none
            },
        )
        self._store.save(fork)
        live = LiveSession(fork)
        await live.mcp.configure(mcp_servers, http=self._options.mcp_http)
        self._sessions[fork.session_id] = live
        return ForkSessionResponse(
            session_id=fork.session_id, modes=_modes(fork), config_options=_config_options(fork)
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        if not self._options.close:
            raise _withdrawn("session/close")
        live = self._sessions.pop(session_id, None)
        if live is None:
            self._find(session_id)  # closing a stored but idle session is fine; an unknown one is not
            return CloseSessionResponse()
        if live.turn_task is not None:
            live.turn_task.cancel()  # its prompt answers "cancelled"
        await live.mcp.aclose()
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        if not self._options.list:
            raise _withdrawn("session/list")
        records = self._store.all_sessions()
        if cwd is not None:
            wanted = _normalise(cwd)
            records = [record for record in records if record.cwd == wanted]
        start = self._page_start(cursor)
        page = records[start : start + LIST_PAGE_SIZE]
        more = start + LIST_PAGE_SIZE < len(records)
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=record.session_id,
                    cwd=record.cwd,
                    title=record.title,
                    updated_at=record.updated_at,
                )
                for record in page
            ],
            next_cursor=str(start + LIST_PAGE_SIZE) if more else None,
        )

    @staticmethod
    def _page_start(cursor: str | None) -> int:
        if cursor is None:
            return 0
        if not cursor.isdigit():
            raise RequestError(INVALID_PARAMS, f"Invalid cursor: {cursor!r}", {"cursor": cursor})
        return int(cursor)

    # --- settings ----------------------------------------------------------------

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        record = self._live(session_id).record
        if mode_id not in MODES:
            raise RequestError(
                INVALID_PARAMS,
                f"Unknown mode {mode_id!r}; modes are: {', '.join(MODES)}",
                {"modeId": mode_id},
            )
        record.mode = mode_id
        self._save(record)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        record = self._live(session_id).record
        if config_id != MODEL_CONFIG_ID:
            raise RequestError(
                INVALID_PARAMS,
                f"Unknown config option {config_id!r}; options are: model",
                {"configId": config_id},
            )
        if not isinstance(value, str) or value not in MODELS:
            raise RequestError(
                INVALID_PARAMS, f"Unknown model {value!r}; models are: {', '.join(MODELS)}", {"value": value}
            )
        record.model = value
        self._save(record)
        return SetSessionConfigOptionResponse(config_options=_config_options(record))

    # --- prompt turns ------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[ContentBlock], **kwargs: Any) -> PromptResponse:
        live = self._live(session_id)
        if live.turn_task is not None:
            raise RequestError(
                INVALID_REQUEST, f"Session {session_id} is already running a turn", {"sessionId": session_id}
            )
        text = prompt_text(prompt)
        try:
            program = parse_prompt(text)
        except ScriptSyntaxError as exc:
            raise RequestError(
                INVALID_PARAMS, str(exc), {"line": exc.line, "text": exc.source, "commands": list(COMMANDS)}
            ) from None
        turn = Turn(
            self._client,
            self._client_capabilities,
            live.record,
            number=len(live.record.turns) + 1,
            mcp=live.mcp,
        )
        # No await between here and storing the task: a session/cancel that
        # arrives right behind this prompt must find the task to cancel.
        task = asyncio.create_task(turn.run(program), name=f"demo-agent turn {session_id}")
        live.turn_task = task
        try:
            end = await _end_of(task)
        except asyncio.CancelledError:
            self._remember(live, text, turn, "cancelled")
            raise
        except Exception:
            self._remember(live, text, turn, "error")
            raise
        self._remember(live, text, turn, end.stop_reason or "error")
        if not turn.usage_sent and not end.client_gone:
            await self._notify(session_id, estimated_usage(live.record))
        if end.failure is not None:
            raise end.failure
        assert end.stop_reason is not None
        tokens = turn.tokens or estimated_tokens(live.record, turn.reply)
        return PromptResponse(stop_reason=end.stop_reason, usage=tokens)

    def _remember(self, live: LiveSession, prompt: str, turn: Turn, stop_reason: str) -> None:
        """Record the turn, however it ended, so history and load include it."""
        live.turn_task = None
        live.record.turns.append(TurnRecord(prompt=prompt, reply=turn.reply, stop_reason=stop_reason))
        self._save(live.record)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        live = self._sessions.get(session_id)
        if live is not None and live.turn_task is not None:
            live.turn_task.cancel()

    async def aclose(self) -> None:
        """At exit: stop every session's MCP servers."""
        await asyncio.gather(*(live.mcp.aclose() for live in list(self._sessions.values())))

    # --- helpers -------------------------------------------------------------------

    async def _notify(
        self, session_id: str, update: UserMessageChunk | AgentMessageChunk | UsageUpdate
    ) -> None:
        await self._client.session_update(session_id=session_id, update=update)

    def _save(self, record: SessionRecord) -> None:
        record.updated_at = now_iso()
        self._store.save(record)

    def _live(self, session_id: str) -> LiveSession:
        live = self._sessions.get(session_id)
        if live is None:
            raise _session_not_found(session_id)
        return live

    def _find(self, session_id: str) -> SessionRecord:
        """A session's record, live or stored; resource-not-found when there is neither."""
        live = self._sessions.get(session_id)
        if live is not None:
            return live.record
        try:
            record = self._store.load(session_id)
        except UnreadableSessionError as exc:
            raise RequestError.internal_error({"details": str(exc), "sessionId": session_id}) from exc
        if record is None:
            raise _session_not_found(session_id)
        return record

    def _revive(self, session_id: str, cwd: str) -> LiveSession:
        """Make a session live again (for load and resume), rooted at the given cwd."""
        root = _require_absolute(cwd)
        live = self._sessions.get(session_id)
        if live is None:
            live = LiveSession(self._find(session_id))
            self._sessions[session_id] = live
        elif live.turn_task is not None:
            raise RequestError(
                INVALID_REQUEST, f"Session {session_id} is running a turn", {"sessionId": session_id}
            )
        live.record.cwd = root
        self._save(live.record)
        return live
