"""Run every benchmark and print their tables.

python -m bench [--sessions 10000] [--turns 200] [--batch 500] [--fleet 5000] [--mcp 10]
                [--startup-rounds 5] [--scale 1000,10000,100000] [--prune 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import connections, limits, prune, ray_agents, real_agents, scale, side_by_side, startup, streaming
from bench.direct_acp import direct_agent
from bench.harness import IN_MEMORY, cpu_seconds, daemon, scheduled, scratch, settled, table, tree_rss_kib
from sessiond.client import AsyncDaemon, aconnect

TURN_PROMPT = side_by_side.PROMPT  # (the demo agent answers "done")


async def rows_alone(count: int) -> float:
    """The store's floor for opening `count` sessions: their rows inserted into a fresh store
    (the daemon's schema and indexes) in one transaction, with no daemon around it."""
    from sessiond.daemon.records import INSERT_SESSIONS, SessionRecord
    from sessiond.daemon.store import Store
    from sessiond.protocol.enums import SessionStatus

    with tempfile.TemporaryDirectory(prefix="sd-bench-floor-") as folder:
        store = Store(Path(folder) / "floor.db")
        now = time.time()
        rows = [
            SessionRecord(f"s{n}", n, "demo", folder, "here", None, SessionStatus.IDLE, now, now).row()
            for n in range(1, count + 1)
        ]

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN")
            conn.executemany(INSERT_SESSIONS, rows)
            conn.execute("COMMIT")

        started = time.perf_counter()
        store.write(insert)  # (before the store serves a loop, a write is made in place)
        elapsed = time.perf_counter() - started
        await store.close()
    return elapsed


async def open_many(count: int) -> list[tuple[str, str, str]]:
    floor = min([await rows_alone(count) for _ in range(3)])
    with daemon() as d:
        async with aconnect(d.socket, start=False) as client:
            agent = await client.agent("demo")
            await client.status()
            before = d.rss_kib()
            started = time.perf_counter()
            sessions = await agent.sessions(count, d.home)
            elapsed = time.perf_counter() - started
            after = d.rss_kib()
            # A second batch: the first one's transient memory (the answer's JSON, the
            # events on their way to the store) is reused, so what grows is what is kept.
            await agent.sessions(count, d.home)
            kept = d.rss_kib()
            info = await agent.aget()
            assert len(sessions) == count
            started_processes = len(d.children())
    first = (after - before) * 1024 / count
    per_session = (kept - after) * 1024 / count
    return [
        (
            f"open {count} sessions in one call",
            f"{elapsed:.3f} s",
            f"{elapsed / floor:.1f}x their rows into SQLite alone; target < 0.5 s",
        ),
        (f"{count} session rows into SQLite alone (the store's floor, best of 3)", f"{floor:.3f} s", ""),
        ("daemon memory kept per session", f"{per_session:.0f} B", "target < 2048 B"),
        ("daemon memory per session, first batch (with its transient peak)", f"{first:.0f} B", ""),
        ("agent processes started", f"{started_processes} (agent state: {info.process.state})", "target 0"),
    ]


TURN_ROUNDS = 25  # each figure is the median of this many rounds: one round is a fraction of a second, and
# rounds on this shared machine swing from 0.6x to 2.7x one against the next (a multiple of the five
# sides, so that each goes first as often as the others)


async def turns(count: int) -> list[tuple[str, str, str]]:
    """`count` first turns at once (each opens its session at the agent, then prompts), straight
    to the demo agent through the ACP SDK, straight with each session offered an MCP server as the
    daemon offers its own (what that offer costs the agent, apart from the daemon), through a
    process that only passes lines (what a third process on the path costs, doing nothing), and
    through the daemon, rounds taking turns; with the CPU time each process took for them (this
    machine has two cores: the daemon and the agent share them with the client)."""
    # Every file of both sides on tmpfs where there is one (harness.IN_MEMORY says why).
    work = scratch("sd-bench-work-", in_memory=True)
    # The agent's own state goes beside the work, not in it: sessions outside git snapshot their root.
    state = scratch("sd-bench-state-", in_memory=True)
    relayed_state = scratch("sd-bench-state-", in_memory=True)
    floor_state = scratch("sd-bench-state-", in_memory=True)
    offered_state = scratch("sd-bench-state-", in_memory=True)
    times: dict[str, list[float]] = {"direct": [], "offered": [], "relayed": [], "floor": [], "daemon": []}
    cpu: dict[str, list[float]] = {
        "direct agent": [],
        "offered agent": [],
        "direct client": [],
        "daemon": [],
        "its agent": [],
        "daemon client": [],
    }
    # Seconds of each round the daemon was ready to run but waited for a core, and its agent (or the
    # agent straight) neither ran nor waited for one: it had nothing to do (waited on its client).
    waited: dict[str, list[float]] = {"daemon": []}
    idle: dict[str, list[float]] = {"direct agent": [], "its agent": []}
    try:
        with daemon(in_memory=True) as d:
            async with (
                direct_agent(TURN_PROMPT, work, state) as direct_round,
                direct_agent(TURN_PROMPT, work, offered_state, offered=True) as offered_round,
                direct_agent(TURN_PROMPT, work, relayed_state, relayed=True) as relayed_round,
                direct_agent(TURN_PROMPT, work, floor_state, relayed=True, offered=True) as floor_round,
                aconnect(d.socket, start=False) as client,
            ):
                agent = await client.agent("demo")
                await (await agent.session(work)).asend(TURN_PROMPT)
                await settled(d.pid)
                (agent_pid,) = d.children()

                async def straight() -> None:
                    before, before_client = scheduled(direct_round.pid), time.process_time()
                    took = await direct_round(count)
                    after = scheduled(direct_round.pid)
                    times["direct"].append(took)
                    cpu["direct agent"].append(after[0] - before[0])
                    cpu["direct client"].append(time.process_time() - before_client)
                    idle["direct agent"].append(took - (after[0] - before[0]) - (after[1] - before[1]))

                async def straight_offered() -> None:
                    before = cpu_seconds(offered_round.pid)
                    times["offered"].append(await offered_round(count))
                    cpu["offered agent"].append(cpu_seconds(offered_round.pid) - before)

                async def relayed() -> None:
                    times["relayed"].append(await relayed_round(count))

                async def relayed_offered() -> None:
                    times["floor"].append(await floor_round(count))

                async def through_the_daemon() -> None:
                    before_daemon, before_agent = scheduled(d.pid), scheduled(agent_pid)
                    before_client = time.process_time()
                    started = time.perf_counter()
                    replies = await asyncio.gather(*(s.asend(TURN_PROMPT) for s in sessions))
                    took = time.perf_counter() - started
                    after_daemon, after_agent = scheduled(d.pid), scheduled(agent_pid)
                    times["daemon"].append(took)
                    cpu["daemon client"].append(time.process_time() - before_client)
                    cpu["daemon"].append(after_daemon[0] - before_daemon[0])
                    cpu["its agent"].append(after_agent[0] - before_agent[0])
                    waited["daemon"].append(after_daemon[1] - before_daemon[1])
                    idle["its agent"].append(
                        took - (after_agent[0] - before_agent[0]) - (after_agent[1] - before_agent[1])
                    )
                    assert all(r.text == "done" for r in replies)

                sides = [straight, straight_offered, relayed, relayed_offered, through_the_daemon]
                # Rounds take turns, so that what else the machine does weighs on every side alike, each
                # side first as often as the others (what runs after a side pays for what it left
                # running); each round starts once the daemon is quiet, and with this process's garbage
                # collected (a full pass of its collector took 50 ms inside one round).
                for n in range(TURN_ROUNDS):
                    sessions = await agent.sessions(count, work)
                    for side in sides[n % len(sides) :] + sides[: n % len(sides)]:
                        await settled(d.pid, window=0.05, quiet=0.05)
                        gc.collect()
                        await side()
    finally:  # (on tmpfs: memory)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(relayed_state, ignore_errors=True)
        shutil.rmtree(floor_state, ignore_errors=True)
        shutil.rmtree(offered_state, ignore_errors=True)
    direct = statistics.median(times["direct"])
    offered = statistics.median(times["offered"])
    relayed = statistics.median(times["relayed"])
    floor_relayed = statistics.median(times["floor"])
    through_daemon = statistics.median(times["daemon"])
    per_turn = {k: statistics.median(v) / count * 1000 for k, v in cpu.items()}
    # The shortest a daemon round could take on this machine's cores, from the CPU its three
    # processes spent in it: none can finish before its own CPU time, and together no sooner than
    # their sum spread over every core. Above that floor, they wait on each other.
    cores = len(os.sched_getaffinity(0))
    floors = [
        max(d, a, (d + a + c) / cores)
        for d, a, c in zip(cpu["daemon"], cpu["its agent"], cpu["daemon client"], strict=True)
    ]
    floor = statistics.median(floors)
    ran = [c / t for c, t in zip(cpu["daemon"], times["daemon"], strict=True)]
    queued = [w / t for w, t in zip(waited["daemon"], times["daemon"], strict=True)]
    busy = statistics.median([r + q for r, q in zip(ran, queued, strict=True)])
    paired = [d / s for d, s in zip(times["daemon"], times["direct"], strict=True)]
    paired_offered = [d / s for d, s in zip(times["daemon"], times["offered"], strict=True)]
    return [
        (
            f"{count} first turns at once, straight to the agent (ACP), median of {TURN_ROUNDS}",
            f"{direct:.3f} s",
            f"{count / direct:.0f} turns/s; files of both sides "
            + (f"on tmpfs ({IN_MEMORY})" if IN_MEMORY else "on disk (no tmpfs here)"),
        ),
        (
            f"{count} first turns at once, straight, each session offered an MCP server as the daemon "
            f"offers its own, median of {TURN_ROUNDS}",
            f"{offered:.3f} s",
            f"{offered / direct:.2f}x straight: what the offer costs the agent (it checks and keeps it)",
        ),
        (
            f"{count} first turns at once, through a process that only passes lines, median of {TURN_ROUNDS}",
            f"{relayed:.3f} s",
            f"{relayed / direct:.2f}x straight: a third process on the path (bench/line_relay.py)",
        ),
        (
            f"{count} first turns at once, through that process, each session offered the MCP server, "
            f"median of {TURN_ROUNDS}",
            f"{floor_relayed:.3f} s",
            f"{floor_relayed / direct:.2f}x straight: what any daemon here pays that sits on the path and "
            "offers its MCP server, before doing anything else",
        ),
        (
            f"{count} first turns at once, through the daemon, median of {TURN_ROUNDS}",
            f"{through_daemon:.3f} s",
            f"{count / through_daemon:.0f} turns/s",
        ),
        (
            "daemon overhead",
            f"{through_daemon / direct:.2f}x",
            f"{(through_daemon - direct) / count * 1000:.2f} ms per turn; target < 1.15x",
        ),
        (
            f"daemon overhead the CPU sets: its, its agent's and the client's CPU per round over "
            f"{cores} cores",
            f"{floor / direct:.2f}x",
            f"the floor a round through the daemon could reach here; the rounds took "
            f"{through_daemon / floor:.2f}x it (the three processes waiting on each other, or for a core)",
        ),
        (
            "a round through the daemon: the daemon's share of it",
            f"{busy:.0%}",
            f"medians: running {statistics.median(ran):.0%}, "
            f"waiting for a core {statistics.median(queued):.0%}",
        ),
        (
            "a round through the daemon: its agent idle, waiting on the daemon (median per round)",
            f"{statistics.median(idle['its agent']) * 1000:.1f} ms",
            f"straight, {statistics.median(idle['direct agent']) * 1000:.1f} ms a round, waiting on its "
            "client; through the daemon, at the round's start (its first requests) and end (the "
            "daemon's last answers)",
        ),
        (
            "daemon overhead, round by round (each daemon round against the straight one beside it)",
            f"{min(paired):.2f}-{max(paired):.2f}x",
            f"median {statistics.median(paired):.2f}x; {sum(r <= 1.15 for r in paired)} of {len(paired)} "
            "rounds within 1.15x",
        ),
        (
            "daemon overhead against the same sessions straight (each offered the MCP server)",
            f"{through_daemon / offered:.2f}x",
            f"{(through_daemon - offered) / count * 1000:.2f} ms per turn; round by round "
            f"{min(paired_offered):.2f}-{max(paired_offered):.2f}x, median "
            f"{statistics.median(paired_offered):.2f}x, {sum(r <= 1.15 for r in paired_offered)} of "
            f"{len(paired_offered)} within 1.15x",
        ),
        (
            "daemon overhead against that floor (a process passing lines, the MCP server offered)",
            f"{through_daemon / floor_relayed:.2f}x",
            f"{(through_daemon - floor_relayed) / count * 1000:.2f} ms per turn: the daemon's own work",
        ),
        (
            "CPU per turn: the agent, straight",
            f"{per_turn['direct agent']:.3f} ms",
            "baseline",
        ),
        (
            "CPU per turn: the agent, straight, each session offered the MCP server",
            f"{per_turn['offered agent']:.3f} ms",
            f"{per_turn['offered agent'] / per_turn['direct agent']:.2f}x the baseline",
        ),
        (
            "CPU per turn: the agent, through the daemon",
            f"{per_turn['its agent']:.3f} ms",
            f"{per_turn['its agent'] / per_turn['direct agent']:.2f}x the baseline",
        ),
        (
            "CPU per turn: the ACP client, straight (this process, the SDK's client side)",
            f"{per_turn['direct client']:.3f} ms",
            "what any client of the agent pays, the daemon too",
        ),
        (
            "CPU per turn: the daemon's Python client (this process)",
            f"{per_turn['daemon client']:.3f} ms",
            f"{per_turn['daemon client'] / per_turn['direct client']:.2f}x the ACP client's",
        ),
        (
            "CPU per turn: the daemon",
            f"{per_turn['daemon']:.3f} ms",
            f"{per_turn['daemon'] / per_turn['direct agent']:.2f}x the agent's, straight; "
            f"{per_turn['daemon'] / per_turn['direct client']:.2f}x the ACP client's",
        ),
    ]


SIZE_ROUNDS = 8  # rounds of each size, a daemon round and a straight one taking turns


async def round_sizes(counts: list[int]) -> list[tuple[str, str, str]]:
    """Rounds of other sizes, through the daemon against straight. The agent idles through the daemon
    at a round's start (its first requests reach it later) and end (the daemon's last answers leave
    after the agent's: it works off what the agent's last burst of answers left it), which a small
    round pays most of; the end grows with the round (the agent answers in bigger bursts)."""
    work = scratch("sd-bench-sizes-", in_memory=True, until_exit=True)
    state = scratch("sd-bench-sizes-state-", in_memory=True, until_exit=True)
    found = []
    with daemon(in_memory=True) as d:
        async with (
            direct_agent(TURN_PROMPT, work, state) as straight_rounds,
            aconnect(d.socket, start=False) as client,
        ):
            agent = await side_by_side.warm(client, d.pid, work)
            (agent_pid,) = d.children()
            for count in counts:
                straight, through = side_by_side.Side("straight"), side_by_side.Side("through the daemon")
                for n in range(SIZE_ROUNDS):
                    sessions = await agent.sessions(count, work)
                    await settled(d.pid, window=0.05, quiet=0.05)
                    if n % 2:  # each first as often as the other
                        await straight.round(straight_rounds(count), straight_rounds.pid)
                    await through.round(side_by_side.turns_at_once(sessions), agent_pid, d.pid)
                    if not n % 2:
                        await straight.round(straight_rounds(count), straight_rounds.pid)
                ratio = statistics.median(through.took) / statistics.median(straight.took)
                idle = side_by_side.ms(through.agent_idle), side_by_side.ms(straight.agent_idle)
                found.append(
                    (
                        f"{count} first turns at once through the daemon, against straight "
                        f"(median of {SIZE_ROUNDS})",
                        f"{ratio:.2f}x",
                        f"{side_by_side.ms(through.took)} against {side_by_side.ms(straight.took)}; "
                        f"its agent idle {idle[0]} a round, straight {idle[1]}",
                    )
                )
    return found


GIT_ROUNDS = 5


def in_a_repository(count: int) -> list[tuple[str, str, str]]:
    """First turns on a root in git against the same on a plain folder, rounds alternating: each
    session's first turn records the root's state (a git tree, or a snapshot of its texts) before
    the agent may touch it, and a turn that wrote a file counts its changes at its end; sessions
    of one root asking at once share the root's state."""
    plain = scratch("sd-bench-plain-", in_memory=True, until_exit=True)
    repo = scratch("sd-bench-repo-", in_memory=True, until_exit=True)
    for root in (plain, repo):
        for n in range(200):
            (root / f"module_{n}.py").write_text(f"value = {n}\n")
    git = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
    for step in (["init", "-q"], ["add", "."], ["commit", "-qm", "bench"]):
        subprocess.run([*git, *step], cwd=repo, check=True)
    rows = []
    for what in ("first turns", "first turns that each write a file"):
        writes = what.endswith("file")
        took = asyncio.run(_first_turns_on([plain, repo], count, writes=writes))
        on_plain, on_repo = (statistics.median(took[root]) for root in (plain, repo))
        rows += [
            (
                f"{count} {what}, at once, on a plain folder of 200 files (median of {GIT_ROUNDS})",
                f"{on_plain * 1000:.1f} ms",
                "against the same on a git repository below",
            ),
            (
                "the same on a git repository of 200 files",
                f"{on_repo * 1000:.1f} ms",
                f"{on_repo / on_plain:.2f}x the plain folder",
            ),
        ]
    return rows


async def _first_turns_on(roots: list[Path], count: int, *, writes: bool) -> dict[Path, list[float]]:
    took: dict[Path, list[float]] = {root: [] for root in roots}
    with daemon(in_memory=True) as d:
        async with aconnect(d.socket, start=False) as client:
            agent = await side_by_side.warm(client, d.pid, roots[0])
            for n in range(GIT_ROUNDS):
                for root in roots if n % 2 else roots[::-1]:  # each first as often as the other
                    sessions = await agent.sessions(count, root)
                    await settled(d.pid, window=0.05, quiet=0.05)
                    started = time.perf_counter()
                    await asyncio.gather(
                        *(
                            s.asend(f"write out_{i}.txt {n}\nsay done" if writes else TURN_PROMPT)
                            for i, s in enumerate(sessions)
                        )
                    )
                    took[root].append(time.perf_counter() - started)
    return took


BATCH_ROUNDS = 5  # each figure is the median of this many rounds, alternating


async def batch(count: int) -> list[tuple[str, str, str]]:
    """A batch through the Python client (``agent.abatch``, as wide as it goes) against the same
    prompts sent straight to the demo agent through the ACP SDK, in the same run: rounds
    alternating, each side warm (its agent up, the daemon done loading what its first turn set off)."""
    work = scratch("sd-bench-batch-", until_exit=True)
    state = scratch("sd-bench-state-", until_exit=True)
    times: dict[str, list[float]] = {"direct": [], "batch": []}
    with daemon() as d:
        async with (
            direct_agent(TURN_PROMPT, work, state) as direct_round,
            aconnect(d.socket, start=False, run="bench batch") as client,
        ):
            agent = await client.agent("demo")
            await (await agent.session(work)).asend(TURN_PROMPT)  # the agent process is up, as for direct
            await settled(d.pid)
            db = d.home / "state" / "sessiond.db"
            log = db.with_name(db.name + "-wal")
            largest_log = 0  # the write-ahead log after each round (it once grew with every turn)
            for _ in range(BATCH_ROUNDS):
                times["direct"].append(await direct_round(count))
                started = time.perf_counter()
                replies = await agent.abatch([TURN_PROMPT] * count, work, max_concurrency=None)
                times["batch"].append(time.perf_counter() - started)
                largest_log = max(largest_log, log.stat().st_size if log.exists() else 0)
            stored = db.stat().st_size
            assert client.run is not None
            run_id = client.run.id
        async with aconnect(d.socket, start=False) as reader:
            run = await reader.get_run(run_id)
    direct, through_client = statistics.median(times["direct"]), statistics.median(times["batch"])
    assert len(replies) == count
    assert all(r.text == "done" for r in replies)
    return [
        (
            f"{count} prompts straight to the agent (ACP), all at once, median of {BATCH_ROUNDS}",
            f"{direct:.3f} s",
            f"{count / direct:.0f} turns/s",
        ),
        (
            f"{count} prompts through agent.abatch (a session apiece, closed after), "
            f"median of {BATCH_ROUNDS}",
            f"{through_client:.3f} s",
            f"{count / through_client:.0f} turns/s",
        ),
        (
            "batch against direct",
            f"{through_client / direct:.2f}x",
            f"{(through_client - direct) / count * 1000:.2f} ms per prompt",
        ),
        (
            f"the run of those {BATCH_ROUNDS} batches ({run.outcome})",
            f"{run.wall_seconds:.3f} s wall",
            f"turns ran {run.serial_seconds:.1f} s in all; {run.sessions} sessions "
            "(its wall time spans the direct rounds between)",
        ),
        (
            "the store's write-ahead log after a batch, at most",
            f"{largest_log / 2**20:.1f} MiB",
            f"{largest_log / stored:.2f}x the database file ({stored / 2**20:.1f} MiB after the batches)",
        ),
    ]


async def fleet(count: int) -> list[tuple[str, str, str]]:
    """The fleet summary a status line asks for, with one session that has worked and with `count`."""
    work = scratch("sd-bench-fleet-", until_exit=True)

    async def summary_ms(client: AsyncDaemon) -> float:
        times = []
        for _ in range(25):
            started = time.perf_counter()
            await client.fleet()
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)

    with daemon() as d:
        async with aconnect(d.socket, start=False) as client:
            agent = await client.agent("demo")
            await (await agent.session(work)).asend("tokens 100 50\nsay done")
            one = await summary_ms(client)
            sessions = await agent.sessions(count - 1, work)
            for start in range(0, len(sessions), 500):
                await asyncio.gather(
                    *(s.asend("tokens 100 50\nsay done") for s in sessions[start : start + 500])
                )
            many = await summary_ms(client)
            assert (await client.fleet()).turns == count
    return [
        ("fleet/summary, 1 session that has worked", f"{one:.2f} ms", "baseline (median of 25)"),
        (
            f"fleet/summary, {count} sessions that have worked",
            f"{many:.2f} ms",
            f"{many / one:.2f}x the baseline",
        ),
    ]


