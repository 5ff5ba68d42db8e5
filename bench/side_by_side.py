"""A change to the daemon measured side by side: the daemon at a git revision (HEAD unless told)
beside the working tree's, rounds of first turns taking turns with the same turns straight to the
demo agent over ACP, in one run.

    .venv/bin/python -m bench.side_by_side [--rev HEAD] [--rounds 30] [--turns 200]

These machines are shared: the same daemon measured in two runs differs by more than most changes
do. Here both daemons and the straight agent meet the same noise, round after round, and every
figure is a median (the same tree on both sides came out within ~3% of itself).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.direct_acp import direct_agent
from bench.harness import Daemon, daemon, scheduled, scratch, settled, table
from sessiond.client import AsyncAgent, AsyncDaemon, AsyncSession, aconnect

PROMPT = "say done"  # a first turn of the demo agent: it answers "done"
REPO = Path(__file__).resolve().parents[1]


def export(rev: str) -> Path:
    """The tree of `rev` as a `sessiond` package in a scratch folder (removed when this process exits)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", rev], capture_output=True, check=True
        ).stdout
    except subprocess.CalledProcessError as exc:
        sys.exit(f"bench.side_by_side: git cannot export {rev!r}: {exc.stderr.decode().strip()}")
    root = scratch("sd-rev-", until_exit=True)
    (root / "sessiond").mkdir()
    subprocess.run(["tar", "-x", "-C", str(root / "sessiond")], input=archive, check=True)
    return root


@dataclass
class Side:
    """What each round of one side took: seconds, the CPU seconds of its daemon (none straight) and
    of its agent, and the agent's seconds with nothing to do (waiting on its client)."""

    name: str
    took: list[float] = field(default_factory=list)
    daemon_cpu: list[float] = field(default_factory=list)
    agent_cpu: list[float] = field(default_factory=list)
    agent_idle: list[float] = field(default_factory=list)

    async def round(self, run: Awaitable[float], agent_pid: int, daemon_pid: int | None = None) -> None:
        gc.collect()  # (a full pass of this process's collector took 50 ms inside one round)
        agent_before = scheduled(agent_pid)
        daemon_before = scheduled(daemon_pid) if daemon_pid is not None else (0.0, 0.0)
        took = await run
        ran, waited = (
            after - before for after, before in zip(scheduled(agent_pid), agent_before, strict=True)
        )
        self.took.append(took)
        self.agent_cpu.append(ran)
        self.agent_idle.append(took - ran - waited)
        if daemon_pid is not None:
            self.daemon_cpu.append(scheduled(daemon_pid)[0] - daemon_before[0])


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


async def warm(client: AsyncDaemon, pid: int, work: Path) -> AsyncAgent:
    agent = await client.agent("demo")
    await (await agent.session(work)).asend(PROMPT)  # its agent started and warm
    await settled(pid)
    return agent


async def turns_at_once(sessions: list[AsyncSession]) -> float:
    started = time.perf_counter()
    replies = await asyncio.gather(*(session.asend(PROMPT) for session in sessions))
    took = time.perf_counter() - started
    if any(reply.text != "done" for reply in replies):
        raise AssertionError("a turn did not answer as the demo agent does")
    return took


async def measure(rev: str, rounds: int, turns: int) -> list[tuple[str, str, str]]:
    code = export(rev)
    work = scratch("sd-side-work-", in_memory=True, until_exit=True)
    state = scratch("sd-side-state-", in_memory=True, until_exit=True)
    straight, at_rev, working = Side("straight"), Side(rev), Side("the working tree")
    with daemon(in_memory=True, code=code) as old, daemon(in_memory=True) as new:
        async with (
            direct_agent(PROMPT, work, state) as straight_rounds,
            aconnect(old.socket, start=False) as old_client,
            aconnect(new.socket, start=False) as new_client,
        ):
            daemons = [(at_rev, old, await warm(old_client, old.pid, work))]
            daemons.append((working, new, await warm(new_client, new.pid, work)))

            async def through(side: Side, d: Daemon, agent: AsyncAgent) -> None:
                sessions = await agent.sessions(turns, work)
                await settled(d.pid, window=0.05, quiet=0.05)
                (agent_pid,) = d.children()
                await side.round(turns_at_once(sessions), agent_pid, d.pid)

            runs: list[Callable[[], Awaitable[None]]] = [
                *(functools.partial(through, side, d, agent) for side, d, agent in daemons),
                lambda: straight.round(straight_rounds(turns), straight_rounds.pid),
            ]
            # Each side first as often as the others: what runs after a side pays for what it left running.
            for n in range(rounds):
                for run in runs[n % 3 :] + runs[: n % 3]:
                    await run()
    return rows(turns, rounds, straight, at_rev, working)


def rows(turns: int, rounds: int, straight: Side, at_rev: Side, working: Side) -> list[tuple[str, str, str]]:
    base = statistics.median(straight.took)
    found: list[tuple[str, str, str]] = [
        (
            f"{turns} first turns at once, straight to the demo agent (ACP)",
            ms(straight.took),
            f"median of {rounds} rounds",
        ),
    ]
    for side in (at_rev, working):
        paired = [t / s for t, s in zip(side.took, straight.took, strict=True)]
        found.append(
            (
                f"the same through the daemon at {side.name}",
                ms(side.took),
                f"{statistics.median(side.took) / base:.2f}x straight; round by round median "
                f"{statistics.median(paired):.2f}x, "
                f"{sum(r <= 1.15 for r in paired)} of {rounds} within 1.15x",
            )
        )
    found.append(
        (
            f"the working tree against {at_rev.name}: a round",
            f"{statistics.median(working.took) / statistics.median(at_rev.took):.3f}x",
            "under 1 is faster",
        )
    )
    found.append(
        (
            f"the working tree against {at_rev.name}: the daemon's CPU a round",
            f"{statistics.median(working.daemon_cpu) / statistics.median(at_rev.daemon_cpu):.3f}x",
            f"{ms(working.daemon_cpu)} against {ms(at_rev.daemon_cpu)}",
        )
    )
    for side in (straight, at_rev, working):
        found.append(
            (
                f"the agent a round, {side.name}",
                ms(side.agent_cpu),
                f"CPU; idle (waiting on its client) {ms(side.agent_idle)}",
            )
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rev", default="HEAD", help="the git revision to run beside the working tree")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--turns", type=int, default=200, help="first turns at once in each round")
    args = parser.parse_args()
    title = f"The daemon at {args.rev} beside the working tree's"
    print(table(title, asyncio.run(measure(args.rev, args.rounds, args.turns))))


if __name__ == "__main__":
    main()
