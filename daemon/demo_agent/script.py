"""The demo agent's script language: a prompt parsed into steps.

Pure parsing, no I/O: `parse_prompt` turns prompt text into either `Prose` (the
first meaningful line does not start with a command word) or a `Script` (a
tuple of steps, one per command line). Any malformed command line makes the
whole prompt a `ScriptSyntaxError`, so a script with a typo does nothing at all.
The language is documented in docs/demo-agent.md; keep the two in step.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

PlanStatus = Literal["pending", "in_progress", "completed"]
PLAN_STATUSES: tuple[PlanStatus, ...] = ("pending", "in_progress", "completed")

DEFAULT_CRASH_CODE = 3
DEFAULT_FAIL_MESSAGE = "scripted failure"


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Think:
    text: str


@dataclass(frozen=True)
class SetPlan:
    entries: tuple[str, ...]


@dataclass(frozen=True)
class Progress:
    number: int  # 1-based, as written in the script
    status: PlanStatus


@dataclass(frozen=True)
class WriteFile:
    path: str
    text: str
    append: bool


@dataclass(frozen=True)
class EditFile:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class ReadFile:
    path: str


@dataclass(frozen=True)
class RunCommand:
    argv: tuple[str, ...]


@dataclass(frozen=True)
class ShellCommand:
    argv: tuple[str, ...]


@dataclass(frozen=True)
class ReportUsage:
    used: int
    size: int
    cost: float | None


@dataclass(frozen=True)
class TurnTokens:
    input: int
    output: int


@dataclass(frozen=True)
class Ask:
    title: str


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Hang:
    pass


@dataclass(frozen=True)
class Fail:
    message: str


@dataclass(frozen=True)
class Crash:
    code: int


@dataclass(frozen=True)
class WriteStderr:
    size: int


@dataclass(frozen=True)
class ShowHistory:
    pass


@dataclass(frozen=True)
class ShowModel:
    pass


@dataclass(frozen=True)
class SwitchMode:
    """The agent changes its own mode (as an agent leaves plan mode), telling the client."""

    mode: str


@dataclass(frozen=True)
class NameSession:
    """The agent names the session (`session_info_update`), as agents title a conversation."""

    title: str


@dataclass(frozen=True)
class Echo:
    text: str


@dataclass(frozen=True)
class SuggestTask:
    title: str
    prompt: str
    why: str | None


@dataclass(frozen=True)
class StartThread:
    prompt: str


@dataclass(frozen=True)
class WaitThreads:
    timeout: float | None


@dataclass(frozen=True)
class CallMcpTool:
    tool: str
    arguments: dict[str, Any] = field(hash=False)
    server: str = "sessiond"  # the name of one of the session's MCP servers


Action: TypeAlias = (
    Say
    | Think
    | SetPlan
    | Progress
    | WriteFile
    | EditFile
    | ReadFile
    | RunCommand
    | ShellCommand
    | ReportUsage
    | TurnTokens
    | Ask
    | Sleep
    | Hang
    | Fail
    | Crash
    | WriteStderr
    | ShowHistory
    | ShowModel
    | SwitchMode
    | NameSession
    | Echo
    | SuggestTask
    | StartThread
    | WaitThreads
    | CallMcpTool
)


@dataclass(frozen=True)
class Step:
    """One command line of a script, with where it came from (for error messages)."""

    line: int  # 1-based line number within the prompt
    source: str  # the line as written, without its line break
    action: Action


@dataclass(frozen=True)
class Script:
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Prose:
    text: str


class ScriptSyntaxError(ValueError):
    """A command line that cannot be carried out; names the line and says why."""

    def __init__(self, line: int, source: str, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.source = source
        self.reason = reason


class _ArgumentError(ValueError):
    """Raised by a command's argument parser; the caller adds the line number."""


# The first "=>" standing alone: one whitespace character (or the edge of the text) each side.
_ARROW_RE = re.compile(r"(?:^|\s)=>(?:\s|$)")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}
_ESCAPE_RE = re.compile(r"\\(.)", re.DOTALL)


def unescape(text: str) -> str:
    r"""Turn `\n`, `\t` and `\\` into newline, tab and backslash; leave any other backslash alone."""
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)


def _split_path(rest: str, usage: str) -> tuple[str, str]:
    """Split the leading PATH (in '...' or "..." when it holds spaces) from the text after it."""
    if not rest:
        raise _ArgumentError(f"missing PATH (usage: {usage})")
    quote = rest[0]
    if quote in "'\"":
        end = rest.find(quote, 1)
        if end < 0:
            raise _ArgumentError(f"unclosed {quote} in PATH (usage: {usage})")
        path, remainder = rest[1:end], rest[end + 1 :]
        if remainder and not remainder[0].isspace():
            raise _ArgumentError(f"expected a space after the quoted PATH (usage: {usage})")
    else:
        path, remainder = _split_word(rest)
    if not path:
        raise _ArgumentError(f"empty PATH (usage: {usage})")
    return path, remainder.lstrip()


