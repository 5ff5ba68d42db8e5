"""The demo agent run on a Ray node (runner "ray") against the same agent run locally, one daemon,
rounds alternating: many turns at once, and one turn after another (what the actor path adds to
each turn's messages); and the same turns spread over two processes of one agent, one on each
of two nodes. The cluster is local (`ray.cluster_utils.Cluster`, a head and two workers)."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import Daemon
from sessiond.client import AsyncAgent, aconnect

Row = tuple[str, str, str]
ROUNDS = 5


async def _at_once(agent: AsyncAgent, count: int, work: Path) -> float:
    sessions = await agent.sessions(count, work)
    started = time.perf_counter()
    replies = await asyncio.gather(*(s.asend("say done") for s in sessions))
    assert all(r.text == "done" for r in replies)
    return time.perf_counter() - started


async def _one_by_one(agent: AsyncAgent, count: int, work: Path) -> float:
    session = await agent.session(work)
    started = time.perf_counter()
    for _ in range(count):
        await session.asend("say done")
    return (time.perf_counter() - started) / count


async def run(turns: int = 200, sequential: int = 50) -> list[Row]:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1, resources={"agents": 1, "spread": 1})
    cluster.add_node(num_cpus=1, resources={"spread": 1})
    cluster.wait_for_nodes()
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = cluster.address
    work = Path(tempfile.mkdtemp(prefix="sd-bench-ray-"))
    # The agents' own state goes beside the work, not in it: sessions outside git snapshot their root.
    state = Path(tempfile.mkdtemp(prefix="sd-bench-ray-state-"))
    command = [sys.executable, "-m", "sessiond.daemon.demo_agent", "--state-dir"]
    daemon = Daemon().start()
    local_times: list[float] = []
    ray_times: list[float] = []
    local_each: list[float] = []
    ray_each: list[float] = []
    spread_times: list[float] = []
    try:
        async with aconnect(daemon.socket, start=False) as client:
            local = await client.agent("local-demo", command=[*command, str(state / "local")])
            on_ray = await client.agent(
                "ray-demo",
                command=[*command, str(state / "ray")],
                runner="ray",
                ray={"num_cpus": 0.5, "resources": {"agents": 1}},
            )
            spread = await client.agent(
                "ray-spread",
                command=[*command, str(state / "spread")],
                runner="ray",
                processes=2,
                ray={"num_cpus": 0.5, "resources": {"spread": 1}},
            )
            for agent in (local, on_ray, spread):  # started, and warm
                await asyncio.gather(*(s.asend("say done") for s in await agent.sessions(2, work)))
            for _ in range(ROUNDS):
                local_times.append(await _at_once(local, turns, work))
                ray_times.append(await _at_once(on_ray, turns, work))
                spread_times.append(await _at_once(spread, turns, work))
                local_each.append(await _one_by_one(local, sequential, work))
                ray_each.append(await _one_by_one(on_ray, sequential, work))
    finally:
        daemon.stop()
        cluster.shutdown()
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous
    at_once_local, at_once_ray = statistics.median(local_times), statistics.median(ray_times)
    each_local, each_ray = statistics.median(local_each), statistics.median(ray_each)
    added_ms = (each_ray - each_local) * 1000
    return [
        (
            f"{turns} demo turns at once, agent local (median of {ROUNDS})",
            f"{at_once_local:.3f} s",
            "baseline",
        ),
        (
            f"{turns} demo turns at once, agent on a Ray node",
            f"{at_once_ray:.3f} s",
            f"{at_once_ray / at_once_local:.2f}x local",
        ),
        (
            f"{turns} demo turns at once, one agent's 2 processes on 2 Ray nodes",
            f"{statistics.median(spread_times):.3f} s",
            f"{statistics.median(spread_times) / at_once_ray:.2f}x one process on one node",
        ),
        (
            f"one turn after another, agent local (median of {sequential})",
            f"{each_local * 1000:.1f} ms",
            "baseline",
        ),
        (
            "one turn after another, agent on a Ray node",
            f"{each_ray * 1000:.1f} ms",
            f"{each_ray / each_local:.2f}x local; the actor path adds {added_ms:.1f} ms a turn",
        ),
    ]