async def mcp(count: int) -> list[tuple[str, str, str]]:
    """`count` sessions each calling a tool of their `sessiond` MCP server: through the stdio bridge
    (a process per session) and through the daemon's own http endpoint, in the same run."""
    work = scratch("sd-bench-mcp-", until_exit=True)
    figures: dict[str, tuple[float, int]] = {}
    for transport in ("stdio", "http"):
        with daemon() as d:
            async with aconnect(d.socket, start=False) as client:
                demo = await client.agent("demo")
                flags = ["--no-mcp-http"] if transport == "stdio" else []
                agent = await client.agent("bench", command=[*demo.info.command, *flags])
                await (await agent.session(work)).asend("say up")  # the agent process is up
                sessions = await agent.sessions(count, work)
                started = time.perf_counter()
                replies = await asyncio.gather(*(s.asend("suggest Bench | say hi") for s in sessions))
                elapsed = time.perf_counter() - started
                assert all(r.text.startswith("Suggested task ") for r in replies), replies[0].text
                figures[transport] = (elapsed, tree_rss_kib(d.pid))
    (stdio_s, stdio_kib), (http_s, http_kib) = figures["stdio"], figures["http"]
    return [
        (
            f"{count} sessions call an MCP tool, stdio bridge",
            f"{stdio_s:.2f} s, {stdio_kib / 1024:.0f} MiB",
            "baseline (memory: daemon, agent and their children)",
        ),
        (
            f"{count} sessions call an MCP tool, the daemon's http endpoint",
            f"{http_s:.2f} s, {http_kib / 1024:.0f} MiB",
            f"{http_s / stdio_s:.2f}x the time, {http_kib / stdio_kib:.2f}x the memory",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--batch", type=int, default=500, help="prompts in the batch benchmark")
    parser.add_argument("--fleet", type=int, default=5000, help="sessions behind the fleet summary")
    parser.add_argument("--mcp", type=int, default=10, help="sessions calling an MCP tool")
    parser.add_argument("--startup-rounds", type=int, default=5, help="rounds of each spawn figure")
    parser.add_argument(
        "--scale",
        default="1000,10000,100000",
        help="sessions (2,000 with a turn) beside list pages, turns, a restart",
    )
    parser.add_argument("--prune", type=int, default=100_000, help="closed sessions a prune removes")
    args = parser.parse_args()
    print(
        table("Spawn → first answer (medians, same-run baselines)", startup.spawn_rows(args.startup_rounds))
    )
    print()
    sizes = [int(size) for size in args.scale.split(",")]
    print(table(scale.TITLE, scale.rows(sizes)))
    print()
    print(table(prune.TITLE, prune.rows(args.prune, prune.EVENTS)))
    print()
    print(table("Opening sessions", asyncio.run(open_many(args.sessions))))
    print()
    print(table("Turns", asyncio.run(turns(args.turns))))
    print()
    sizes = [max(1, args.turns // 4), args.turns * 4]
    print(table("Turns: rounds of other sizes", asyncio.run(round_sizes(sizes))))
    print()
    print(table("First turns on a repository", in_a_repository(args.turns)))
    print()
    print(table("A batch through the Python client", asyncio.run(batch(args.batch))))
    print()
    work = scratch("sd-bench-stream-", until_exit=True)
    print(table("Streaming to subscribers", asyncio.run(streaming.run(args.turns, work))))
    print()
    print(table("The fleet summary", asyncio.run(fleet(args.fleet))))
    print()
    print(table("The sessiond MCP tools", asyncio.run(mcp(args.mcp))))
    print()
    print(table(connections.TITLE, asyncio.run(connections.run())))
    print()
    print(table("Hostile and careless clients: daemon memory", asyncio.run(limits.run())))
    print()
    print(table("Real agents against their stand-ins", asyncio.run(real_agents.run())))
    print()
    print(table("The demo agent on a Ray node (a local cluster)", asyncio.run(ray_agents.run(args.turns))))
    from bench import acp_face, timeline

    print()
    print(table(acp_face.TITLE, asyncio.run(acp_face.measure(acp_face.TURNS))))
    print()
    print(table(*timeline.run()))


if __name__ == "__main__":
    main()
