"""A session's controls: the modes, config options and slash commands its agent offers, and what a
person chose of them.

The agent says what it offers when it opens a session (the modes and config options answered to
session/new, resume, load or fork) and whenever that changes (`current_mode_update`,
`config_option_update`, `available_commands_update`). A person's choices (`session/setMode`,
`session/setConfigOption`) are kept with the session in the store, so a session that is not live at
its agent (not opened yet, or evicted) takes them when it opens: after its agent's own `mode` and
`config` options, so what was chosen for one session wins over the agent's default for all.

Plain data: the core keeps an `Offer` per session and the last one per agent, and `Choices` per
session; nothing here talks to an agent.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, cast

from sessiond.daemon.agent_types import SessionSetup
from sessiond.protocol import fast_json
from sessiond.protocol import models as m

# The agent's session updates that change what it offers.
UPDATE_KINDS = frozenset({"current_mode_update", "config_option_update", "available_commands_update"})


@dataclass
class Offer:
    """What an agent offers one session, as it last said (in ACP's JSON shapes)."""

    modes: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "description"?}
    mode: str | None = None
    options: list[dict[str, Any]] = field(default_factory=list)  # ACP SessionConfigOption
    commands: list[dict[str, Any]] = field(default_factory=list)  # ACP AvailableCommand

    def update(self, kind: str, payload: dict[str, Any]) -> bool:
        """Take one of the agent's `UPDATE_KINDS`; whether what it offers changed."""
        if kind == "current_mode_update":
            mode = payload.get("currentModeId")
            if not isinstance(mode, str) or mode == self.mode:
                return False
            self.mode = mode
            return True
        if kind == "config_option_update":
            options = [o for o in payload.get("configOptions") or [] if isinstance(o, dict) and o.get("id")]
            if options == self.options:
                return False
            self.options = options
            return True
        if kind == "available_commands_update":
            commands = [
                c for c in payload.get("availableCommands") or [] if isinstance(c, dict) and c.get("name")
            ]
            if commands == self.commands:
                return False
            self.commands = commands
            return True
        return False

    def mode_ids(self) -> list[str]:
        return [str(mode["id"]) for mode in self.modes]

    def option(self, config_id: str) -> dict[str, Any] | None:
        return next((o for o in self.options if o.get("id") == config_id), None)

    def take_options(self, options: list[dict[str, Any]]) -> None:
        """Every option as the agent answered a change of one (kept as they were if it sent none)."""
        if options:
            self.options = options

    def set_value(self, config_id: str, value: str | bool) -> None:
        option = self.option(config_id)
        if option is not None:
            option["currentValue"] = value

    def copy(self) -> Offer:
        return Offer(
            modes=[dict(mode) for mode in self.modes],
            mode=self.mode,
            options=[dict(option) for option in self.options],
            commands=list(self.commands),
        )


def offer_of(setup: SessionSetup) -> Offer:
    """What the agent offers a session, from its answer to opening (or restoring) it."""
    return Offer(modes=list(setup.modes), mode=setup.mode, options=[dict(o) for o in setup.config.values()])


def value_problem(option: dict[str, Any], value: str | bool) -> str | None:
    """What is wrong with setting `option` to `value`, in words; None when nothing is."""
    if option.get("type") == "boolean":
        return None if isinstance(value, bool) else f"takes true or false, not {value!r}"
    if isinstance(value, bool):
        return f"takes one of its values, not {value}"
    values = m.config_values(option)
    if values and value not in values:
        return f"takes one of {', '.join(values)}, not {value!r}"
    return None


@dataclass
class Choices:
    """What a person chose for one session: kept in the store, applied when it opens."""

    mode: str | None = None
    config: dict[str, str | bool] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.mode is not None or bool(self.config)

    def follow(self, offer: Offer) -> bool:
        """Take what the agent changed itself over what was chosen; whether anything changed."""
        changed = False
        if self.mode is not None and offer.mode is not None and offer.mode != self.mode:
            self.mode, changed = offer.mode, True
        for config_id in self.config:
            option = offer.option(config_id)
            value = option.get("currentValue") if option is not None else None
            if isinstance(value, (str, bool)) and value != self.config[config_id]:
                self.config[config_id], changed = value, True
        return changed

    def dumps(self) -> str | None:
        if not self:
            return None
        return json.dumps({"mode": self.mode, "config": self.config}, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str | None) -> Choices:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(mode=data.get("mode"), config=dict(data.get("config") or {}))


