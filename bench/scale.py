"""What grows with the number of sessions, and what must not: beside 1,000 / 10,000 / 100,000.

Each size is a store seeded with that many sessions: all but 2,000 written idle straight into
the store with the daemon's own records code (`SessionRecord.row()`, `Store`), then 2,000 opened
through a real daemon and given a turn each (their usage stored, 100 of them with a context so
full that they are flagged), so a restart has events to read back. Every figure is measured
through a real daemon over raw JSON-RPC, the sizes taking turns round by round (the daemons of
all sizes run at once), and each size is reported against the smallest.

python -m bench.scale [--sizes 1000,10000,100000] [--turns 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.harness import Daemon, cpu_seconds, table
from bench.startup import Raw, env_for, restart_first_answer, wall_of
from sessiond.daemon import store as st
from sessiond.daemon.records import INSERT_SESSIONS, SessionRecord
from sessiond.protocol.models import SessionStatus

Row = tuple[str, str, str]

WORKED = 2000  # sessions given a turn (all of them at a smaller size)
FLAGGED = 100  # of them, with a context over 80% full (the attention flag context_high)
PAGE = 200
PAGES = 20  # each page figure is the median of this many
# What a daemon's start cost before it answered without pygls (the floor the issue measured
# against): python importing it, measured in the same rounds as the restarts.
FLOOR = [sys.executable, "-c", "import pygls.lsp.server"]


def project_of(home: Path) -> Path:
    """Where the sessions are rooted: a folder of its own, not the daemon's home, which holds the
    store and the demo agent's session files (a turn snapshots its root outside git, and that
    walk would grow with the sessions that worked, not with what the daemon does)."""
    project = home / "project"
    project.mkdir(exist_ok=True)
    return project


def seed_idle(home: Path, count: int) -> None:
    """`count` idle sessions of the demo agent, made a second apart an hour ago and more."""
    root = str(project_of(home))
    started = time.time() - count - 3600
    records = (
        SessionRecord(
            id=f"s{n}",
            ordinal=n,
            agent="demo",
            root=root,
            placement="here",
            title=None,
            status=SessionStatus.IDLE,
            status_since=started + n,
            created_at=started + n,
        )
        for n in range(1, count + 1)
    )
    store = st.Store(home / "state" / "sessiond.db")
    store.write(st.executemany(INSERT_SESSIONS, (r.row() for r in records)))
    asyncio.run(store.close())


async def _work(daemon: Daemon, count: int) -> None:
    """`count` sessions opened and given a turn each (FLAGGED of them flagged)."""
    raw = await Raw.open(daemon.socket)
    try:
        opened = await raw.call(
            "session/open", {"agent": "demo", "root": str(project_of(daemon.home)), "count": count}
        )
        ids = [s["id"] for s in opened["sessions"]]
        conns = [await Raw.open(daemon.socket) for _ in range(50)]
        for start in range(0, len(ids), len(conns)):
            await asyncio.gather(
                *(
                    conn.call(
                        "session/prompt",
                        {"session": i, "prompt": f"usage {90 if n < FLAGGED else 10} 100\nsay done"},
                    )
                    for conn, (n, i) in zip(conns, enumerate(ids[start:], start), strict=False)
                )
            )
        for conn in conns:
            await conn.close()
    finally:
        await raw.close()


@contextlib.contextmanager
def seeded(size: int) -> Iterator[Path]:
    home = Path(tempfile.mkdtemp(prefix="sd-sc-", dir="/tmp"))
    try:
        worked = min(WORKED, size)
        seed_idle(home, size - worked)
        daemon = Daemon(home=home).start()
        try:
            asyncio.run(_work(daemon, worked))
        finally:
            assert daemon.stop() == 0
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


KINDS: list[tuple[str, dict[str, Any]]] = [
    ("activity", {"sort": "activity"}),  # first: a fresh daemon has read nothing for it
    ("created", {}),
    ("attention", {"attention": True}),
]


async def _page_ms(raw: Raw, params: dict[str, Any]) -> float:
    """One page's time (ms), the page checked."""
    started = time.perf_counter()
    page = await raw.call("session/list", {"limit": PAGE, **params})
    elapsed = (time.perf_counter() - started) * 1000
    assert len(page["sessions"]) == (FLAGGED if params.get("attention") else PAGE), page["total"]
    return elapsed


async def _deep_cursor(raw: Raw) -> str:
    """The cursor of the fifth page by activity."""
    cursor = None
    for _ in range(4):
        page = await raw.call("session/list", {"limit": PAGE, "sort": "activity", "cursor": cursor})
        cursor = page["nextCursor"]
    assert cursor is not None
    return cursor


