"""The ACP agent that ``sessiond acp`` runs on stdio: every ACP session is a daemon session.

The editor speaks ACP to this process as to any agent; this process is a
client of the daemon (one connection, started if needed). ``session/new``
opens an ordinary lazy daemon session; ``session/prompt`` runs a turn there
and streams the turn's events back as ``session/update``s (``translate.py``);
permission requests of the session's agent are asked of the editor too, and
the first answer among the daemon's clients wins; ``session/load`` replays the
session's event log. Files and terminals stay the daemon's, at the session's
placement: this face advertises no use of the editor's ``fs`` or ``terminal``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    CloseSessionResponse,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ToolCallUpdate,
    Usage,
)

from sessiond.client import launch
from sessiond.client.acp_face import commands
from sessiond.client.acp_face.mcp_servers import daemon_mcp_servers
from sessiond.client.acp_face.prompt import Refused, prompt_text
from sessiond.client.acp_face.translate import (
    TOOL_KINDS,
    TOOL_STATUSES,
    Translator,
    Update,
    config_options,
    message,
    mode_state,
    stop_reason,
    thought,
)
from sessiond.client.aio import AsyncDaemon, AsyncSession, _open_daemon
from sessiond.client.errors import (
    Conflict,
    ConnectionLost,
    DaemonNotRunning,
    DaemonStartFailed,
    ProtocolError,
    SessiondError,
    sentence,
)
from sessiond.protocol import methods as m
from sessiond.protocol.errors import ErrorCode
from sessiond.protocol.models import (
    CancelResult,
    Event,
    EventKind,
    SessionControls,
    SessionOpenResult,
    SessionStatus,
    TurnResult,
)
from sessiond.protocol.version import VERSION

log = logging.getLogger(__name__)

# A turn's answer may overtake its last events: wait this long for its `turn.ended`.
ENDED_GRACE = 5.0
LIST_PAGE = 200
CANCEL_REASON = "ACP session/cancel"
# ACP's "$/cancel_request" (withdraws a request the editor has not answered yet).
CANCEL_REQUEST = "$/cancel_request"


@dataclass(frozen=True)
class FaceOptions:
    agent: str = "demo"
    placement: str | None = None
    root: str | None = None
    socket: str | None = None
    start_timeout: float = launch.START_TIMEOUT


def acp_error(error: BaseException) -> RequestError:
    """The ACP error for a failure, carrying the sentence ``sessiond`` on the command line prints."""
    if isinstance(error, RequestError):
        return error
    if isinstance(error, SessiondError):
        text = sentence(error)
        data: dict[str, Any] = {"sessiond": int(error.code)}
        if isinstance(error.data, dict):
            data.update(error.data)
        return RequestError(int(error.code), f"sessiond: {text}", data)
    if isinstance(error, commands.CommandError):
        return RequestError(int(ErrorCode.INVALID_PARAMS), f"sessiond: {error}")
    if isinstance(error, DaemonNotRunning | DaemonStartFailed | ConnectionLost | ProtocolError | ValueError):
        return RequestError(int(ErrorCode.INTERNAL_ERROR), f"sessiond: {error}")
    if isinstance(error, OSError):
        return RequestError(int(ErrorCode.INTERNAL_ERROR), f"sessiond: cannot reach the daemon: {error}")
    return RequestError(int(ErrorCode.INTERNAL_ERROR), f"sessiond: {error!r}")


class _Withdrawable:
    """Records the ids of the permission requests this face sends, so one can be withdrawn."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], Any] = {}  # (session, tool call) -> request id

    def observe(self, event: Any) -> None:
        raw = getattr(event, "message", None)
        if not isinstance(raw, dict) or raw.get("method") != "session/request_permission":
            return
        params = raw.get("params") or {}
        tool = (params.get("toolCall") or {}).get("toolCallId")
        if "id" in raw and isinstance(params.get("sessionId"), str) and isinstance(tool, str):
            self.ids[(params["sessionId"], tool)] = raw["id"]


