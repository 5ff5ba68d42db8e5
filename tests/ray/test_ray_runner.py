"""Agents run on a Ray cluster (runner "ray"): a real local cluster (`ray.cluster_utils.Cluster`,
a head and worker nodes with custom resources, all on this machine, so they share its
filesystem), a real daemon, the demo agent in an actor on the node its resources choose.
What is not real here: the nodes are processes of one machine, not machines."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ray._private import ray_constants

from bench.harness import Daemon
from sessiond.client import AgentUnavailable, AsyncDaemon, PlacementFailed
from sessiond.protocol.models import SessionOpenResult
from tests.daemon.events import next_matching
from tests.placements.placement_helpers import bare_repository
from tests.ray.nodes import demo_on_ray, node_without

pytestmark = pytest.mark.timeout(180)


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


async def test_sessions_spread_over_two_processes_on_two_nodes(
    client: AsyncDaemon, cluster: Any, work: Path, tmp_path: Path
) -> None:
    """20 sessions of one agent with two processes, each process asking for the one `agents` unit
    a worker node has: one process per node, ten sessions each."""
    options = {"processes": 2, "runner": "ray", "ray": {"num_cpus": 0.5, "resources": {"agents": 1}}}
    agent = await client.agent("fleet", command=demo_on_ray(tmp_path / "state"), **options)
    sessions = await agent.sessions(20, work)
    replies = await asyncio.gather(*(s.asend(f"write s{i}.txt {i}\nsay {i}") for i, s in enumerate(sessions)))
    assert [r.text for r in replies] == [str(i) for i in range(20)]
    info = await agent.aget()
    assert [p.live_sessions for p in info.processes] == [10, 10]
    nodes = {p.node for p in info.processes}
    assert {cluster.nodes[n].node_id[:12] for n in "ab"} == {node.split()[2] for node in nodes if node}
    for _ in range(600):  # read on the node: its first reading may come late on a loaded machine
        if all(p.memory is not None for p in info.processes):
            break
        await asyncio.sleep(0.1)
        info = await agent.aget()
    memory = [p.memory for p in info.processes]
    assert all(m is not None and m > 1_000_000 for m in memory), memory
    assert sorted(f.name for f in work.glob("s*.txt")) == sorted(f"s{i}.txt" for i in range(20))
    # Removed, its actors go and give their nodes' resources back: an agent asking for the same
    # finds room at once.
    await agent.aremove()
    again = await client.agent(
        "fleet-again",
        command=demo_on_ray(tmp_path / "state"),
        **{**options, "ray": {**options["ray"], "start_timeout": 30}},
    )
    pair = await again.sessions(2, work)
    await asyncio.gather(*(s.asend("say back") for s in pair))
    assert [p.live_sessions for p in (await again.aget()).processes] == [1, 1]
    await again.aremove()


async def test_a_killed_raylet_fails_only_its_nodes_turn_and_the_next_turn_runs_elsewhere_with_history(
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
    # A session in a worktree of a repository, made on that node (here the nodes share this
    # machine's filesystem, so the other node finds it where it was).
    remote = bare_repository(tmp_path)
    cloned = await client._call(
        "session/open",
        SessionOpenResult,
        agent="spread",
        placement_settings={"repository": f"file://{remote}", "checkout_dir": str(tmp_path / "checkouts")},
    )
    in_worktree = await client.session(cloned.sessions[0].id)
    await in_worktree.asend("write kept.txt written on the lost node")
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
        # Abruptly: its raylet killed with SIGKILL, nothing told (the worker holding the agent's actor
        # ends when its raylet goes, and the cluster finds the node gone by its missed health checks).
        (raylet,) = lost.all_processes[ray_constants.PROCESS_TYPE_RAYLET]
        os.kill(raylet.process.pid, signal.SIGKILL)
        try:
            with pytest.raises(AgentUnavailable, match=rf"was lost with Ray node {lost.node_id[:12]}"):
                await asyncio.wait_for(turn, 90)
        finally:
            await asyncio.to_thread(cluster.remove_node, lost, False)  # what else ran on the node
    assert not other.done()  # a local agent's turn goes on
    await bystander.acancel()
    assert (await other).stop_reason == "cancelled"
    # Restored on the other node from the state the agent saved: its turns that ended (the one its
    # node took down mid-turn it never saved).
    history = await session.asend("history")
    assert history.text.startswith("1. say first")
    process = (await agent.aget()).process
    assert process.starts == 2
    assert process.node is not None
    assert lost.node_id[:12] not in process.node
    async with client.events(sessions=[in_worktree.id], kinds=["turn.ended"]) as ended:
        reply = await in_worktree.asend("read kept.txt")
        event = await anext(ended)
    assert "kept.txt has 1 line. First line: written on the lost node" in reply.text
    assert event.data["notice"].startswith(
        f"the session's worktree was on {first}, and its work could not be taken along ({first} cannot be"
    ), event.data["notice"]
    assert event.data["notice"].endswith(
        f"; {process.node} has it at the same path, as it was (they share it)"
    )
    await agent.aremove()


async def test_no_node_with_room_queues_the_turn_then_fails_it_saying_what_was_asked(
    client: AsyncDaemon, work: Path, tmp_path: Path
) -> None:
    agent = await client.agent(
        "nowhere",
        command=demo_on_ray(tmp_path / "state"),
        runner="ray",
        ray={"resources": {"gpu-box": 1}, "start_timeout": 3},
    )
    session = await agent.session(work)
    async with client.events(sessions=[session.id], kinds=["session.status"]) as statuses:
        with pytest.raises(AgentUnavailable) as failed:
            await session.asend("say hello")
        queued = await next_matching(statuses, lambda event: "detail" in event.data, timeout=10)
    assert queued.data["status"] == "queued"
    assert queued.data["detail"] == (
        "waiting for a node of the Ray cluster with room for agent 'nowhere' (CPU=1, gpu-box=1), "
        "for at most 3 s"
    )
    assert "no node of the Ray cluster had room for agent 'nowhere' (CPU=1, gpu-box=1) within 3 s" in str(
        failed.value
    )
    assert (await session.aget()).status_detail is None  # it waits no more
    await agent.aremove()


async def test_a_root_missing_on_the_node_fails_the_turn_saying_so(
    client: AsyncDaemon, cluster: Any, tmp_path: Path
) -> None:
    hidden = tmp_path / "only-here"
    (hidden / "project").mkdir(parents=True)
    (tmp_path / "shared").mkdir()
    with node_without(cluster, hidden, "blind-node"):
        agent = await client.agent(
            "blind",
            command=demo_on_ray(tmp_path / "state"),
            runner="ray",
            ray={"num_cpus": 0.5, "resources": {"blind-node": 1}, "start_timeout": 90},
        )
        missing = await agent.session(hidden / "project")
        with pytest.raises(PlacementFailed) as failed:
            await missing.asend("say hello")
        node = (await agent.aget()).process.node
        assert node is not None
        assert str(failed.value) == (
            f"the session's root {hidden / 'project'} is not on {node}, where the agent's process runs: "
            f"a Ray-run agent's sessions need their roots at the same path on every node (a "
            f"filesystem the nodes share; see docs/scale.md)"
        )
        # A root the node has is served by the same process, and its commands run on the node: a
        # file this machine has in the hidden folder is not there.
        (hidden / "here-only.txt").write_text("this machine")
        shared = await agent.session(tmp_path / "shared")
        reply = await shared.asend(
            f"write seen.txt from the node\nrun cat {hidden / 'here-only.txt'}\nsay done"
        )
        assert reply.text.endswith("done")
        assert f"Ran cat {hidden / 'here-only.txt'}: exit code 1" in reply.text, reply.text
        assert "No such file or directory" in reply.text
        assert (tmp_path / "shared" / "seen.txt").read_text() == "from the node"
        assert (await agent.aget()).process.starts == 1
        await agent.aremove()