async def _turns_s(daemon: Daemon, raw: Raw, turns: int) -> tuple[float, float]:
    """`turns` turns at once, on fresh sessions, each from a connection of its own: their wall
    time, and the daemon's CPU per turn (ms; the wall time holds the agent's work too, and the
    demo agent's grows with the session files it keeps)."""
    opened = await raw.call(
        "session/open", {"agent": "demo", "root": str(project_of(daemon.home)), "count": turns}
    )
    ids = [s["id"] for s in opened["sessions"]]
    conns = [await Raw.open(daemon.socket) for _ in ids]
    cpu = cpu_seconds(daemon.pid)
    started = time.perf_counter()
    await asyncio.gather(
        *(
            c.call("session/prompt", {"session": i, "prompt": "say done"})
            for c, i in zip(conns, ids, strict=True)
        )
    )
    elapsed = time.perf_counter() - started
    per_turn = (cpu_seconds(daemon.pid) - cpu) / turns * 1000
    for c in conns:
        await c.close()
    return elapsed, per_turn


async def _figures(daemons: dict[int, Daemon], turns: int, rounds: int) -> dict[int, dict[str, list[float]]]:
    """Each figure of each size, the sizes taking turns round by round, so that what else the
    machine does weighs on them alike."""
    raws = {size: await Raw.open(d.socket) for size, d in daemons.items()}
    got: dict[int, dict[str, list[float]]] = {size: defaultdict(list) for size in daemons}
    try:
        for name, params in KINDS:
            for size, raw in raws.items():
                got[size][f"{name}-first"].append(await _page_ms(raw, params))
        deep = {size: await _deep_cursor(raw) for size, raw in raws.items()}
        for _ in range(PAGES):
            for name, params in KINDS:
                for size, raw in raws.items():
                    got[size][name].append(await _page_ms(raw, params))
            for size, raw in raws.items():
                got[size]["activity-deep"].append(
                    await _page_ms(raw, {"sort": "activity", "cursor": deep[size]})
                )
        for size, d in daemons.items():
            got[size]["rss"].append(d.rss_kib() / 1024)
            warm = (
                await raws[size].call("session/open", {"agent": "demo", "root": str(project_of(d.home))})
            )["sessions"]
            await raws[size].call("session/prompt", {"session": warm[0]["id"], "prompt": "say warm"})
        for _ in range(rounds):
            for size, d in daemons.items():
                wall, cpu = await _turns_s(d, raws[size], turns)
                got[size]["turns"].append(wall)
                got[size]["turn-cpu"].append(cpu)
        return got
    finally:
        for raw in raws.values():
            await raw.close()


def rows(sizes: list[int], turns: int = 50, rounds: int = 5) -> list[Row]:
    with contextlib.ExitStack() as stack:
        homes = {size: stack.enter_context(seeded(size)) for size in sizes}
        restarts: dict[int, list[float]] = {size: [] for size in sizes}
        floors: list[float] = []  # python importing pygls, in the same rounds: what a start cost once
        for _ in range(rounds):
            floors.append(wall_of(FLOOR, env_for(homes[sizes[0]])))
            for size, home in homes.items():
                restarts[size].append(restart_first_answer(home)[1])
        daemons = {size: Daemon(home=home).start() for size, home in homes.items()}
        try:
            got = asyncio.run(_figures(daemons, turns, rounds))
        finally:
            for d in daemons.values():
                d.stop()
    results = {size: {key: statistics.median(values) for key, values in got[size].items()} for size in sizes}
    for size in sizes:
        results[size]["restart"] = statistics.median(restarts[size])
    base = results[sizes[0]]
    floor = statistics.median(floors)
    out: list[Row] = []
    for key, what, unit in [
        ("created", f"session/list sort=created, a page of {PAGE} (median of {PAGES})", "ms"),
        ("activity-first", "session/list sort=activity, the first page after a start", "ms"),
        ("activity", f"session/list sort=activity, a page of {PAGE} (median of {PAGES})", "ms"),
        ("activity-deep", f"session/list sort=activity, the fifth page (median of {PAGES})", "ms"),
        ("attention-first", "session/list attention, the first page after a start", "ms"),
        ("attention", f"session/list attention ({FLAGGED} flagged, median of {PAGES})", "ms"),
        ("turns", f"{turns} demo turns at once (median of {rounds})", "s"),
        ("turn-cpu", "the daemon's CPU per turn of those", "ms"),
        ("restart", f"restart: spawn → first page of {PAGE} answered (median of {rounds})", "s"),
        ("rss", "daemon RSS after the pages above", "MiB"),
    ]:
        for size in sizes:
            value = results[size][key]
            shown = (
                f"{value:.1f} ms" if unit == "ms" else f"{value:.3f} s" if unit == "s" else f"{value:.0f} MiB"
            )
            against = f"{value / base[key]:.2f}x at {sizes[0]:,}"
            if key == "restart":
                against += f"; {value / floor:.2f}x the floor"
            out.append((f"{what}, {size:,} sessions", shown, against))
        if key == "restart":
            out.append((f"the floor: {' '.join(FLOOR[1:])} (median of {rounds})", f"{floor:.3f} s", ""))
    return out


TITLE = (
    f"Beside idle sessions ({WORKED:,} of them with a turn; seeded in the store, measured through the daemon)"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(table(TITLE, rows(sizes, args.turns, args.rounds)))


if __name__ == "__main__":
    main()
