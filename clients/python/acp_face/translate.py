"""The daemon's events as ACP ``session/update``s: a pure translation, no I/O.

One ``Translator`` per ACP session. It is fed the daemon's events of that
session (live, while a prompt streams, or replayed from the event log by
``session/load``) and answers the updates an ACP client should be sent, in
order. It remembers the plan and context fill it last sent, so the state the
turn's answer carries is sent once more only when it differs.

What maps to what:

=====================  ===============================================
daemon event           ACP update
=====================  ===============================================
``turn.queued``        ``user_message_chunk`` (replay only: live, the
                       editor already shows what it sent)
``turn.chunk``         ``agent_message_chunk``
``turn.thought``       ``agent_thought_chunk``
``turn.tool``          ``tool_call`` (``first``) or ``tool_call_update``,
                       with kind, status, locations and diffs
``session.plan``       ``plan``
``session.usage``      ``usage_update`` (context fill and cost)
``session.controls``   ``current_mode_update``, ``config_option_update``,
                       ``available_commands_update`` (the agent's commands
                       after sessiond's own), each only when it changed
``session.titled``     ``session_info_update`` (its title)
=====================  ===============================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from acp import schema
from pydantic import TypeAdapter, ValidationError

from sessiond.protocol.models import ContextFill, Event, EventKind, Plan, SessionControls

Update = (
    schema.UserMessageChunk
    | schema.AgentMessageChunk
    | schema.AgentThoughtChunk
    | schema.ToolCallStart
    | schema.ToolCallProgress
    | schema.AgentPlanUpdate
    | schema.AvailableCommandsUpdate
    | schema.UsageUpdate
    | schema.CurrentModeUpdate
    | schema.ConfigOptionUpdate
    | schema.SessionInfoUpdate
)
ConfigOption = schema.SessionConfigOptionSelect | schema.SessionConfigOptionBoolean
_CONFIG_OPTION: TypeAdapter[ConfigOption] = TypeAdapter(ConfigOption)
Command = tuple[str, str, str | None]  # name, description, input hint

TOOL_KINDS: frozenset[str] = frozenset(get_args(schema.ToolKind))
TOOL_STATUSES: frozenset[str] = frozenset(get_args(schema.ToolCallStatus))
PLAN_STATUSES: frozenset[str] = frozenset(get_args(schema.PlanEntryStatus))
PLAN_PRIORITIES: frozenset[str] = frozenset(get_args(schema.PlanEntryPriority))
STOP_REASONS: frozenset[str] = frozenset(get_args(schema.StopReason))


def text_block(text: str) -> schema.TextContentBlock:
    return schema.TextContentBlock(type="text", text=text)


def message(text: str) -> schema.AgentMessageChunk:
    return schema.AgentMessageChunk(session_update="agent_message_chunk", content=text_block(text))


def thought(text: str) -> schema.AgentThoughtChunk:
    return schema.AgentThoughtChunk(session_update="agent_thought_chunk", content=text_block(text))


def user_message(text: str) -> schema.UserMessageChunk:
    return schema.UserMessageChunk(session_update="user_message_chunk", content=text_block(text))


def stop_reason(reason: str) -> str:
    """The daemon's stop reason as ACP's (they share their names; anything else ends the turn)."""
    return reason if reason in STOP_REASONS else "end_turn"


def plan_update(plan: Plan | Mapping[str, Any] | None) -> schema.AgentPlanUpdate:
    """A ``plan`` update: the whole plan (ACP plans replace the last one); none is an empty plan."""
    if isinstance(plan, Plan):
        raw = [entry.model_dump(mode="json") for entry in plan.entries]
    else:
        raw = list((plan or {}).get("entries") or [])
    entries = []
    for entry in raw:
        if not isinstance(entry, Mapping):
            continue
        status = str(entry.get("status", "pending"))
        priority = str(entry.get("priority", "medium"))
        entries.append(
            schema.PlanEntry(
                content=str(entry.get("content", "")),
                status=status if status in PLAN_STATUSES else "pending",
                priority=priority if priority in PLAN_PRIORITIES else "medium",
            )
        )
    return schema.AgentPlanUpdate(session_update="plan", entries=entries)


def usage_update(context: ContextFill | Mapping[str, Any] | None) -> schema.UsageUpdate | None:
    """A ``usage_update`` (tokens in the context window of its size, cost so far), or None without one."""
    if context is None:
        return None
    raw = context.model_dump(mode="json") if isinstance(context, ContextFill) else dict(context)
    used, size = raw.get("used"), raw.get("size")
    if not isinstance(used, int) or not isinstance(size, int) or used < 0 or size < 0:
        return None
    cost = raw.get("cost")
    return schema.UsageUpdate(
        session_update="usage_update",
        used=used,
        size=size,
        cost=(
            schema.Cost(amount=float(cost["amount"]), currency=str(cost.get("currency", "USD")))
            if isinstance(cost, Mapping) and isinstance(cost.get("amount"), int | float)
            else None
        ),
    )


def tool_update(data: Mapping[str, Any]) -> schema.ToolCallStart | schema.ToolCallProgress | None:
    """A ``turn.tool`` event's data as ``tool_call`` (when the call starts) or ``tool_call_update``."""
    tool_id = data.get("toolCallId")
    if not tool_id:
        return None
    kind = data.get("toolKind")
    status = data.get("status")
    locations = [
        schema.ToolCallLocation(path=str(path))
        for path in data.get("locations") or []
        if isinstance(path, str)
    ]
    diffs: list[Any] = [
        schema.FileEditToolCallContent(
            type="diff",
            path=str(diff["path"]),
            old_text=diff.get("oldText"),
            new_text=str(diff.get("newText") or ""),
        )
        for diff in data.get("diffs") or []
        if isinstance(diff, Mapping) and diff.get("path")
    ]
    fields: dict[str, Any] = {
        "tool_call_id": str(tool_id),
        "kind": kind if kind in TOOL_KINDS else ("other" if kind else None),
        "status": status if status in TOOL_STATUSES else None,
        "locations": locations or None,
        "content": diffs or None,
    }
    if data.get("first"):
        return schema.ToolCallStart(session_update="tool_call", title=str(data.get("title") or ""), **fields)
    title = data.get("title")
    return schema.ToolCallProgress(session_update="tool_call_update", title=title or None, **fields)


