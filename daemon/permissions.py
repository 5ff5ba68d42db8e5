"""Permission requests: an agent's `session/request_permission`, decided by the agent's
policy or asked of a person through the clients that answer permissions.

While a request waits its session "needs you"; the first answer wins, and a
cancelled turn answers what it still waits on as cancelled (None).

What it reads of the core and tells it is `PermissionsPort`; the side-chat rule
(`decide_for_side`, `Around`'s) is handed in.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from sessiond.daemon.events import EventLog
from sessiond.daemon.insight import shown_title
from sessiond.daemon.records import AgentRuntime, PendingPermission, SessionRecord, SessionRuntime
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.models import EventKind

READ_KINDS = frozenset({"read", "search", "fetch", "think"})

# A read-only side chat's permission: False for a writing tool, None to ask as usual.
SideRule = Callable[[SessionRecord, dict[str, Any]], bool | None]


class PermissionsPort(Protocol):
    """What permissions read of the core (agents, a session's runtime) and tell it (events, a
    session's status moving while it waits for a person); the core is one."""

    @property
    def events(self) -> EventLog: ...
    def get_agent(self, name: str) -> AgentRuntime: ...
    def runtime_of(self, session: SessionRecord) -> SessionRuntime: ...
    def set_status(self, session: SessionRecord, *, closed: bool = False) -> None: ...
    def refused(self, session: SessionRecord, turn: str | None, tool_call: dict[str, Any]) -> None: ...


class Permissions:
    def __init__(self, core: PermissionsPort, *, decide_for_side: SideRule) -> None:
        self.core = core
        self._decide_for_side = decide_for_side
        self.pending: dict[str, PendingPermission] = {}  # by permission id
        # Told of each request as it starts waiting (the server forwards it to clients).
        self.listeners: list[Callable[[PendingPermission], None]] = []

    async def request(
        self, session: SessionRecord, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> str | None:
        agent = self.core.get_agent(session.agent)
        side = self._decide_for_side(session, tool_call)
        policy = "deny" if side is False else agent.spec.options.permission_policy
        decided, option = by_policy(policy, tool_call, options)
        if not decided:
            return await self.ask(session, tool_call, options)
        if m.refuses(option_kind(options, option)):
            # Said as a person's refusal is, so that the transcript names the call refused.
            rule = "a side chat that may not write" if side is False else f"permissionPolicy {policy}"
            rt = self.core.runtime_of(session)
            turn_id = rt.running.id if rt.running is not None else None
            self._answered(session, turn_id, new_id(), as_shown(rt, tool_call), options, option, rule)
        return option

    async def ask(
        self, session: SessionRecord, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> str | None:
        """Ask whoever answers permissions; the session needs you until someone does."""
        rt = self.core.runtime_of(session)
        turn = rt.running
        if turn is not None and turn.cancel_requested:
            return None
        turn_id = turn.id if turn is not None else None  # a client's question may come between turns
        tool_call = as_shown(rt, tool_call)
        pending = PendingPermission(
            id=new_id(),
            agent=session.agent,
            session=session.id,
            turn=turn_id,
            tool_call=tool_call,
            options=options,
            future=asyncio.get_running_loop().create_future(),
        )
        rt.permissions[pending.id] = pending
        self.pending[pending.id] = pending
        self.core.events.emit(
            EventKind.PERMISSION_ASKED,
            agent=session.agent,
            session=session.id,
            turn=turn_id,
            permission=pending.id,
            toolCall=tool_call,
            options=options,
        )
        self.core.set_status(session)
        for listener in self.listeners:
            listener(pending)
        try:
            chosen = await pending.future
        finally:
            rt.permissions.pop(pending.id, None)
            self.pending.pop(pending.id, None)
        self._answered(session, turn_id, pending.id, tool_call, options, chosen)
        self.core.set_status(session)
        return chosen

    def _answered(
        self,
        session: SessionRecord,
        turn_id: str | None,
        permission: str,
        tool_call: dict[str, Any],
        options: list[dict[str, Any]],
        chosen: str | None,
        rule: str | None = None,
    ) -> None:
        """permission.answered; a refusal also marks its call in the transcript."""
        kind = option_kind(options, chosen)
        refused = m.refuses(kind)
        self.core.events.emit(
            EventKind.PERMISSION_ANSWERED,
            agent=session.agent,
            session=session.id,
            turn=turn_id,
            permission=permission,
            optionId=chosen,
            optionKind=kind,
            # What was refused, for the transcript's line (an agent may say nothing more of it).
            **({"toolCall": tool_call} if refused else {}),
            **({"decidedBy": rule} if rule is not None else {}),
        )
        if refused:
            self.core.refused(session, turn_id, tool_call)

    def waiting(self, session: str | None = None) -> list[m.PermissionRequestParams]:
        """The requests still waiting for a person (one session's, when named), oldest first."""
        return [
            as_request(pending)
            for pending in self.pending.values()
            if session is None or pending.session == session
        ]

    def answer(self, params: m.PermissionAnswerParams) -> None:
        pending = self.pending.get(params.permission)
        if pending is None or pending.future.done():
            raise RpcError(
                ErrorCode.CONFLICT,
                f"permission request {params.permission!r} is not waiting "
                "(answered already, or its turn ended)",
            )
        if params.option_id is not None and params.option_id not in {
            str(o.get("optionId")) for o in pending.options
        }:
            offered = ", ".join(str(o.get("optionId")) for o in pending.options)
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"optionId: {params.option_id!r} is not one of the options offered ({offered})",
                {"fields": ["optionId"]},
            )
        pending.future.set_result(params.option_id)


def new_id() -> str:
    return f"p-{uuid.uuid4().hex[:12]}"


def option_kind(options: list[dict[str, Any]], chosen: str | None) -> str | None:
    """The ACP kind of the option chosen (None: none was, the request was cancelled)."""
    return next((o.get("kind") for o in options if chosen is not None and o.get("optionId") == chosen), None)


def as_shown(rt: SessionRuntime, tool_call: dict[str, Any]) -> dict[str, Any]:
    """The tool call with its title as the transcript shows it (paths under the session's root
    relative to it)."""
    if not isinstance(title := tool_call.get("title"), str):
        return tool_call
    kind = tool_call.get("kind")
    shown = shown_title(title, kind if isinstance(kind, str) else None, rt.placement.root)
    return {**tool_call, "title": shown}


def as_request(pending: PendingPermission) -> m.PermissionRequestParams:
    """A waiting request as clients are asked it (`session/requestPermission`) and list it."""
    return m.PermissionRequestParams(
        permission=pending.id,
        agent=pending.agent,
        session=pending.session,
        turn=pending.turn,
        tool_call=pending.tool_call,
        options=pending.options,
    )


def by_policy(
    policy: str, tool_call: dict[str, Any], options: list[dict[str, Any]]
) -> tuple[bool, str | None]:
    """(True, the option chosen) when the policy decides, (False, None) when a person must."""

    def pick(*kinds: str) -> tuple[bool, str | None]:
        for kind in kinds:
            for option in options:
                if option.get("kind") == kind:
                    return True, str(option.get("optionId"))
        return True, None

    if policy == "allow":
        return pick("allow_once", "allow_always")
    if policy == "deny":
        return pick("reject_once", "reject_always")
    if policy == "allow_reads":
        if tool_call.get("kind") in READ_KINDS:
            return pick("allow_once", "allow_always")
        return pick("reject_once", "reject_always")
    return False, None