def _words(rest: str, low: int, high: int, usage: str) -> list[str]:
    words = rest.split()
    if not low <= len(words) <= high:
        raise _ArgumentError(f"expected {usage}")
    return words


def _integer(word: str, what: str, minimum: int = 0) -> int:
    try:
        value = int(word)
    except ValueError:
        raise _ArgumentError(f"{what} must be a whole number, not {word!r}") from None
    if value < minimum:
        raise _ArgumentError(f"{what} must be at least {minimum}, not {value}")
    return value


def _number(word: str, what: str) -> float:
    try:
        value = float(word)
    except ValueError:
        raise _ArgumentError(f"{what} must be a number, not {word!r}") from None
    # float() accepts "nan" and "inf": neither is a duration or a price.
    if not 0 <= value < float("inf"):
        raise _ArgumentError(f"{what} must be a finite number of at least 0, not {word!r}")
    return value


def _no_arguments(name: str, make: Callable[[], Action]) -> Callable[[str], Action]:
    def parse(rest: str) -> Action:
        if rest:
            raise _ArgumentError(f"{name} takes no arguments")
        return make()

    return parse


MODE_IDS = ("default", "plan")  # the demo agent's modes (agent.MODES describes them)


def _parse_mode(rest: str) -> Action:
    (mode,) = _words(rest, 1, 1, "mode NAME")
    if mode not in MODE_IDS:
        raise _ArgumentError(f"mode takes one of {', '.join(MODE_IDS)}, not {mode!r}")
    return SwitchMode(mode)


def _parse_title(rest: str) -> Action:
    if not rest.strip():
        raise _ArgumentError("expected title TEXT")
    return NameSession(unescape(rest))


def _parse_say(rest: str) -> Action:
    return Say(unescape(rest))


def _parse_think(rest: str) -> Action:
    return Think(unescape(rest))


def _parse_echo(rest: str) -> Action:
    return Echo(rest)


def _parse_plan(rest: str) -> Action:
    entries = tuple(entry.strip() for entry in rest.split("|") if entry.strip())
    if not entries:
        raise _ArgumentError("expected plan ENTRY | ENTRY | ...")
    return SetPlan(entries)


def _parse_progress(rest: str) -> Action:
    number_word, status = _words(rest, 2, 2, "progress N pending|in_progress|completed")
    number = _integer(number_word, "N", minimum=1)
    if status not in PLAN_STATUSES:
        raise _ArgumentError(f"STATUS must be one of {', '.join(PLAN_STATUSES)}, not {status!r}")
    return Progress(number, status)


def _parse_write(rest: str) -> Action:
    path, text = _split_path(rest, "write PATH TEXT")
    return WriteFile(path, unescape(text), append=False)


def _parse_append(rest: str) -> Action:
    path, text = _split_path(rest, "append PATH TEXT")
    return WriteFile(path, unescape(text), append=True)


def _parse_edit(rest: str) -> Action:
    usage = "edit PATH OLD => NEW"
    path, change = _split_path(rest, usage)
    arrow = _ARROW_RE.search(change)
    if arrow is None:
        raise _ArgumentError(f"missing ' => ' between OLD and NEW (usage: {usage})")
    old, new = change[: arrow.start()], change[arrow.end() :]
    if not old:
        raise _ArgumentError(f"OLD must not be empty (usage: {usage})")
    return EditFile(path, unescape(old), unescape(new))


def _parse_read(rest: str) -> Action:
    path, extra = _split_path(rest, "read PATH")
    if extra:
        raise _ArgumentError("read takes one PATH (quote it when it holds spaces)")
    return ReadFile(path)


def _command_line(rest: str, name: str) -> tuple[str, ...]:
    try:
        argv = shlex.split(rest)
    except ValueError as exc:
        raise _ArgumentError(f"cannot split the command line: {exc}") from None
    if not argv:
        raise _ArgumentError(f"expected {name} COMMAND [ARG...]")
    return tuple(argv)


def _parse_run(rest: str) -> Action:
    return RunCommand(_command_line(rest, "run"))


def _parse_shell(rest: str) -> Action:
    return ShellCommand(_command_line(rest, "shell"))


def _parse_usage(rest: str) -> Action:
    words = _words(rest, 2, 3, "usage USED SIZE [COST]")
    cost = _number(words[2], "COST") if len(words) == 3 else None
    return ReportUsage(_integer(words[0], "USED"), _integer(words[1], "SIZE"), cost)


def _parse_tokens(rest: str) -> Action:
    input_word, output_word = _words(rest, 2, 2, "tokens INPUT OUTPUT")
    return TurnTokens(_integer(input_word, "INPUT"), _integer(output_word, "OUTPUT"))


def _parse_ask(rest: str) -> Action:
    if not rest:
        raise _ArgumentError("expected ask TEXT")
    return Ask(rest)


def _parse_sleep(rest: str) -> Action:
    (seconds,) = _words(rest, 1, 1, "sleep SECONDS")
    return Sleep(_number(seconds, "SECONDS"))