def available_commands(commands: Sequence[tuple[str, str, str | None]]) -> schema.AvailableCommandsUpdate:
    """``available_commands_update`` from (name, description, input hint or None)."""
    return schema.AvailableCommandsUpdate(
        session_update="available_commands_update",
        available_commands=[
            schema.AvailableCommand(
                name=name,
                description=description,
                input=(
                    schema.AvailableCommandInput(root=schema.UnstructuredCommandInput(hint=hint))
                    if hint
                    else None
                ),
            )
            for name, description, hint in commands
        ],
    )


def mode_state(controls: SessionControls) -> schema.SessionModeState | None:
    """The session's modes as ACP answers them to session/new and load (None: it offers none)."""
    if not controls.modes or controls.mode is None:
        return None
    return schema.SessionModeState(
        current_mode_id=controls.mode,
        available_modes=[
            schema.SessionMode(id=mode.id, name=mode.name, description=mode.description)
            for mode in controls.modes
        ],
    )


def config_options(controls: SessionControls) -> list[ConfigOption] | None:
    """The session's config options in ACP's shapes (one the schema cannot read is left out)."""
    options: list[ConfigOption] = []
    for option in controls.config_options:
        try:
            options.append(_CONFIG_OPTION.validate_python(option))
        except ValidationError:
            continue
    return options or None


