"""Agents run on a Ray cluster (runner "ray"): a real local cluster (`ray.cluster_utils.Cluster`,
a head and worker nodes with custom resources, all on this machine, so they share its
filesystem), a real daemon, the demo agent in an actor on the node its resources choose.
What is not real here: the nodes are processes of one machine, not machines."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray.cluster_utils as ray_cluster_utils  # the test extra installs ray

from bench.harness import Daemon, checked
from sessiond.client import AgentUnavailable, AsyncDaemon

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head (no resources for agents) and two workers, labelled node-a and node-b."""
    running = ray_cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    running.nodes = {
        "a": running.add_node(num_cpus=1, resources={"agents": 1, "node-a": 1}),
        "b": running.add_node(num_cpus=1, resources={"agents": 1, "node-b": 1}),
    }
    running.wait_for_nodes()
    yield running
    running.shutdown()


@pytest.fixture(scope="module")
def daemon(cluster: Any) -> Iterator[Daemon]:
    """One daemon for the module, joined to the cluster through RAY_ADDRESS."""
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = cluster.address
    try:
        with checked(Daemon()) as running:
            yield running
    finally:
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous


def demo_on_ray(state: Path) -> list[str]:
    return [sys.executable, "-m", "sessiond.daemon.demo_agent", "--state-dir", str(state)]


async def test_an_agent_runs_on_the_node_its_resources_choose(
    daemon: Daemon, client: AsyncDaemon, cluster: Any, work: Path, tmp_path: Path
) -> None:
    agent = await client.agent(
        "on-b",
        command=demo_on_ray(tmp_path / "state"),
        runner="ray",
        ray={"num_cpus": 0.5, "resources": {"node-b": 1}},
    )
    session = await agent.session(work)
    reply = await session.asend("plan Write | Check\nwrite notes.txt on node b\nrun cat notes.txt\nsay done")
    assert reply.text.endswith("done")
    assert "on node b" in reply.text  # the command's output, through ACP from the node
    info = await session.aget()
    assert info.plan is not None
    assert [e.content for e in info.plan.entries] == ["Write", "Check"]
    assert info.changes is not None
    assert [f.path for f in info.changes.files] == ["notes.txt"]
    assert (work / "notes.txt").read_text() == "on node b"
    process = (await agent.aget()).process
    assert process.node is not None
    assert cluster.nodes["b"].node_id[:12] in process.node
    assert cluster.nodes["a"].node_id[:12] not in process.node
    listed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "sessiond.client", "agents"],
        env=daemon.env,
        capture_output=True,
        text=True,
    )
    row = next(line for line in listed.stdout.splitlines() if line.startswith("on-b "))
    assert f"running (pid {process.pid} on Ray node {cluster.nodes['b'].node_id[:12]}" in row, row
    await agent.aremove()


async def test_a_lost_node_fails_only_its_turn_and_the_next_turn_runs_elsewhere_with_history(
    client: AsyncDaemon, cluster: Any, work: Path, tmp_path: Path
) -> None:
    spare = {
        "c": cluster.add_node(num_cpus=1, resources={"spare": 1}),
        "d": cluster.add_node(num_cpus=1, resources={"spare": 1}),
    }
    cluster.wait_for_nodes()
    agent = await client.agent(
        "spread",
        command=demo_on_ray(tmp_path / "state"),
        runner="ray",
        ray={"num_cpus": 0.5, "resources": {"spare": 1}},
    )
    session = await agent.session(work)
    await session.asend("say first")
    first = (await agent.aget()).process.node
    assert first is not None
    lost = next(node for node in spare.values() if node.node_id[:12] in first)
    bystander = await (await client.agent("demo")).session(work)
    async with client.events(sessions=[session.id, bystander.id], kinds=["turn.chunk"]) as chunks:
        turn = asyncio.create_task(session.asend("say waiting\nhang"))
        other = asyncio.create_task(bystander.asend("say waiting\nhang"))
        seen: set[str | None] = set()
        async with asyncio.timeout(60):
            async for chunk in chunks:
                seen.add(chunk.session)
                if seen == {session.id, bystander.id}:
                    break
        await asyncio.to_thread(cluster.remove_node, lost)
        with pytest.raises(AgentUnavailable, match=rf"was lost with Ray node {lost.node_id[:12]}"):
            await asyncio.wait_for(turn, 60)
    assert not other.done()  # a local agent's turn goes on
    await bystander.acancel()
    assert (await other).stop_reason == "cancelled"
    history = await session.asend("history")  # restored on the other node from its saved state
    assert history.text.startswith("1. say first\n2. say waiting")
    process = (await agent.aget()).process
    assert process.starts == 2
    assert process.node is not None
    assert lost.node_id[:12] not in process.node
    await agent.aremove()


async def test_no_node_with_room_fails_the_turn_saying_what_was_asked(
    client: AsyncDaemon, work: Path, tmp_path: Path
) -> None:
    agent = await client.agent(
        "nowhere",
        command=demo_on_ray(tmp_path / "state"),
        runner="ray",
        ray={"resources": {"gpu-box": 1}, "start_timeout": 3},
    )
    session = await agent.session(work)
    with pytest.raises(AgentUnavailable) as failed:
        await session.asend("say hello")
    assert "no node of the Ray cluster had room for agent 'nowhere' (CPU=1, gpu-box=1) within 3 s" in str(
        failed.value
    )
    await agent.aremove()
