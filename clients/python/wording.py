"""What a person reads: a session shown whole, the fleet in one line, a merge's outcome,
and the durations, sums of money and moments in them. The command line, its live view
(``sessiond watch``) and the ACP face's slash commands all say things this way."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiond.protocol.models import (
        ContextFill,
        Fleet,
        MergeEntry,
        PermissionRequestParams,
        SessionControls,
        SessionInfo,
        Transcript,
    )


def short(text: str | None, limit: int | None = 60) -> str:
    """`text` on one line (its runs of white space one space), cut to `limit` cells (None: whole)."""
    line = " ".join((text or "").split())
    return line if limit is None else cut(line, limit)


# ---------------------------------------------------------------- terminal cells


def char_cells(char: str) -> int:
    """The cells a character takes in a terminal: two for a wide one (CJK, emoji), none for a
    combining mark or a zero-width one, else one."""
    if unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cells(text: str) -> int:
    """The cells `text` takes in a terminal (as `len` counts them for plain ASCII)."""
    return len(text) if text.isascii() else sum(char_cells(char) for char in text)


def cut(text: str, width: int) -> str:
    """`text` in at most `width` cells: cut with "…" when it takes more."""
    if width <= 0:
        return ""
    if text.isascii():
        return text if len(text) <= width else text[: width - 1] + "…"
    kept: list[tuple[str, int]] = []
    used = 0
    for char in text:
        size = char_cells(char)
        if used + size > width:
            break
        kept.append((char, size))
        used += size
    else:
        return text
    while used > width - 1:  # room for the "…"
        used -= kept.pop()[1]
    return "".join(char for char, _ in kept) + "…"


def columns_that_fit(widths: Mapping[str, int], room: int, dropped_first: Sequence[str]) -> list[str]:
    """The columns of `widths` (the cells each takes) kept in `room` cells: those named in
    `dropped_first` go, in that order, while the kept ones take more (the others always stay)."""
    kept = list(widths)
    for name in dropped_first:
        if sum(widths[column] for column in kept) <= room:
            break
        kept.remove(name)
    return kept


# A title column and a last column after it (a last line, a recap) keep at least these many cells
# each while a narrow terminal's other columns go; a title takes at most TITLE_MOST.
TITLE_LEAST, LAST_LEAST, TITLE_MOST = 18, 20, 60


def title_cells(room: int, longest: int, last: int | None = None) -> int:
    """The cells of a title column sharing `room` with a last column after it (a recap that needs
    `last` cells, or a last line, None: it takes what it is given): what the longest title needs, up
    to TITLE_MOST, out of what the last column leaves, or a third of the room; TITLE_LEAST at least."""
    leaves = 0 if last is None else room - last
    return min(longest, TITLE_MOST, max(TITLE_LEAST, leaves, room // 3))


def pad(text: str, width: int, *, right: bool = False) -> str:
    """`text` cut to `width` cells and filled with spaces to take exactly that many (on the left
    with `right`, for numbers)."""
    text = cut(text, width)
    fill = " " * max(width - cells(text), 0)
    return fill + text if right else text + fill


def title_text(title: str | None, kind: str | None = None, parent: str | None = None) -> str:
    """A session's title as a list shows it: a side chat, task or thread says whose it is first
    ("side of s1: why does the test flake?"); "" for a session with neither."""
    if not kind or kind == "main" or not parent:
        return title or ""
    whose = f"{kind} of {parent}"
    # (a side chat opened before they were named by their question was titled so)
    return f"{whose}: {title}" if title and title != whose else whose


def count(n: int, noun: str) -> str:
    """`1 turn`, `2 turns`: a number and its noun (made plural with an s)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def resting_line(status: str, last_error: str | None, recap: str | None) -> str:
    """The last line of a session not at work: why its last turn failed, or its recap."""
    if status == "failed" and last_error:
        return f"error: {last_error}"
    return recap or ""


# How a turn that did not end normally ended, by its stop reason (ACP's), as a person is told.
STOP_REASONS = {
    "max_tokens": "the agent stopped at its token limit (max_tokens): the reply may be cut short",
    "max_turn_requests": "the agent stopped at its limit of requests in one turn (max_turn_requests)",
    "refusal": "the agent refused to go on (refusal)",
}


