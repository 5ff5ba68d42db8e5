"""Placements through the daemon: the demo agent's edits and commands land where the session works."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from placement_helpers import PROBE_PYTHON, Sshd, bwrap_problem, git, merged, probe_results, write_probe

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, InvalidParams, SessiondError, aconnect
from sessiond.protocol.models import MergeEntry, SessionInfo, SessionOpenResult


async def open_session(client: AsyncDaemon, root: Path, placement: str, **settings: Any) -> SessionInfo:
    params: dict[str, Any] = {"root": str(root), "placement": placement}
    if settings:
        params["placement_settings"] = settings
    opened = await client._call("session/open", SessionOpenResult, **params)
    return opened.sessions[0]


async def prompt(client: AsyncDaemon, session: str, text: str) -> str:
    return (await (await client.session(session)).asend(text)).text


async def test_a_worktree_session_works_apart_and_merges_back(client: AsyncDaemon, repo: Path) -> None:
    session = await open_session(client, repo, "worktree")
    reply = await prompt(client, session.id, "write feature.txt new work\nrun git status --short")
    info = await (await client.session(session.id)).aget()
    assert info.where is not None
    assert info.where.worktree is not None
    assert info.where.branch is not None
    worktree = Path(info.where.worktree)
    assert (worktree / "feature.txt").read_text() == "new work"
    assert not (repo / "feature.txt").exists()  # the user's working copy is untouched
    assert "feature.txt" in reply
    entry = await merged(client, session.id)
    assert entry.status == "merged"
    assert (repo / "feature.txt").exists() or "feature.txt" in git(repo, "show", "--stat", "HEAD")
    assert "feature.txt" in git(repo, "ls-tree", "-r", "--name-only", "main")
    assert not worktree.exists()  # cleaned up after the merge
    assert entry.kept is False


async def test_a_conflicting_merge_changes_nothing_and_goes_back_to_the_session(
    client: AsyncDaemon, repo: Path
) -> None:
    first = await open_session(client, repo, "worktree")
    second = await open_session(client, repo, "worktree")
    target = next(p.name for p in repo.iterdir() if p.is_file() and not p.name.startswith("."))
    await prompt(client, first.id, f"write {target} from the first session")
    await prompt(client, second.id, f"write {target} from the second session")
    assert (await merged(client, first.id)).status == "merged"
    head = git(repo, "rev-parse", "main")
    status = git(repo, "status", "--porcelain")
    async with client.events(sessions=[second.id], kinds=["turn.queued"]) as events:
        entry = await merged(client, second.id, hand_back=True)
        async with asyncio.timeout(60):
            handed = await anext(events)
    assert entry.status == "failed"
    assert target in entry.conflicts
    assert git(repo, "rev-parse", "main") == head
    assert git(repo, "status", "--porcelain") == status
    assert "conflicts" in handed.data["prompt"]


async def test_a_worktree_session_merged_before_its_first_turn_is_told_so_by_its_own_id(
    client: AsyncDaemon, repo: Path
) -> None:
    session = await open_session(client, repo, "worktree")
    with pytest.raises(SessiondError) as refused:
        await client._call("merge/request", MergeEntry, session=session.id)
    assert str(refused.value).startswith(
        f"cannot merge session {session.id!r}: the session has no worktree yet: it is made on the "
        "session's first turn"
    )  # (not the worktree's own name for it, `s1-<n>`)


async def test_a_worktree_needs_git(client: AsyncDaemon, tmp_path: Path) -> None:
    with pytest.raises(InvalidParams, match="not in a git repository"):
        await open_session(client, tmp_path, "worktree")


async def test_a_sandboxed_command_sees_the_project_and_cannot_write_outside(
    client: AsyncDaemon, project: Path
) -> None:
    problem = bwrap_problem()
    if problem:
        pytest.fail(f"bubblewrap does not work here: {problem} (./dev test installs it)")
    session = await open_session(client, project, "sandbox")
    outside = project.parent / "outside" / "sandboxed.txt"
    reply = await prompt(
        client, session.id, f"run pwd\nrun touch {outside}\nrun touch {project}/made-inside.txt"
    )
    assert str(project) in reply
    assert not outside.exists()
    assert (project / "made-inside.txt").exists()
    assert "exit code 0" in reply
    assert "exit code 1" in reply  # touch outside failed: read-only


@pytest.fixture
async def exposed(off_tmp: Path) -> AsyncIterator[tuple[AsyncDaemon, Daemon]]:
    """A daemon whose home is outside /tmp (the sandbox's private /tmp would hide it anyway),
    serving TCP as well, with a config folder that holds something."""
    problem = bwrap_problem()
    if problem:
        pytest.fail(f"bubblewrap does not work here: {problem} (./dev test installs it)")
    home = off_tmp / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "agents.toml").write_text("# nothing\n")
    daemon = Daemon(home, extra_args=("--tcp", "127.0.0.1:0")).start()
    try:
        async with aconnect(daemon.socket, start=False) as connected:
            yield connected, daemon
    finally:
        assert daemon.stop() == 0


async def probe(client: AsyncDaemon, session: SessionInfo, script: Path, checks: list[str]) -> dict[str, str]:
    reply = await prompt(client, session.id, f"run {PROBE_PYTHON} {script} {' '.join(checks)}")
    results = probe_results(reply)
    assert len(results) == len(checks), reply
    return results


async def test_a_sandboxed_command_cannot_reach_the_daemon_nor_write_outside(
    exposed: tuple[AsyncDaemon, Daemon], off_tmp: Path
) -> None:
    """What a command in a sandbox session tries, each against the real daemon that runs it.

    The same commands in a `here` session all work, and with `sandbox_network` the TCP
    connect does: so each check can fail, and fails in the sandbox for the reason given.
    """
    client, daemon = exposed
    state = daemon.home / "state"
    address = (state / "tcp-address").read_text().strip()
    assert (state / "tcp-token").exists()
    assert (state / "session-secret").exists()
    script = write_probe(off_tmp)
    project = off_tmp / "project"
    project.mkdir()
    inside_state = state / "work"  # a project inside the daemon's state folder
    inside_state.mkdir()

    def checks(tag: str, root: Path) -> list[str]:
        return [
            f"socket=unix:{daemon.socket}",
            f"secret=read:{state}/session-secret",
            f"token=read:{state}/tcp-token",
            f"store=read:{state}/sessiond.db",
            f"config=read:{daemon.home}/config/agents.toml",
            f"tcp=tcp:{address}",
            f"procroot=procroot:{daemon.pid}:{state}/session-secret",
            f"outside=write:{off_tmp}/outside-{tag}.txt",
            f"inside=write:{root}/inside-{tag}.txt",
        ]

    here = await open_session(client, project, "here")
    assert set((await probe(client, here, script, checks("here", project))).values()) == {"OK"}

    for tag, root in (("sibling", project), ("within", inside_state)):
        sandbox = await open_session(client, root, "sandbox")
        results = await probe(client, sandbox, script, checks(tag, root))
        for name in ("socket", "secret", "token", "store", "config", "procroot"):
            assert results[name].startswith("NO FileNotFoundError: [Errno 2] No such file"), results
        assert results["tcp"] == "NO ConnectionRefusedError: [Errno 111] Connection refused"
        assert results["outside"].startswith("NO OSError: [Errno 30] Read-only file system"), results
        assert not (off_tmp / f"outside-{tag}.txt").exists()
        assert results["inside"] == "OK"
        assert (root / f"inside-{tag}.txt").read_text() == "escaped\n"

    networked = await open_session(client, project, "sandbox", sandbox_network=True)
    results = await probe(client, networked, script, checks("networked", project))
    assert results["tcp"] == "OK"  # the port is there: only the sandbox's own network kept it out
    assert results["secret"].startswith("NO FileNotFoundError")  # so the token it needs stays hidden
    assert results["socket"].startswith("NO FileNotFoundError")


async def test_an_ssh_session_runs_and_writes_on_the_target(
    debug_daemon: Daemon, sshd: Sshd, tmp_path: Path
) -> None:
    remote = sshd.home / "remote-project"
    remote.mkdir()
    local = tmp_path / "local"
    local.mkdir()
    async with aconnect(debug_daemon.socket, start=False) as client:
        session = await open_session(
            client,
            local,
            "ssh",
            ssh_target=f"{sshd.user}@127.0.0.1:{sshd.port}",
            ssh_dir=str(remote),
            ssh_key_file=sshd.key,
            ssh_known_hosts=sshd.known_hosts,
        )
        reply = await prompt(client, session.id, "write landed.txt over ssh\nrun pwd")
        assert (remote / "landed.txt").read_text() == "over ssh"
        assert not (local / "landed.txt").exists()
        assert str(remote) in reply
        info = await (await client.session(session.id)).aget()
        assert info.where is not None
        assert info.where.host is not None
    # asyncssh (~0.2 s to import) loaded with the first turn, off the loop's thread.
    assert "on sessiond-importer" in debug_daemon.wait_for_line("DEBUG loading asyncssh ")


async def test_an_unreachable_ssh_target_fails_the_turn_clearly_and_the_session_lives(
    client: AsyncDaemon, sshd: Sshd, tmp_path: Path
) -> None:
    session = await open_session(
        client,
        tmp_path,
        "ssh",
        ssh_target=f"{sshd.user}@127.0.0.1:1",
        ssh_key_file=sshd.key,
        ssh_known_hosts=sshd.known_hosts,
        ssh_connect_timeout=5.0,
    )
    with pytest.raises(SessiondError, match="could not be set up") as caught:
        await prompt(client, session.id, "say hi")
    assert "127.0.0.1:1" in str(caught.value)
    info = await (await client.session(session.id)).aget()
    assert info.status == "failed"


async def test_two_sessions_editing_one_file_collide(client: AsyncDaemon, project: Path) -> None:
    a = await open_session(client, project, "here")
    b = await open_session(client, project, "here")
    async with client.events(kinds=["session.collision"]) as events:
        await prompt(client, a.id, "write shared.txt from a")
        await prompt(client, b.id, "write shared.txt from b")
        async with asyncio.timeout(60):
            event = await anext(events)
    assert set(event.data["sessions"]) == {a.id, b.id}
    assert "undo each other's work" in event.data["message"]