class FaceAgent:
    """The ACP agent side of ``sessiond acp``."""

    def __init__(self, options: FaceOptions) -> None:
        self._options = options
        self._conn: Client | None = None
        self._daemon: AsyncDaemon | None = None
        self._connecting = asyncio.Lock()
        self._translators: dict[str, Translator] = {}
        self._turns: dict[str, set[str]] = {}  # session -> turn ids of this face running there
        self._client_capabilities = ClientCapabilities()
        self._mcp_http = False  # the agent behind takes http MCP servers (as its process last said)
        self.requests = _Withdrawable()
        self._background: set[asyncio.Task[Any]] = set()
        self._answered: set[str] = set()  # permissions the editor answered, on their way to the daemon
        self._feeds: dict[str, asyncio.Future[None]] = {}  # session -> its event subscription's pump
        self._listeners: dict[str, list[asyncio.Queue[Event | None]]] = {}  # session -> its turns' inboxes

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    @property
    def _client(self) -> Client:
        if self._conn is None:
            raise RuntimeError("the ACP face is not connected to an editor")
        return self._conn

    # ------------------------------------------------------------ the daemon

    async def daemon(self) -> AsyncDaemon:
        """The connection to the daemon, made (and the daemon started) when first needed or lost."""
        async with self._connecting:
            if self._daemon is None or self._daemon.closed:
                options = self._options
                self._daemon = await _open_daemon(options.socket, True, options.start_timeout)
            return self._daemon

    async def aclose(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.wait(self._background, timeout=5)
        if self._daemon is not None:
            await self._daemon.aclose()

    async def _call(self, step: Callable[[AsyncDaemon], Awaitable[Any]]) -> Any:
        """``step`` with the daemon; its failure as an ACP error with the CLI's sentence."""
        try:
            return await step(await self.daemon())
        except (SessiondError, DaemonNotRunning, DaemonStartFailed, ConnectionLost, ProtocolError) as e:
            raise acp_error(e) from e
        except (OSError, ValueError) as e:  # the socket refuses us; a socket path too long
            raise acp_error(e) from e

    async def _connected(self) -> AsyncDaemon:
        async def itself(daemon: AsyncDaemon) -> AsyncDaemon:
            return daemon

        connected: AsyncDaemon = await self._call(itself)
        return connected

    # ------------------------------------------------------------ connection

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self._client_capabilities = client_capabilities or ClientCapabilities()
        agent = self._options.agent
        # The daemon must be reachable and the agent known, else the editor hears why now.
        info = await self._call(lambda daemon: daemon.agent(agent))
        process = info.info.process
        process_info = process.agent_info or {}
        underlying = process_info.get("title") or process_info.get("name") or agent
        # Known once its process has started: until then, stdio servers only (every agent takes them).
        self._mcp_http = bool(process.capabilities and process.capabilities.mcp_http)
        capabilities = AgentCapabilities(
            load_session=True,
            # The daemon takes prompts as text: embedded text resources (an attached file) go in
            # it; images, audio and binary resources cannot, and are refused (prompt.py).
            prompt_capabilities=PromptCapabilities(embedded_context=True),
            # The editor's MCP servers go to the agent beside the daemon's own (mcp_servers.py).
            mcp_capabilities=McpCapabilities(http=self._mcp_http, sse=False),
            session_capabilities=SessionCapabilities(
                list=SessionListCapabilities(),
                resume=SessionResumeCapabilities(),
                fork=SessionForkCapabilities(),
                close=SessionCloseCapabilities(),
            ),
        )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=capabilities,
            auth_methods=[],
            agent_info=Implementation(name="sessiond", title=f"sessiond: {underlying}", version=VERSION),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None  # the daemon authenticates its agents itself (from their environment)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # ------------------------------------------------------------ sessions

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        options = self._options
        root = options.root or cwd
        try:
            servers = daemon_mcp_servers(mcp_servers, http=self._mcp_http, agent=options.agent)
        except Refused as e:
            raise RequestError(int(ErrorCode.INVALID_PARAMS), f"sessiond: {e}") from e

        async def open_one(daemon: AsyncDaemon) -> str:
            opened = await daemon._call(
                m.SESSION_OPEN,
                SessionOpenResult,
                agent=options.agent,
                root=os.path.abspath(root),
                placement=options.placement,
                count=1,
                mcp_servers=servers,
            )
            return opened.sessions[0].id

        session_id: str = await self._call(open_one)
        controls = await self._follow(session_id)
        return NewSessionResponse(
            session_id=session_id, modes=mode_state(controls), config_options=config_options(controls)
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        translator = self._translators[session_id] = Translator()

        async def replay(daemon: AsyncDaemon) -> list[Update]:
            session = await _open_again(daemon, session_id)
            updates: list[Update] = []
            kinds = [EventKind.TURN_QUEUED, EventKind.TURN_CHUNK, EventKind.TURN_THOUGHT, EventKind.TURN_TOOL]
            async with daemon.trace(sessions=[session_id], kinds=kinds) as log_:
                async for event in log_:
                    updates += translator.event(event, replay=True)
            info = await session.aget()
            updates += translator.plan(info.plan)
            updates += translator.usage(info.context)
            return updates

        # ACP: the whole conversation is replayed as updates before the answer.
        for update in await self._call(replay):
            await self._client.session_update(session_id=session_id, update=update)
        controls = await self._follow(session_id, translator)
        return LoadSessionResponse(modes=mode_state(controls), config_options=config_options(controls))

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        await self._call(lambda daemon: _open_again(daemon, session_id))
        controls = await self._follow(session_id, self._translators.get(session_id))
        return ResumeSessionResponse(modes=mode_state(controls), config_options=config_options(controls))

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        # A writable side chat: a session of its own that starts from this one's context.
        async def fork(daemon: AsyncDaemon) -> str:
            main = await daemon.session(session_id)
            return (await main.aside(None, writable=True)).id

        forked: str = await self._call(fork)
        controls = await self._follow(forked)
        return ForkSessionResponse(
            session_id=forked, modes=mode_state(controls), config_options=config_options(controls)
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        if cursor is not None and not cursor.isdigit():
            raise RequestError.invalid_params({"cursor": cursor, "details": "a cursor is a number"})
        start = int(cursor or 0)
        where = cwd or self._options.root
        wanted = os.path.realpath(where) if where else None
        found = await self._call(lambda daemon: daemon.sessions(sort="activity", brief=True))
        infos = [s.info for s in found if wanted is None or os.path.realpath(s.info.root) == wanted]
        page = infos[start : start + LIST_PAGE]
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=info.id,
                    cwd=info.root,
                    title=info.title or info.recap,
                    updated_at=(info.last_activity or info.created_at).isoformat(),
                )
                for info in page
            ],
            next_cursor=str(start + LIST_PAGE) if start + LIST_PAGE < len(infos) else None,
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """The editor is done with the session here (ACP: cancel its work, free what it holds):
        this face's turns in it are cancelled and it stops following it. The daemon's session
        stays, history and all (close it with `sessiond close`): editors close a chat to free
        what it holds, and may resume it, here or in another client."""
        await self.cancel(session_id)
        feed = self._feeds.pop(session_id, None)
        if feed is not None:
            feed.cancel()
        self._translators.pop(session_id, None)
        return CloseSessionResponse()

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        """The daemon session's mode: kept with it, said to its agent now or when it opens."""
        controls: SessionControls = await self._call(
            lambda daemon: daemon._call(m.SESSION_SET_MODE, SessionControls, session=session_id, mode=mode_id)
        )
        self._translator(session_id).told(controls)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        """One of the daemon session's config options: kept with it, said to its agent now or when
        it opens; every option as they are after it."""
        controls: SessionControls = await self._call(
            lambda daemon: daemon._call(
                m.SESSION_SET_CONFIG, SessionControls, session=session_id, config_id=config_id, value=value
            )
        )
        self._translator(session_id).told(controls)
        return SetSessionConfigOptionResponse(config_options=config_options(controls) or [])

    # ------------------------------------------------------------ turns

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        try:
            text = prompt_text(prompt)
        except Refused as e:
            raise RequestError(int(ErrorCode.INVALID_PARAMS), f"sessiond: {e}") from e
        command = commands.parse(text)
        if command is not None:
            return await self._slash(session_id, command)
        if not text.strip():
            raise RequestError.invalid_params({"details": "the prompt has no text"})
        return await self._turn(session_id, text)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        turns = list(self._turns.get(session_id, ()))
        if not turns:
            return
        daemon = await self.daemon()
        for turn in turns:
            with contextlib.suppress(SessiondError, ConnectionLost):
                await daemon._call(
                    m.SESSION_CANCEL, CancelResult, session=session_id, turn_id=turn, reason=CANCEL_REASON
                )

    async def _slash(self, session_id: str, command: commands.Command) -> PromptResponse:
        async def say(text: str) -> None:
            await self._send(session_id, [message(text)])

        async def note(text: str) -> None:
            await self._send(session_id, [thought(text)])

        try:
            await commands.run(command, await self._connected(), session_id, say, note)
        except (commands.CommandError, SessiondError, ConnectionLost) as e:
            raise acp_error(e) from e
        return PromptResponse(stop_reason="end_turn")

    async def _turn(self, session_id: str, text: str) -> PromptResponse:
        translator = self._translators.setdefault(session_id, Translator())
        turn_id = uuid.uuid4().hex
        asking: dict[str, asyncio.Task[None]] = {}  # permission id -> the question put to the editor
        inbox: asyncio.Queue[Event | None] = asyncio.Queue()
        try:
            # Subscribed before prompting, so no event of the turn can be missed.
            daemon, reader = await self._watch(session_id)
            listeners = self._listeners.setdefault(session_id, [])
            listeners.append(inbox)
            call = asyncio.ensure_future(
                daemon._call(m.SESSION_PROMPT, TurnResult, session=session_id, prompt=text, turn_id=turn_id)
            )
            self._turns.setdefault(session_id, set()).add(turn_id)
            call.add_done_callback(lambda _: inbox.put_nowait(None))
            try:
                await self._stream(session_id, turn_id, translator, inbox, call, reader, asking)
                result = await call
            finally:
                listeners.remove(inbox)
                self._turns.get(session_id, set()).discard(turn_id)
                for task in asking.values():
                    task.cancel()
                if not call.done():
                    call.cancel()  # $/cancelRequest: the daemon cancels the turn
                await asyncio.wait([call, *asking.values()])
        except (SessiondError, ConnectionLost, ProtocolError) as e:
            raise acp_error(e) from e
        await self._send(session_id, translator.plan(result.plan) + translator.usage(result.context))
        usage = result.usage
        return PromptResponse(
            stop_reason=stop_reason(result.stop_reason),
            usage=(
                Usage(
                    input_tokens=usage.input_tokens or 0,
                    output_tokens=usage.output_tokens or 0,
                    total_tokens=usage.total_tokens or 0,
                )
                if usage is not None
                else None
            ),
        )

    async def _watch(self, session_id: str) -> tuple[AsyncDaemon, asyncio.Future[None]]:
        """Subscribe to the session's events, once for the face's life (again after a reconnect):
        the daemon and the task that hands them to the session's listeners (done once it ends)."""
        daemon = await self._connected()
        feed = self._feeds.get(session_id)
        if feed is not None and not feed.done():
            return daemon, feed
        stream = daemon.events(sessions=[session_id])
        await stream.__aenter__()

        async def pump() -> None:
            try:
                async for event in stream:
                    if event.kind is EventKind.SESSION_CONTROLS:  # told whether a turn runs or not
                        controls = SessionControls.model_validate(event.data["controls"])
                        with contextlib.suppress(Exception):
                            await self._tell_controls(session_id, controls)
                        continue
                    for inbox in self._listeners.get(session_id, ()):
                        inbox.put_nowait(event)
            finally:
                for inbox in self._listeners.get(session_id, ()):
                    inbox.put_nowait(None)  # wakes the turns, which see the feed has ended
                await stream.aclose()  # unsubscribes (shielded, bounded in time)

        task = asyncio.ensure_future(pump())
        self._feeds[session_id] = task
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return daemon, task

    async def _stream(
        self,
        session_id: str,
        turn_id: str,
        translator: Translator,
        inbox: asyncio.Queue[Event | None],
        call: asyncio.Future[TurnResult],
        reader: asyncio.Future[None],
        asking: dict[str, asyncio.Task[None]],
    ) -> None:
        """Send the turn's events to the editor until the turn has ended (and its answer came)."""
        loop = asyncio.get_running_loop()
        grace_until: float | None = None
        ended = False
        while not (ended and call.done()):
            if call.done():
                if call.cancelled() or call.exception() is not None or reader.done():
                    return
                grace_until = grace_until or loop.time() + ENDED_GRACE
            try:
                async with asyncio.timeout_at(grace_until):
                    event = await inbox.get()
            except TimeoutError:
                return
            if event is None:
                continue
            if event.kind is EventKind.PERMISSION_ASKED:
                permission = str(event.data.get("permission"))
                asking[permission] = asyncio.ensure_future(self._ask(session_id, event))
            elif event.kind is EventKind.PERMISSION_ANSWERED:
                permission = str(event.data.get("permission"))
                await self._withdraw(permission, asking.pop(permission, None))
            elif event.kind is EventKind.TURN_ENDED and event.turn == turn_id:
                ended = True
            else:
                await self._send(session_id, translator.event(event, turn=turn_id))

    async def _ask(self, session_id: str, asked: Event) -> None:
        """Put a permission request to the editor; its answer goes to the daemon (first answer wins)."""
        data = asked.data
        raw = data.get("toolCall") if isinstance(data.get("toolCall"), dict) else {}
        assert isinstance(raw, dict)
        tool_id = str(raw.get("toolCallId") or data.get("permission"))
        tool_call = ToolCallUpdate(
            tool_call_id=tool_id,
            title=str(raw["title"]) if raw.get("title") else None,
            kind=raw["kind"] if raw.get("kind") in TOOL_KINDS else None,
            status=raw["status"] if raw.get("status") in TOOL_STATUSES else None,
        )
        options = [
            PermissionOption.model_validate(o)
            for o in data.get("options") or []
            if isinstance(o, dict) and {"optionId", "name", "kind"} <= o.keys()
        ]
        key = (session_id, tool_id)
        try:
            answer = await self._client.request_permission(
                session_id=session_id, tool_call=tool_call, options=options
            )
        except asyncio.CancelledError:
            # Withdrawn (another client answered first, or the turn ended): tell the editor.
            request_id = self.requests.ids.pop(key, None)
            connection = getattr(self._client, "_conn", None)  # the SDK's raw connection
            if request_id is not None and connection is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(
                        connection.send_notification(CANCEL_REQUEST, {"requestId": request_id})
                    )
            raise
        self.requests.ids.pop(key, None)
        self._answered.add(str(data["permission"]))  # from here on, answering is not withdrawn
        outcome = answer.outcome
        option_id = getattr(outcome, "option_id", None) if outcome.outcome == "selected" else None
        daemon = await self.daemon()
        with contextlib.suppress(Conflict):  # another client answered first
            await daemon.answer_permission(str(data["permission"]), option_id)

    async def _withdraw(self, permission: str, task: asyncio.Task[None] | None) -> None:
        """The permission was answered: withdraw the question, unless the editor answered it."""
        answered_here = permission in self._answered
        self._answered.discard(permission)
        if task is None or task.done():
            return
        if answered_here:
            await asyncio.wait([task])  # its answer is on its way to the daemon: let it land
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    # ------------------------------------------------------------ sending

    async def _send(self, session_id: str, updates: list[Update]) -> None:
        for update in updates:
            await self._client.session_update(session_id=session_id, update=update)

    def _translator(self, session_id: str) -> Translator:
        return self._translators.setdefault(session_id, Translator())

    async def _follow(self, session_id: str, translator: Translator | None = None) -> SessionControls:
        """Start following a session the editor now has (its events, its controls): the controls to
        answer with; the commands follow as an update once the answer is sent."""
        translator = self._translators[session_id] = translator or Translator()
        await self._call(lambda _: self._watch(session_id))
        controls: SessionControls = await self._call(
            lambda daemon: daemon._call(m.SESSION_CONTROLS, SessionControls, session=session_id)
        )
        translator.told(controls)
        self._soon(self._tell_controls(session_id, controls))
        return controls

    async def _tell_controls(self, session_id: str, controls: SessionControls) -> None:
        """What of the session's mode, options and commands the editor has not been told."""
        await self._send(session_id, self._translator(session_id).controls(controls, commands.COMMANDS))

    def _soon(self, step: Awaitable[None]) -> None:
        """Run ``step`` after the current answer is sent (the editor must know the session first)."""

        async def later() -> None:
            try:
                await step
            except Exception:
                log.exception("sending an update to the editor failed")

        task = asyncio.ensure_future(later())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


async def _open_again(daemon: AsyncDaemon, session_id: str) -> AsyncSession:
    """The daemon session an editor loads or resumes, reopened if it was closed (`sessiond close`,
    a batch): an editor going back to a conversation means to go on with it."""
    session = await daemon.session(session_id)
    if session.info.status is SessionStatus.CLOSED:
        await session.areopen()
    return session
