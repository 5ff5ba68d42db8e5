"""The timeline as one self-contained HTML page: no server, no network, opens from disk.

The page (``timeline_page.html``, next to this module) draws on a canvas, only
the rows in view, so a thousand sessions scroll as smoothly as ten. This
module fills it with the model of ``timeline.py`` as compact JSON: times in
milliseconds from the left edge, one array per session and per turn.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from sessiond.client.timeline import OUTCOMES, WAIT_NAMES, Timeline, TurnSpan

PAGE = "timeline_page.html"
DATA_MARK = "/*__TIMELINE_DATA__*/null"
TITLE_MARK = "__TIMELINE_TITLE__"
MAX_TOOLS = 24  # per turn, for the tooltip (the count is always whole)
WAIT_CODES = {kind: i for i, kind in enumerate(WAIT_NAMES)}


def _ms(at: float | None, t0: float) -> int:
    return -1 if at is None else round((at - t0) * 1000)


def _turn(turn: TurnSpan, row: int, t0: float) -> list[Any]:
    waits: list[int] = []
    for wait in turn.waits:
        waits += [WAIT_CODES[wait.kind], _ms(wait.start, t0), _ms(wait.end, t0)]
    whats = [w.what for w in turn.waits]
    tools = [[t.title[:60], _ms(t.start, t0), _ms(t.end, t0), t.status[:1]] for t in turn.tools[:MAX_TOOLS]]
    return [
        row,
        _ms(turn.queued, t0),
        _ms(turn.started, t0),
        _ms(turn.ended, t0),
        OUTCOMES.index(turn.outcome),
        turn.detail[:200],
        turn.prompt[:80],
        waits,
        whats if any(whats) else 0,
        len(turn.tools),
        tools,
        -1 if turn.plan_done is None else turn.plan_done,
        -1 if turn.plan_total is None else turn.plan_total,
        -1 if turn.files is None else turn.files,
        turn.added or 0,
        turn.removed or 0,
        turn.id,
    ]


def payload(timeline: Timeline) -> dict[str, Any]:
    """What the page draws, as plain JSON."""
    t0 = timeline.start
    sessions: list[list[Any]] = []
    turns: list[list[Any]] = []
    groups: list[list[Any]] = []
    for (agent, placement), rows in timeline.groups():
        groups.append([agent, placement, len(rows)])
        for row in rows:
            index = len(sessions)
            sessions.append(
                [
                    row.id,
                    row.title[:80],
                    row.kind,
                    -1 if row.plan_done is None else row.plan_done,
                    -1 if row.plan_total is None else row.plan_total,
                    -1 if row.files is None else row.files,
                    row.added or 0,
                    row.removed or 0,
                    len(groups) - 1,
                    row.plan_current or "",
                ]
            )
            turns += [_turn(turn, index, t0) for turn in row.turns]
    run = timeline.run
    counts = timeline.counts()
    waited = timeline.waited()
    return {
        "title": timeline.title,
        "t0": t0,
        "span": _ms(timeline.end, t0),
        "outcomes": list(OUTCOMES),
        "waitKinds": list(WAIT_NAMES),
        "waitNames": list(WAIT_NAMES.values()),
        "header": {
            "wall": timeline.wall_seconds,
            # From the log: each turn's turn.started → turn.ended, added up. (`sessiond runs` adds up
            # the daemon's own clock readings, kept per session to the millisecond: the same to
            # within a few ms per hundred turns.)
            "serial": round(timeline.serial_seconds, 3),
            "span": round(timeline.span_seconds, 3),
            "sessions": len(timeline.sessions),
            "turns": len(turns),
            "counts": counts,
            "waited": {kind: round(seconds, 3) for kind, seconds in waited.items()},
            "events": timeline.events,
            "generated": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "run": None
            if run is None
            else {
                "id": run.id,
                "name": run.name,
                "outcome": run.outcome or "running",
                "argv": run.argv,
                "cwd": run.cwd,
                "sessions": run.sessions,
                "turns": run.turns,
                "cost": run.cost,
            },
        },
        "groups": groups,
        "sessions": sessions,
        "turns": turns,
    }


def _script_safe(text: str) -> str:
    """JSON that cannot end the <script> it sits in."""
    return (
        text.replace("</", "<\\/")
        .replace("<!--", "<\\!--")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def template() -> str:
    return resources.files("sessiond.client").joinpath(PAGE).read_text(encoding="utf-8")


def render(timeline: Timeline) -> str:
    """The whole page, ready to write to a file."""
    data = json.dumps(payload(timeline), ensure_ascii=False, separators=(",", ":"))
    head, mark, tail = template().partition(DATA_MARK)
    if not mark or TITLE_MARK not in head:
        raise RuntimeError(f"{PAGE} lacks its placeholders; the installed package is damaged")
    return head.replace(TITLE_MARK, html.escape(timeline.title)) + _script_safe(data) + tail


def write(path: str | Path, timeline: Timeline) -> int:
    """Write the page to `path` (its folder made if needed); its size in bytes."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = render(timeline).encode("utf-8")
    target.write_bytes(data)
    return len(data)


def open_page(path: str | Path) -> bool:
    """Open a written page in the default browser; whether one was found."""
    import webbrowser

    return webbrowser.open(Path(path).resolve().as_uri())