def _parse_fail(rest: str) -> Action:
    return Fail(rest or DEFAULT_FAIL_MESSAGE)


def _parse_crash(rest: str) -> Action:
    words = _words(rest, 0, 1, "crash [CODE]")
    code = _integer(words[0], "CODE") if words else DEFAULT_CRASH_CODE
    if code > 255:
        raise _ArgumentError(f"CODE must be at most 255, not {code}")
    return Crash(code)


def _parse_stderr(rest: str) -> Action:
    (size,) = _words(rest, 1, 1, "stderr N")
    return WriteStderr(_integer(size, "N"))


def _parse_suggest(rest: str) -> Action:
    usage = "suggest TITLE | PROMPT [| WHY]"
    parts = [part.strip() for part in rest.split("|", 2)]
    if len(parts) < 2:
        raise _ArgumentError(f"expected {usage}")
    title, prompt = parts[0], unescape(parts[1])
    why = unescape(parts[2]) if len(parts) == 3 and parts[2] else None
    if not title:
        raise _ArgumentError(f"TITLE must not be empty (usage: {usage})")
    if not prompt:
        raise _ArgumentError(f"PROMPT must not be empty (usage: {usage})")
    return SuggestTask(title, prompt, why)


def _parse_thread(rest: str) -> Action:
    prompt = unescape(rest.strip())
    if not prompt:
        raise _ArgumentError("expected thread PROMPT")
    return StartThread(prompt)


def _parse_wait(rest: str) -> Action:
    words = _words(rest, 0, 1, "wait [SECONDS]")
    if not words:
        return WaitThreads(None)
    seconds = _number(words[0], "SECONDS")
    if seconds == 0:
        raise _ArgumentError("SECONDS must be more than 0")
    return WaitThreads(seconds)


def _parse_mcp(rest: str) -> Action:
    usage = "mcp [SERVER/]TOOL [JSON]"
    if not rest:
        raise _ArgumentError(f"expected {usage}")
    word, text = _split_word(rest)
    server, _, tool = word.rpartition("/")
    if not tool or (server == "" and word.startswith("/")):
        raise _ArgumentError(f"expected {usage}, not {word!r}")
    server = server or "sessiond"
    if not text.strip():
        return CallMcpTool(tool, {}, server)
    try:
        arguments = json.loads(text)
    except ValueError as exc:
        raise _ArgumentError(f"JSON is not valid JSON ({exc}) (usage: {usage})") from None
    if not isinstance(arguments, dict):
        raise _ArgumentError(f"JSON must be an object, not {type(arguments).__name__} (usage: {usage})")
    return CallMcpTool(tool, arguments, server)


_PARSERS: dict[str, Callable[[str], Action]] = {
    "say": _parse_say,
    "think": _parse_think,
    "plan": _parse_plan,
    "progress": _parse_progress,
    "write": _parse_write,
    "append": _parse_append,
    "edit": _parse_edit,
    "read": _parse_read,
    "run": _parse_run,
    "shell": _parse_shell,
    "usage": _parse_usage,
    "tokens": _parse_tokens,
    "ask": _parse_ask,
    "sleep": _parse_sleep,
    "hang": _no_arguments("hang", Hang),
    "fail": _parse_fail,
    "crash": _parse_crash,
    "stderr": _parse_stderr,
    "history": _no_arguments("history", ShowHistory),
    "model": _no_arguments("model", ShowModel),
    "mode": _parse_mode,
    "title": _parse_title,
    "echo": _parse_echo,
    "suggest": _parse_suggest,
    "thread": _parse_thread,
    "wait": _parse_wait,
    "mcp": _parse_mcp,
}

COMMANDS: tuple[str, ...] = tuple(_PARSERS)


def _is_ignored(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _split_word(text: str) -> tuple[str, str]:
    """Split off the first whitespace-delimited word; the rest keeps its trailing whitespace."""
    word = text.split(maxsplit=1)[0]
    return word, text[len(word) :].lstrip()


def _parse_line(number: int, line: str) -> Step:
    name, rest = _split_word(line.lstrip())
    parser = _PARSERS.get(name)
    if parser is None:
        raise ScriptSyntaxError(
            number, line, f"unknown command {name!r}; commands are: {', '.join(COMMANDS)}"
        )
    try:
        action = parser(rest)
    except _ArgumentError as exc:
        raise ScriptSyntaxError(number, line, f"{name}: {exc}") from None
    return Step(number, line, action)


def parse_prompt(text: str) -> Script | Prose:
    """Parse a prompt: a script when its first meaningful line starts with a command, else prose.

    Commands are lower-case and matched exactly, so "Say hello" is prose.
    Raises ScriptSyntaxError for a malformed line of a script.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    meaningful = [(number, line) for number, line in enumerate(lines, start=1) if not _is_ignored(line)]
    if not meaningful or _split_word(meaningful[0][1].lstrip())[0] not in _PARSERS:
        return Prose(text.strip())
    return Script(tuple(_parse_line(number, line) for number, line in meaningful))