# What agents call a mode in which they change no files: Codex's "read-only" approval preset,
# taken wherever offered; "plan" only where it was tested to write nothing: opencode's (a config
# option of category `mode`). In claude-agent-acp's `plan`, Claude Code wrote a file unasked,
# where in its default mode it asks first and the daemon says no.
READ_ONLY_MODE = "read-only"
PLAN_WRITES_NOTHING = frozenset({"OpenCode"})  # by the name the agent's initialize answer gives


def read_only_modes(agent_name: str) -> tuple[str, ...]:
    return (READ_ONLY_MODE, "plan") if agent_name in PLAN_WRITES_NOTHING else (READ_ONLY_MODE,)


def read_only(choices: Choices | None, offer: Offer, modes: tuple[str, ...]) -> Choices | None:
    """`choices` with the agent's read-only mode (the first of `modes` it offers), where no mode was
    chosen: a side chat that may not write files opens in it (Codex and opencode write files and
    run commands in their own process, unasked, where the daemon cannot refuse them)."""
    chosen = choices if choices is not None else Choices()
    mode_options = [o for o in offer.options if o.get("category") == "mode" and o.get("id")]
    if chosen.mode is not None or any(str(o["id"]) in chosen.config for o in mode_options):
        return choices
    for name in modes:
        if name in offer.mode_ids():
            chosen.mode = name
            return chosen
        for option in mode_options:
            if name in m.config_values(option):
                chosen.config[str(option["id"])] = name
                return chosen
    return choices


def controls_info(offer: Offer | None, source: m.ControlsSource, choices: Choices) -> m.SessionControls:
    """The wire form: what is offered, with the person's choices laid over it where the agent has
    not taken them yet (a session that is not live)."""
    shown = offer.copy() if offer is not None else Offer()
    if source != "session":
        if choices.mode is not None:
            shown.mode = choices.mode
        for config_id, value in choices.config.items():
            shown.set_value(config_id, value)
    return m.SessionControls(
        source=source,
        modes=[
            m.ModeInfo(
                id=str(mode["id"]),
                name=str(mode.get("name") or mode["id"]),
                description=mode.get("description"),
            )
            for mode in shown.modes
        ],
        mode=shown.mode,
        config_options=shown.options,
        commands=[
            m.AgentCommand(
                name=str(command["name"]),
                description=str(command.get("description") or ""),
                hint=(command.get("input") or {}).get("hint")
                if isinstance(command.get("input"), dict)
                else None,
            )
            for command in shown.commands
        ],
        chosen=m.ChosenControls(mode=choices.mode, config=dict(choices.config)),
    )


_WIRES: OrderedDict[bytes, bytes] = OrderedDict()  # what controls_wire made, by what it was made from
WIRE_CACHE = 256


def controls_wire(offer: Offer | None, source: m.ControlsSource, choices: Choices) -> dict[str, Any]:
    """`controls_info(...).wire()`, made once for each set of inputs (every session an agent opens
    is offered the same, and says so in an event): a fresh copy each time."""
    try:
        key = fast_json.dumps(
            [source, choices.mode, choices.config]
            + ([offer.modes, offer.mode, offer.options, offer.commands] if offer is not None else [])
        )
    except (TypeError, ValueError):
        return controls_info(offer, source, choices).wire()
    wire = _WIRES.get(key)
    if wire is None:
        wire = _WIRES[key] = fast_json.dumps(controls_info(offer, source, choices).wire())
        while len(_WIRES) > WIRE_CACHE:
            _WIRES.popitem(last=False)
    else:
        _WIRES.move_to_end(key)
    return cast(dict[str, Any], fast_json.loads(wire))
