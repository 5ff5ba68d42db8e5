"""A worktree of a repository the session names, made on the Ray node its agent runs on: a real
local cluster and daemon (conftest), a worker node started in bubblewrap with an empty tmpfs over
a folder (its writes there are its own: this machine does not see them), the clone and the
worktree made in that folder, so that they exist on the node only; the repository a bare one this
machine and the node both reach by a file:// URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessiond.client import AsyncAgent, AsyncDaemon, PlacementFailed
from sessiond.protocol.models import AgentInfo, SessionInfo, SessionOpenResult
from tests.placements.placement_helpers import bare_repository, git, merged
from tests.ray.nodes import demo_on_ray, node_without

pytestmark = pytest.mark.timeout(240)


async def open_in(client: AsyncDaemon, agent: AsyncAgent, **settings: Any) -> SessionInfo:
    opened = await client._call(
        "session/open", SessionOpenResult, agent=agent.name, placement_settings=settings
    )
    return opened.sessions[0]


async def test_a_worktree_of_the_sessions_repository_lives_on_its_agents_node(
    client: AsyncDaemon, cluster: Any, tmp_path: Path
) -> None:
    remote = bare_repository(tmp_path)
    url = f"file://{remote}"
    node_only = tmp_path / "node-only"
    checkouts = node_only / "checkouts"
    with node_without(cluster, node_only, "repo-node"):
        agent = await client.agent(
            "cloner",
            command=demo_on_ray(tmp_path / "state"),
            runner="ray",
            ray={"num_cpus": 0.5, "resources": {"repo-node": 1}, "start_timeout": 90},
        )
        info = await open_in(client, agent, repository=url, checkout_dir=str(checkouts))
        session = await client.session(info.id)
        reply = await session.asend(
            "write feature.txt made on the node\nread feature.txt\nrun pwd\nrun git status --short\nsay done"
        )
        assert reply.text.endswith("done")
        node = (await agent.aget()).process.node
        assert node is not None
        where = (await session.aget()).where
        assert where is not None
        assert where.host == node
        assert where.worktree is not None
        assert where.worktree.startswith(f"{checkouts}/")
        assert "feature.txt has 1 line. First line: made on the node" in reply.text  # fs, read there
        assert f"Ran pwd: exit code 0\n{where.worktree}" in reply.text  # the command ran in it, there
        assert "?? feature.txt" in reply.text
        assert not Path(where.worktree).exists()  # on the node alone: this machine cannot see it
        assert list(node_only.iterdir()) == []
        changes = (await session.aget()).changes  # counted there
        assert changes is not None
        assert [(f.path, f.kind, f.added) for f in changes.files] == [("feature.txt", "added", 1)]

        # Merged back: its branch pushed from the node, merged here in the daemon's clone after the
        # gate, landed by pushing main; its worktree on the node goes.
        entry = await merged(client, info.id, gate="test -f feature.txt")
        assert entry.status == "merged", entry.reason
        assert git(remote, "show", "main:feature.txt") == "made on the node"
        assert git(remote, "branch", "--list", "sessiond/*") == ""

        # Another, closed unmerged: its work goes to the repository as its branch, its worktree from
        # the node (a session of the same agent, in a folder both see, looks there).
        other = await open_in(client, agent, repository=url, checkout_dir=str(checkouts))
        unmerged = await client.session(other.id)
        await unmerged.asend("write notes.txt left for later\nrun ls")
        branch = (await unmerged.aget()).where
        assert branch is not None
        assert branch.worktree is not None
        await unmerged.aclose()
        kept = (await client.session(other.id)).info.last_error
        assert kept is not None
        assert f"its work is kept as branch {branch.branch} of {url}" in kept
        assert git(remote, "show", f"{branch.branch}:notes.txt") == "left for later"
        assert git(remote, "show", f"{branch.branch}:feature.txt") == "made on the node"  # from main
        (tmp_path / "shared").mkdir()
        probe = await agent.session(tmp_path / "shared")
        worktrees = Path(where.worktree).parent
        looked = await probe.asend(f"run ls -A {worktrees}\nrun ls {checkouts}")
        assert f"Ran ls -A {worktrees}: exit code 0 (no output)" in looked.text, looked.text
        assert ".git" in looked.text  # the clone stays on the node, for the next session

        # A repository the node cannot reach (this machine has it, in the folder the node lacks).
        private = bare_repository(node_only)
        blind = await open_in(client, agent, repository=f"file://{private}", checkout_dir=str(checkouts))
        with pytest.raises(PlacementFailed) as failed:
            await (await client.session(blind.id)).asend("say hello")
        assert f"cannot fetch the repository file://{private} on {node}:" in str(failed.value)
        assert "does not appear to be a git repository" in str(failed.value)
        assert f"check its URL, and that {node} can reach it" in str(failed.value)
        await agent.aremove()


async def test_a_worktree_on_a_node_moves_with_its_work_when_the_agents_process_does(
    client: AsyncDaemon, cluster: Any, tmp_path: Path
) -> None:
    remote = bare_repository(tmp_path)
    url = f"file://{remote}"
    node_only = tmp_path / "node-only"
    with node_without(cluster, node_only, "mover-node"):
        agent = await client.agent(
            "mover",
            command=demo_on_ray(tmp_path / "state"),
            runner="ray",
            ray={"num_cpus": 0.5, "resources": {"mover-node": 1}, "start_timeout": 90},
        )
        info = await open_in(client, agent, repository=url, checkout_dir=str(node_only / "checkouts"))
        session = await client.session(info.id)
        await session.asend("write moving.txt not committed yet")
        before = (await agent.aget()).process.node
        where = (await session.aget()).where
        assert where is not None
        assert where.worktree is not None
        assert not Path(where.worktree).exists()  # on that node alone
        # The agent's process goes to node a (whose filesystem is this machine's).
        await client._call(
            "agent/update",
            AgentInfo,
            name="mover",
            options={"ray": {"num_cpus": 0.5, "resources": {"node-a": 1}}},
            restart=True,
        )
        async with client.events(sessions=[info.id], kinds=["turn.ended"]) as ended:
            reply = await session.asend("read moving.txt")
            event = await anext(ended)
        after = (await agent.aget()).process.node
        assert after is not None
        assert cluster.nodes["a"].node_id[:12] in after
        assert "moving.txt has 1 line. First line: not committed yet" in reply.text
        assert event.data["notice"] == (
            f"the session's worktree moved from {before} to {after} with its work (pushed as branch "
            f"{where.branch} of {url} and checked out there)"
        )
        moved = (await session.aget()).where
        assert moved is not None
        assert moved.host == after
        assert moved.worktree is not None
        assert (Path(moved.worktree) / "moving.txt").read_text() == "not committed yet"  # node a: here
        await session.aclose()
        assert not Path(moved.worktree).exists()
        await agent.aremove()