def turn_ending(stop_reason: str | None, cancelled_by: str | None = None) -> str | None:
    """How a turn that did not end normally ended ("the turn was cancelled by the daemon
    stopping"); None for one that did, or whose end is not known."""
    if stop_reason is None or stop_reason == "end_turn":
        return None
    if stop_reason == "cancelled":
        return f"the turn was cancelled {cancelled_by or ''}".rstrip()
    return STOP_REASONS.get(stop_reason, f"the turn ended: {stop_reason}")


def when(moment: Any) -> str:
    """A moment in local time: a datetime, or the ISO text the daemon's JSON carries."""
    if isinstance(moment, str):
        from datetime import datetime

        moment = datetime.fromisoformat(moment)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def has_turn_on(status: str) -> bool:
    """A working session, or one waiting for you, has a turn running."""
    return status in ("working", "needs_you")


def turns_text(info: SessionInfo) -> str:
    """`3 ended, 1 running, 2 queued`."""
    running = ", 1 running" if has_turn_on(info.status) else ""
    return f"{info.turns} ended{running}, {info.queued_turns} queued"


def turns_cell(ended: int, status: str, queued: int) -> str:
    """`sessiond ls`'s TURNS: the ended ones, then `+N` for those running or queued (`0+1`: the
    first turn is on; a bare `0` read as if nothing had been asked)."""
    on = int(has_turn_on(status)) + queued
    return f"{ended}+{on}" if on else str(ended)


def asked_text(tool_call: Mapping[str, Any]) -> str:
    """What an agent asks permission for, as its tool call reads in a transcript:
    "[execute] rm -rf build"."""
    # Imported here: the commands that print through plain.py load no models until they show one.
    from sessiond.protocol.models import tool_line

    return tool_line(tool_call.get("kind"), " ".join(str(tool_call.get("title") or "a tool call").split()))