def agent_commands(controls: SessionControls, own: Sequence[Command]) -> list[Command]:
    """The agent's slash commands, after sessiond's ``own`` (which win a clash of names)."""
    taken = {name for name, _, _ in own}
    return [*own, *((c.name, c.description, c.hint) for c in controls.commands if c.name not in taken)]


def _dumped(options: Sequence[ConfigOption]) -> list[Any]:
    return [option.model_dump(mode="json", by_alias=True) for option in options]


class Translator:
    """One ACP session's view of the daemon's events; see the module's table."""

    def __init__(self) -> None:
        # The mode, config options (as dumped) and commands the editor was last told.
        self._mode: str | None = None
        self._options: list[Any] | None = None
        self._commands: list[Command] | None = None
        self._plan: list[Any] | None = None  # the plan entries last sent, as dumped
        self._usage: tuple[int, int, float | None] | None = None

    def event(self, event: Event, *, turn: str | None = None, replay: bool = False) -> list[Update]:
        """The updates for one event. With ``turn``, turn events of other turns are left out
        (another client's turn in the same session); with ``replay``, prompts are told too."""
        kind, data = event.kind, event.data
        of_a_turn = (EventKind.TURN_QUEUED, EventKind.TURN_CHUNK, EventKind.TURN_THOUGHT, EventKind.TURN_TOOL)
        if kind in of_a_turn and turn is not None and event.turn != turn:
            return []
        if kind is EventKind.TURN_QUEUED:
            prompt = data.get("prompt")
            return [user_message(str(prompt))] if replay and prompt else []
        if kind is EventKind.TURN_CHUNK:
            return [message(str(data["text"]))] if data.get("text") else []
        if kind is EventKind.TURN_THOUGHT:
            return [thought(str(data["text"]))] if data.get("text") else []
        if kind is EventKind.TURN_TOOL:
            update = tool_update(data)
            return [update] if update is not None else []
        if kind is EventKind.SESSION_PLAN:
            return self.plan(data.get("plan"))
        if kind is EventKind.SESSION_USAGE:
            return self.usage(data.get("context"))
        if kind is EventKind.SESSION_TITLED and data.get("title"):
            return [schema.SessionInfoUpdate(session_update="session_info_update", title=str(data["title"]))]
        return []

    def controls(self, controls: SessionControls, own: Sequence[Command]) -> list[Update]:
        """The mode, the config options and the commands, each only if it differs from what was
        last sent (or answered to session/new or load: ``told``)."""
        updates: list[Update] = []
        if controls.mode is not None and controls.mode != self._mode:
            updates.append(
                schema.CurrentModeUpdate(session_update="current_mode_update", current_mode_id=controls.mode)
            )
        options = config_options(controls)
        if options is not None and _dumped(options) != self._options:
            updates.append(
                schema.ConfigOptionUpdate(session_update="config_option_update", config_options=options)
            )
        commands = agent_commands(controls, own)
        if commands != self._commands:
            updates.append(available_commands(commands))
        self.told(controls)
        self._commands = commands
        return updates

    def told(self, controls: SessionControls) -> None:
        """The editor has this mode and these options (session/new or load answered them)."""
        self._mode = controls.mode
        self._options = _dumped(config_options(controls) or [])

    def plan(self, plan: Plan | Mapping[str, Any] | None) -> list[Update]:
        """The plan, unless it is the one last sent (or there never was one)."""
        if plan is None and self._plan is None:
            return []
        update = plan_update(plan)
        dumped = [entry.model_dump(mode="json") for entry in update.entries]
        if dumped == self._plan:
            return []
        self._plan = dumped
        return [update]

    def usage(self, context: ContextFill | Mapping[str, Any] | None) -> list[Update]:
        """The context fill, unless it is what was last sent."""
        update = usage_update(context)
        if update is None:
            return []
        key = (update.used, update.size, update.cost.amount if update.cost else None)
        if key == self._usage:
            return []
        self._usage = key
        return [update]
