"""The demo agent run on a Ray node (runner "ray") against the same agent run locally, one daemon,
rounds alternating: many turns at once, and one turn after another (what the actor path adds to
each turn's messages); and the same turns spread over two processes of one agent, one on each
of two nodes. Then one message: a line's round trip to a process through its actor (the
daemon's own path: `ray_runner.spawn_on_ray`, its writes in actor calls, its stdout streamed back)
against the same over a local pipe; and a file read on a node (what a worktree made there from a
repository does for each fs request: a call of the agent's actor there, while it lives, else a
task pinned to the node) against the same read in a thread here. The cluster is local
(`ray.cluster_utils.Cluster`, a head and two workers)."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import Daemon, ray_files_in_scratch, scratch, table
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


async def _line_round_trips(stdin: Any, stdout: asyncio.StreamReader, count: int) -> float:
    """The median seconds for a line written to `cat` to come back."""
    times = []
    for i in range(count):
        line = b'{"jsonrpc":"2.0","method":"ping","params":{"n":%d}}\n' % i
        started = time.perf_counter()
        stdin.write(line)
        await stdin.drain()
        assert await stdout.readline() == line
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _messages(count: int, state: Path) -> list[Row]:
    """One message's round trip through the actor path against a local pipe, alternating rounds."""
    from sessiond.daemon.placements import checkout
    from sessiond.daemon.placements.repository import LOCAL
    from sessiond.daemon.ray_runner import RayMachine, spawn_on_ray
    from sessiond.protocol.models import RaySettings

    environment = dict(os.environ)
    local = await asyncio.create_subprocess_exec(
        "cat", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=environment
    )
    assert local.stdin is not None
    assert local.stdout is not None
    settings = RaySettings(num_cpus=0.5, resources={"agents": 1})
    remote = (await spawn_on_ray("cat", ["cat"], environment, state / "cat.log", settings)).proc
    machine = remote.machine()
    pinned = RayMachine(machine.id, machine.name or "")  # the node without the actor: a pinned task
    sample = state / "sample.txt"
    sample.write_text("a line of a file\n" * 200)
    local_times: list[float] = []
    ray_times: list[float] = []
    here_reads: list[float] = []
    node_reads: list[float] = []
    pinned_reads: list[float] = []
    try:
        for _ in range(ROUNDS):
            local_times.append(await _line_round_trips(local.stdin, local.stdout, count))
            ray_times.append(await _line_round_trips(remote.stdin, remote.stdout, count))
            for reads, where in ((here_reads, LOCAL), (node_reads, machine), (pinned_reads, pinned)):
                started = time.perf_counter()
                for _ in range(count // 4):
                    await where.call(checkout.read_text, str(state), str(sample))
                reads.append((time.perf_counter() - started) / (count // 4))
    finally:
        local.stdin.close()
        await local.wait()
        remote.stdin.close()
        await remote.wait()
    pipe, actor = statistics.median(local_times), statistics.median(ray_times)
    here, node, task = (statistics.median(r) for r in (here_reads, node_reads, pinned_reads))
    return [
        (
            f"one ACP-sized line to `cat` and back, local pipe (median of {count} x {ROUNDS})",
            f"{pipe * 1000:.3f} ms",
            "baseline",
        ),
        (
            "the same through the agent's actor on a Ray node",
            f"{actor * 1000:.3f} ms",
            f"{actor / pipe:.1f}x the pipe; the actor path adds {(actor - pipe) * 1000:.2f} ms a message",
        ),
        (
            f"a 3.4 KB file read in a thread here (median of {count // 4} x {ROUNDS})",
            f"{here * 1000:.3f} ms",
            "baseline",
        ),
        (
            "the same read on the node, through the agent's actor there",
            f"{node * 1000:.3f} ms",
            f"{node / here:.1f}x here; {(node - here) * 1000:.2f} ms more a call",
        ),
        (
            "the same read on the node in a task pinned to it (once its actor is gone)",
            f"{task * 1000:.3f} ms",
            f"{task / here:.1f}x here; {(task - here) * 1000:.2f} ms more a call",
        ),
    ]


async def run(turns: int = 200, sequential: int = 50, messages: int = 400) -> list[Row]:
    with ray_files_in_scratch():
        return await _run(turns, sequential, messages)


async def _run(turns: int, sequential: int, messages: int) -> list[Row]:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1, resources={"agents": 1, "spread": 1})
    cluster.add_node(num_cpus=1, resources={"spread": 1})
    cluster.wait_for_nodes()
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = cluster.address
    work = scratch("sd-bench-ray-", until_exit=True)
    # The agents' own state goes beside the work, not in it: sessions outside git snapshot their root.
    state = scratch("sd-bench-ray-state-", until_exit=True)
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
            await on_ray.aremove()  # its node's room goes to the process measured below
        per_message = await _messages(messages, state)
    finally:
        daemon.stop()
        import ray

        ray.shutdown()  # this process joined the cluster for the messages' measure
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
        *per_message,
    ]


if __name__ == "__main__":
    print(table("The demo agent on a Ray node (a local cluster)", asyncio.run(run())))