def option_of(options: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    """The option of a permission request that is of this kind (allow_once, reject_always, ...)."""
    return next((option for option in options if option.get("kind") == kind), None)


def options_text(options: Sequence[Mapping[str, Any]]) -> str:
    """A request's options as a person picks one: "Allow (allow_once), Reject (reject_once)"."""
    return ", ".join(
        f"{option.get('name') or option.get('optionId')} ({option.get('kind')})" for option in options
    )


def show_lines(
    info: SessionInfo,
    transcript: Transcript | None,
    asks: Sequence[PermissionRequestParams] = (),
    width: int | None = None,
) -> list[str]:
    """A session as ``sessiond show`` (and the open view of ``sessiond watch``) shows it, with
    the permission requests it waits on (`asks`); with `width`, each transcript line cut to
    that many cells (a line may be a whole file pasted into a prompt)."""
    pairs = [
        ("id", info.id),
        ("agent", info.agent),
        ("root", info.root),
        ("placement", placement_text(info)),
        ("title", info.title or "-"),
        (
            "status",
            f"{info.status.value} since {when(info.status_since)}"
            + (f": {info.status_detail}" if info.status_detail else ""),
        ),
        ("turns", turns_text(info)),
    ]
    pairs += [
        ("asks", f"{asked_text(asked.tool_call)} ({asked.permission}: sessiond allow or reject it)")
        for asked in asks
    ]
    if info.kind != "main" or info.parent:
        pairs.append(("kind", f"{info.kind} of {info.parent}" if info.parent else info.kind))
    if info.run:
        pairs.append(("run", info.run))
    pairs += [
        ("context", context_text(info.context)),
        ("usage", usage_text(info)),
        ("attention", ", ".join(a.value for a in info.attention) or "-"),
        ("last stop", info.last_stop_reason or "-"),
        ("last error", info.last_error or "-"),
        ("recap", info.recap or "-"),
        ("created", when(info.created_at)),
    ]
    keys = max(len(key) for key, _ in pairs)
    lines = [f"{key.ljust(keys)}  {value}" for key, value in pairs]
    plan = info.plan
    if plan is not None and plan.entries:
        lines += ["", f"plan ({plan.done} of {plan.total} done)"]
        marks = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
        lines += [f"  {marks.get(e.status, '[?]')} {e.content}" for e in plan.entries]
    changes = info.changes
    if changes is not None and changes.files:
        lines += ["", f"changed files ({len(changes.files)}, +{changes.added} -{changes.removed})"]
        path_width = max(len(f.path) for f in changes.files)
        for f in changes.files:
            kind = CHANGE_MARKS.get(f.kind, "?")
            notes = f"  (was {f.old_path})" if f.old_path else ""
            notes += "  (outside the root)" if f.outside_root else ""
            notes += f"  (shared with {names_text(f.shared_with)})" if f.shared_with else ""
            lines.append(f"  {kind} {f.path.ljust(path_width)}  +{f.added} -{f.removed}{notes}")
    if changes is not None and changes.others:
        others = count(len(changes.others), "file")
        lines += ["", f"others' changes in the root: {others} (not counted above)"]
    if transcript is not None and transcript.lines:
        lines += transcript_lines(info.id, transcript, width)
    return lines


def transcript_lines(session: str, transcript: Transcript, width: int | None) -> list[str]:
    """A transcript's lines under their title, each cut to `width` cells (when given), with a
    word on where to read whole the lines that were cut."""
    total = max(transcript.total, transcript.lines[-1].n + 1)
    whole = [f"  {line.role.ljust(7)} {line.text}" for line in transcript.lines]
    shown = whole if width is None else [cut(line, width) for line in whole]
    lines = ["", f"transcript (last {len(transcript.lines)} of {count(total, 'line')})", *shown]
    if shown != whole:
        lines.append(
            f"(lines cut to {width} characters: `sessiond show {session} --json` "
            f"or `sessiond trace --session {session}` gives them whole)"
        )
    return lines


CHANGE_MARKS = {"added": "A", "modified": "M", "deleted": "D", "renamed": "R"}


def names_text(names: list[str], most: int = 3) -> str:
    """`s2, s3`; past `most`, the first ones and how many more (`s2, s3, s4 +5`)."""
    shown = ", ".join(names[:most])
    return f"{shown} +{len(names) - most}" if len(names) > most else shown


def placement_text(info: SessionInfo) -> str:
    where = info.where
    if where is None:
        return info.placement
    parts: list[str] = [info.placement]
    if where.branch:
        parts.append(f"branch {where.branch}")
    if where.root != info.root:
        parts.append(f"at {where.host + ':' if where.host else ''}{where.root}")
    return ", ".join(parts)


def plan_cell(done: int, total: int) -> str:
    """A plan in a column: `2/5` steps done, `-` without one."""
    return f"{done}/{total}" if total else "-"


def context_cell(used: int, size: int, percent: float | None, *, estimated: bool) -> str:
    """The context fill in a column: `25%`, `25%~` when estimated."""
    if percent is None:
        percent = 100 * used / max(size, 1)
    shown = "<1" if 0 < percent < 1 else f"{percent:.0f}"  # (some context is not none)
    return f"{shown}%{'~' if estimated else ''}"


def files_cell(count: int, added: int, removed: int) -> str:
    """Changed files in a column: `3 +40 -2` (files, lines added and removed), `-` for none."""
    return f"{count} +{added} -{removed}" if count else "-"


def context_text(context: ContextFill | None) -> str:
    if context is None:
        return "-"
    percent = context.percent if context.percent is not None else 100 * context.used / max(context.size, 1)
    text = f"{context.used:,} of {context.size:,} tokens ({percent:.1f}%)"
    if context.cost is not None:
        text += f", {money(context.cost.amount, context.cost.currency)}"
    return text + (" (estimated)" if context.estimated else "")


def usage_text(info: SessionInfo) -> str:
    usage = info.usage
    if usage is None or not usage.turns:
        return "-"
    if not (usage.total_tokens or usage.input_tokens or usage.output_tokens):
        # (an agent that reports no tokens is not one that used none)
        busy = f"busy {duration(usage.busy_seconds)} over {count(usage.turns, 'turn')}"
        return f"{busy}; no token counts from the agent"
    return (
        f"{usage.total_tokens:,} tokens over {count(usage.turns, 'turn')} "
        f"({usage.input_tokens:,} in, {usage.output_tokens:,} out), busy {duration(usage.busy_seconds)}"
    )


def money(amount: float, currency: str = "USD") -> str:
    """`$0.0123`; a cost above 0 that would read `$0.0000` reads `<$0.0001` (it is not nothing)."""
    if 0 < amount < 0.00005:
        return "<$0.0001" if currency == "USD" else f"<0.0001 {currency}"
    return f"${amount:.4f}" if currency == "USD" else f"{amount:.4f} {currency}"


NO_COST = "no cost reported"  # (an agent that sends none, as codex: not a cost of 0)


def cost_text(amount: float | None) -> str:
    """A sum of the costs agents reported, or NO_COST (None: none of them reported one)."""
    return NO_COST if amount is None else money(amount)


def id_spans(ids: Sequence[str], most: int = 4) -> str:
    """Session ids as runs of them: `s38, s40…s51` (`s39` is not among them); past `most` runs,
    how many more ids (`s1…s3, s5, s7, s9 +4`)."""
    spans: list[list[str]] = []
    for sid in ids:
        if spans and _next_id(spans[-1][-1]) == sid:
            spans[-1].append(sid)
        else:
            spans.append([sid])
    shown = [span[0] if len(span) == 1 else f"{span[0]}…{span[-1]}" for span in spans[:most]]
    rest = sum(len(span) for span in spans[most:])
    return ", ".join(shown) + (f" +{rest}" if rest else "")


def _next_id(sid: str) -> str | None:
    """The id after `sid` (`s39` after `s38`); None for one that ends in no number."""
    stem = sid.rstrip("0123456789")
    return f"{stem}{int(sid[len(stem) :]) + 1}" if stem != sid else None


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def serial_sentence(serial: float, wall: float) -> str:
    """ "turns ran 32 min in all; took 2 min": the turns' time as they ran, added up (not what they
    would take one after another: turns at once slow each other down), beside the wall time."""
    return f"turns ran {duration(serial)} in all; took {duration(wall)}"


def fleet_line(fleet: Fleet) -> str:
    """The status line: "3 working · 1 needs you · 200 open"."""
    from sessiond.protocol.models import SessionStatus

    parts = [f"{fleet.working} working"]
    if fleet.needs_you:
        parts.append(f"{fleet.needs_you} needs you")
    failed = fleet.failed or fleet.by_status.get(SessionStatus.FAILED, 0)
    if failed:
        parts.append(f"{failed} failed")
    parts.append(f"{fleet.open} open")
    return " · ".join(parts)


def merge_outcome(entry: MergeEntry) -> list[str]:
    if entry.status == "merged":
        commit = f" at {entry.commit[:12]}" if entry.commit else ""
        after = f"worktree kept: {entry.kept}" if isinstance(entry.kept, str) else "worktree removed"
        if entry.kept is True:
            after = "worktree and branch kept"
        return [f"merged {entry.session} ({entry.branch}) into {entry.base}{commit}; {after}"]
    lines = [
        f"merge of {entry.session} ({entry.branch}) into {entry.base} {entry.status}: {entry.reason or '-'}"
    ]
    if entry.conflicts:
        lines.append("conflicts:")
        lines += [f"  {path}" for path in entry.conflicts]
    if entry.gate_output:
        lines.append(f"gate output ({entry.gate}):")
        lines += [f"  {line}" for line in entry.gate_output.rstrip().splitlines()]
    if entry.status == "failed":
        lines.append(f"{entry.base} and the working copy are as they were")
    return lines


def controls_source(controls: SessionControls, session: str, agent: str) -> str | None:
    """Where a session's modes and options come from, when not from the session itself."""
    if controls.source == "agent":
        return (
            f"as agent {agent} offered its last session; {session} opens at the agent on its next turn, "
            f"and what is chosen here is said then"
        )
    if controls.source == "none":
        return (
            f"agent {agent} has not said what it offers (it has not run yet); what is chosen here is "
            f"said to it when {session} opens there"
        )
    return None


def mode_lines(controls: SessionControls) -> list[str]:
    """The modes, the current one marked `*`."""
    width = max((len(mode.id) for mode in controls.modes), default=0)
    lines = []
    for mode in controls.modes:
        mark = "*" if mode.id == controls.mode else " "
        about = mode.name + (f": {mode.description}" if mode.description else "")
        lines.append(f"{mark} {mode.id:<{width}}  {about}")
    if not controls.modes and controls.mode:
        lines.append(f"* {controls.mode}")
    return lines


def option_lines(controls: SessionControls) -> list[str]:
    """A line per config option: its id, name, current value and what else it takes."""
    width = max((len(str(o.get("id"))) for o in controls.config_options), default=0)
    lines = []
    for option in controls.config_options:
        current = option.get("currentValue")
        shown = ("true" if current else "false") if isinstance(current, bool) else str(current)
        from sessiond.protocol.models import config_values

        takes = "true or false" if option.get("type") == "boolean" else ", ".join(config_values(option))
        name = option.get("name") or option.get("id")
        lines.append(
            f"{option.get('id')!s:<{width}}  {name}: {shown}" + (f"  (takes {takes})" if takes else "")
        )
    return lines
