"""The timeline page at scale: 1,000 sessions x 3 turns, its size and time to first paint.

The events are made here (as `sessiond trace` prints them: queued, slot waits, started, tool
calls, permission asks and answers, plans, changed files, chunks, ended with every outcome),
over two agents and two placements, so the figure is of the page, not of a daemon's run. Then:
building the model and the page (Python), the file's size, and in Debian's headless chromium
(playwright's API with `executable_path`) the time from navigation to the first frame drawn
(the page's own mark after its first canvas draw, and the browser's first-contentful-paint),
and one scroll's redraw, each the median of several loads, beside two baselines measured in the
same rounds: an empty page (no network, one line of text) and the timeline page with no
sessions.

python -m bench.timeline [--sessions 1000] [--turns 3] [--rounds 5] [--keep FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import scratch, table
from sessiond.client import timeline, timeline_html

CHROMIUM = "/usr/bin/chromium"
Row = tuple[str, str, str]


def synthetic_events(sessions: int, turns: int, seed: int = 7) -> list[dict[str, Any]]:
    """A plausible log of `sessions` x `turns`, in time order."""
    rng = random.Random(seed)
    t0 = 1_800_000_000.0
    out: list[tuple[float, dict[str, Any]]] = []

    def at(moment: float, kind: str, session: str, agent: str, turn: str | None = None, **data: Any) -> None:
        event: dict[str, Any] = {"kind": kind, "agent": agent, "session": session, "data": data}
        if turn is not None:
            event["turn"] = turn
        out.append((moment, event))

    for i in range(sessions):
        sid = f"s{i + 1}"
        agent = "demo" if i % 3 else "claude"
        placement = "worktree" if i % 4 == 0 else "here"
        opened = t0 + rng.uniform(0, 2)
        at(
            opened,
            "session.opened",
            sid,
            agent,
            placement=placement,
            title=f"fix module {i}",
            sessionKind="main",
        )
        moment = opened + rng.uniform(0, 1)
        for k in range(turns):
            tid = f"t-{i:04d}-{k}"
            at(
                moment,
                "turn.queued",
                sid,
                agent,
                tid,
                prompt=f"plan Read | Fix | Test\nfix the bug in module {i}",
            )
            start = moment + rng.uniform(0, 0.05)
            if rng.random() < 0.4:
                at(
                    start,
                    "session.status",
                    sid,
                    agent,
                    status="queued",
                    detail="waiting for an agent slot: (maxActiveTurns)",
                )
                start += rng.uniform(1, 30)
            at(start, "turn.started", sid, agent, tid)
            at(start, "session.status", sid, agent, status="working")
            now = start + rng.uniform(0.01, 0.2)
            if rng.random() < 0.1:
                at(
                    now,
                    "session.status",
                    sid,
                    agent,
                    status="queued",
                    detail="waiting for a live-session slot: (maxLiveSessions)",
                )
                now += rng.uniform(0.5, 5)
                at(now, "session.status", sid, agent, status="working")
            at(now, "session.plan", sid, agent, plan={"done": 0, "total": 3, "current": "Read"})
            for c in range(rng.randint(1, 4)):
                call = f"call-{k}-{c}"
                at(
                    now,
                    "turn.tool",
                    sid,
                    agent,
                    tid,
                    toolCallId=call,
                    title=f"Edit src/m{i}.py",
                    toolKind="edit",
                    status="in_progress",
                    first=True,
                )
                now += rng.uniform(0.1, 3)
                at(
                    now,
                    "turn.tool",
                    sid,
                    agent,
                    tid,
                    toolCallId=call,
                    title=f"Edit src/m{i}.py",
                    toolKind="edit",
                    status="completed",
                    first=False,
                )
                at(now, "turn.chunk", sid, agent, tid, text="working… ")
            if rng.random() < 0.1:
                pid = f"p-{i}-{k}"
                at(
                    now,
                    "permission.asked",
                    sid,
                    agent,
                    tid,
                    permission=pid,
                    toolCall={"title": "run the tests?"},
                    options=[],
                )
                now += rng.uniform(1, 60)
                at(now, "permission.answered", sid, agent, tid, permission=pid, optionId="allow_once")
            at(now, "session.plan", sid, agent, plan={"done": 3, "total": 3})
            roll = rng.random()
            if roll < 0.08:
                ended: dict[str, Any] = {"outcome": "failed", "error": "agent 'demo': the tests failed"}
            elif roll < 0.12:
                ended = {"outcome": "cancelled", "stopReason": "cancelled", "cancelledBy": "by a client"}
            elif roll < 0.13:
                ended = {"outcome": "interrupted", "error": "the daemon stopped during the turn"}
            else:
                ended = {"outcome": "completed", "stopReason": "end_turn"}
            at(now + 0.01, "turn.ended", sid, agent, tid, **ended)
            at(
                now + 0.05,
                "session.changes",
                sid,
                agent,
                changes={"files": [{"path": f"src/m{i}.py"}], "added": 12, "removed": 3},
            )
            moment = now + rng.uniform(0.1, 5)
    out.sort(key=lambda pair: pair[0])
    events = []
    for seq, (moment, event) in enumerate(out, start=1):
        stamp = datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")
        events.append({"seq": seq, "time": stamp, **event})
    return events


def build_page(events: list[dict[str, Any]], path: Path) -> tuple[float, float, int]:
    started = time.perf_counter()
    model = timeline.build(events)
    built = time.perf_counter()
    size = timeline_html.write(path, model)
    return built - started, time.perf_counter() - built, size


PAINT_JS = """() => new Promise((resolve) => {
  const done = () => {
    const fcp = performance.getEntriesByName("first-contentful-paint")[0];
    const mark = window.sessiondTimeline ? window.sessiondTimeline.drawnAt : null;
    if (!fcp) { requestAnimationFrame(done); return; }
    resolve({ fcp: fcp.startTime, drawn: mark });
  };
  requestAnimationFrame(() => requestAnimationFrame(done));
})"""

SCROLL_JS = """() => new Promise((resolve) => {
  const scroller = document.getElementById("scroller");
  const t = performance.now();
  scroller.scrollTop = scroller.scrollHeight / 2;
  requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now() - t)));
})"""


def measure(pages: dict[str, Path], rounds: int) -> dict[str, dict[str, list[float]]]:
    from playwright.sync_api import sync_playwright

    found: dict[str, dict[str, list[float]]] = {
        name: {"fcp": [], "drawn": [], "scroll": []} for name in pages
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        for _ in range(rounds):
            for name, path in pages.items():  # alternating, so a busy moment hits every page alike
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(path.resolve().as_uri(), wait_until="load")
                figures = page.evaluate(PAINT_JS)
                found[name]["fcp"].append(figures["fcp"])
                if figures["drawn"] is not None:
                    found[name]["drawn"].append(figures["drawn"])
                    found[name]["scroll"].append(page.evaluate(SCROLL_JS))
                page.close()
        browser.close()
    return found


def skip_reason() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (Debian: apt-get install chromium; ./dev test installs it)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install -e '.[test]')"
    return None


def run(
    sessions: int = 1000, turns: int = 3, rounds: int = 5, keep: str | None = None
) -> tuple[str, list[Row]]:
    """The table's title and rows (one row saying why, without chromium or playwright)."""
    label = f"{sessions:,} sessions x {turns} turns"
    title = f"timeline page, {label}, headless chromium, median of {rounds} loads"
    reason = skip_reason()
    if reason:
        print(f"timeline page skipped: {reason}")
        return title, [("the timeline page in headless chromium", "skipped", reason)]
    work = scratch("sd-bench-timeline-", until_exit=True)
    events = synthetic_events(sessions, turns)
    big, empty_timeline, blank = work / "big.html", work / "none.html", work / "blank.html"
    build_s, render_s, size = build_page(events, big)
    timeline_html.write(empty_timeline, timeline.build([]))
    blank.write_text("<!doctype html><title>blank</title><p>nothing here</p>\n")
    if keep:
        Path(keep).write_bytes(big.read_bytes())
    log_bytes = sum(len(json.dumps(e)) + 1 for e in events)
    found = measure({"blank": blank, "empty": empty_timeline, "big": big}, rounds)

    def med(name: str, key: str) -> str:
        values = found[name][key]
        return f"{statistics.median(values):.0f} ms" if values else "-"

    def ratio(name: str, key: str, baseline: str) -> str:
        values, base = found[name][key], found[baseline][key]
        if not values or not base or statistics.median(base) <= 0:
            return ""
        names = {"blank": "the blank page", "empty": "the empty timeline"}
        return f"; {statistics.median(values) / statistics.median(base):.2f}x {names[baseline]}"

    rows: list[Row] = [
        (
            f"events in the log ({label})",
            f"{len(events):,} ({log_bytes / 1024 / 1024:.1f} MiB as JSON lines)",
            "",
        ),
        ("model from the events (Python)", f"{build_s * 1000:.0f} ms", ""),
        ("page from the model (Python)", f"{render_s * 1000:.0f} ms", ""),
        (
            "HTML file, self-contained",
            f"{size / 1024:.0f} KiB",
            f"empty timeline {empty_timeline.stat().st_size / 1024:.0f} KiB",
        ),
        (
            "first contentful paint, big page",
            med("big", "fcp"),
            f"baselines: blank page {med('blank', 'fcp')}, empty timeline {med('empty', 'fcp')}"
            + ratio("big", "fcp", "blank"),
        ),
        (
            "first frame drawn (page's own mark), big page",
            med("big", "drawn"),
            f"empty timeline {med('empty', 'drawn')}" + ratio("big", "drawn", "empty"),
        ),
        (
            "scroll to the middle, redraw",
            med("big", "scroll"),
            f"empty timeline {med('empty', 'scroll')}" + ratio("big", "scroll", "empty"),
        ),
    ]
    return title, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", metavar="FILE", help="also write the big page here")
    args = parser.parse_args()
    print(table(*run(args.sessions, args.turns, args.rounds, args.keep)))


if __name__ == "__main__":
    main()
