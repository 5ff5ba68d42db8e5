"""Agents the daemon knows without being told: the built-in demo agent and agents.toml.

agents.toml (under the config dir) holds one table per agent::

    [agents.claude]
    command = ["npx", "-y", "@zed-industries/claude-agent-acp"]
    env = { IS_SANDBOX = "1" }
    options = { max_live_sessions = 4, turn_timeout = 900 }

A broken file stops the daemon with one sentence per problem, each naming
the file and the key (``agents.claude.options.max_live_sessions``), the line
and column of a TOML syntax error, or the byte that is not UTF-8.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

# pydantic and the protocol's models load only when there is a file to read (or the demo agent
# to describe, once the daemon is built): a daemon without agents.toml answers without them.
if TYPE_CHECKING:
    import tomllib

    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

    from sessiond.protocol.models import AgentSpec

DEMO = "demo"


def demo_spec(state_dir: Path) -> AgentSpec:
    from sessiond.protocol.models import AgentOptions, AgentSpec

    return AgentSpec(
        name=DEMO,
        command=[
            sys.executable,
            "-m",
            "sessiond.daemon.demo_agent",
            "--state-dir",
            str(state_dir / "demo-agent"),
        ],
        env={},
        options=AgentOptions(),
    )


class ConfigError(Exception):
    pass


def load_agents_toml(path: Path) -> list[AgentSpec]:
    """The agents of an agents.toml; a missing file is no agents, a broken one a clear error."""
    shown = _shown(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ConfigError(
            f"{shown}: cannot be read ({exc.strerror or exc}); fix its permissions or move it away"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{shown}: is not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line}); "
            f"save it as UTF-8 or move it away"
        ) from None
    import tomllib

    from pydantic import ValidationError

    from sessiond.protocol.models import AgentSpec

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: {_toml_problem(exc, text)}; fix the file or move it away") from None
    agents = data.get("agents", {})
    if not isinstance(agents, dict):
        raise ConfigError(
            f"{shown}: agents: must be a table of agent tables ([agents.NAME]), got {_value(agents)}"
        )
    specs: list[AgentSpec] = []
    problems: list[str] = []
    for name, table in agents.items():
        key = f"agents.{_key(name)}"
        if not isinstance(table, dict):
            problems.append(f"{shown}: {key}: must be a table (command, env, options), got {_value(table)}")
            continue
        if "name" in table:
            problems.append(f"{shown}: {key}.name: is not a setting (the table's key is the agent's name)")
            continue
        try:
            specs.append(AgentSpec.model_validate({"name": name, **table}))
        except ValidationError as exc:
            problems += [f"{shown}: {_problem(key, error, table)}" for error in exc.errors()]
    if problems:
        raise ConfigError("\n".join([*problems, f"fix {shown} (or move it away) and start sessiond again"]))
    return specs


def _shown(path: Path) -> str:
    """The path as a person would type it: ~ for the home directory."""
    home = os.path.expanduser("~")
    text = str(path)
    if home not in ("", "/", "~") and text.startswith(home + os.sep):
        return "~" + text[len(home) :]
    return text


def _toml_problem(exc: tomllib.TOMLDecodeError, text: str) -> str:
    """'line L, column C: what' from tomllib's error (3.14 has attributes, older a suffix)."""
    message = str(exc)
    line, column = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    found = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
    if found:
        message = message[: found.start()]
        line, column = line or int(found[1]), column or int(found[2])
    elif found := re.search(r"\s*\(at end of document\)\s*$", message):
        message = message[: found.start()] + " at the end of the file"
        lines = text.split("\n")
        line, column = len(lines), len(lines[-1]) + 1
    message = getattr(exc, "msg", None) or message
    where = f"line {line}, column {column}: " if line is not None else ""
    return f"{where}invalid TOML ({message[:1].lower()}{message[1:]})"


_KINDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "list": "a list",
    "dict": "a table",
    "model": "a table",
}
_ERROR_KINDS = {
    "int_parsing": "int",
    "int_type": "int",
    "int_from_float": "int",
    "float_parsing": "float",
    "float_type": "float",
    "bool_parsing": "bool",
    "bool_type": "bool",
    "string_type": "str",
    "list_type": "list",
    "dict_type": "dict",
    "model_type": "model",
    "model_attributes_type": "model",
}


def _problem(prefix: str, error: Any, table: dict[str, Any]) -> str:
    """One sentence for one of pydantic's errors: the key, what it must be, what it was."""
    loc: tuple[str | int, ...] = tuple(error["loc"])
    kind: str = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    if loc and loc[0] == "name":  # the table's own key
        return (
            f"{prefix}: the agent's name must be 1 to 64 letters, digits, '_', '.' or '-', "
            f"starting with a letter or digit"
        )
    from sessiond.protocol.models import AgentSpec

    key = prefix + "".join(f"[{part}]" if isinstance(part, int) else f".{_key(part)}" for part in loc)
    field = _field(AgentSpec, loc)
    if kind == "missing":
        return f"{key}: is required; add it"
    if kind == "extra_forbidden":
        known = _known(loc[:-1])
        return f"{key}: is not a setting here" + (f"; known: {', '.join(known)}" if known else "")
    got = _value(error.get("input"))
    if kind == "literal_error":
        return f"{key}: must be one of {ctx.get('expected', '?')}, got {got}"
    if kind == "value_error":
        return f"{key}: {ctx.get('error', error['msg'])}"
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        return f"{key}: must list at least {least} item{'' if least == 1 else 's'}, got {got}"
    base = _ERROR_KINDS.get(kind) or _kind_of(field)
    expected = _KINDS.get(base or "", "") or error["msg"].removeprefix("Input should be ")
    if (bound := _bound(kind, ctx, field)) is not None:
        expected = f"{expected} {bound}".strip()
    return f"{key}: must be {expected}, got {got}"


def _key(part: str) -> str:
    return part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"'


def _value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _field(model: type[BaseModel], loc: tuple[str | int, ...]) -> FieldInfo | None:
    """The field a location names, through nested models (by name or camelCase alias)."""
    from pydantic import BaseModel

    field: FieldInfo | None = None
    current: Any = model
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or isinstance(part, int):
            return field if isinstance(part, int) else None
        field = _named(current, part)
        if field is None:
            return None
        current = field.annotation
    return field


def _named(model: type[BaseModel], part: str) -> FieldInfo | None:
    for name, info in model.model_fields.items():
        if part in (name, info.alias):
            return info
    return None


def _known(loc: tuple[str | int, ...]) -> list[str]:
    """The keys a table at `loc` takes (an agent's own table when `loc` is empty)."""
    from pydantic import BaseModel

    from sessiond.protocol.models import AgentSpec

    field = _field(AgentSpec, loc) if loc else None
    model: Any = field.annotation if field is not None else (AgentSpec if not loc else None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return sorted(n for n in model.model_fields if not (model is AgentSpec and n == "name"))
    return []


def _kind_of(field: FieldInfo | None) -> str | None:
    if field is None:
        return None
    text = str(field.annotation)
    for base in ("bool", "int", "float", "str"):
        if re.search(rf"\b{base}\b", text):
            return base
    return None


def _bound(kind: str, ctx: dict[str, Any], field: FieldInfo | None) -> str | None:
    """The field's bound (≥ 1, > 0), from the error or, for a type error, from the field."""
    if kind == "greater_than_equal":
        return f"≥ {_number(ctx.get('ge'))}"
    if kind == "greater_than":
        return f"> {_number(ctx.get('gt'))}"
    if field is None or kind not in _ERROR_KINDS:
        return None
    for item in field.metadata:
        if (ge := getattr(item, "ge", None)) is not None:
            return f"≥ {_number(ge)}"
        if (gt := getattr(item, "gt", None)) is not None:
            return f"> {_number(gt)}"
    return None


def _number(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value
