"""A worktree of a repository the session names (placement `worktree` with `repository`), made
where the agent runs: here, for the demo agent run locally (tests/ray runs it on a Ray node whose
filesystem the daemon's machine does not share). A real daemon, real git, a bare repository
reached by a file:// URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from placement_helpers import bare_repository, git, merged

from sessiond.client import AsyncDaemon, AsyncSession, Conflict, InvalidParams, PlacementFailed
from sessiond.protocol.models import SessionInfo, SessionOpenResult, Where


async def where_of(session: AsyncSession) -> Where:
    where = (await session.aget()).where
    assert where is not None, "its placement is up after a turn"
    return where


async def open_with(client: AsyncDaemon, **params: Any) -> SessionInfo:
    opened = await client._call("session/open", SessionOpenResult, **params)
    return opened.sessions[0]


REFUSED = [
    ("ext::sh -c touch% /tmp/pwned", "names the transport 'ext'::, which sessiond does not run"),
    ("relative/repo.git", "is a relative path, which means nothing where the agent runs"),
    ("-uhelp", "starts with '-', which git would read as an option"),
    ("ftp://example.com/r.git", "has the scheme 'ftp'; one of https, http, ssh, git"),
    ("file://relative", "is not a file URL of an absolute path; write file:///path/to/repo.git"),
    ("https:///r.git", "names no host"),
    ("https://example.com/a b.git", "holds whitespace or control characters"),
]


async def test_a_repository_git_would_not_take_as_it_is_is_refused_at_open(client: AsyncDaemon) -> None:
    for repository, sentence in REFUSED:
        with pytest.raises(InvalidParams, match="placement: repository") as refused:
            await open_with(client, placement_settings={"repository": repository})
        assert sentence in str(refused.value), repository
    assert (await client.sessions()) == []
    for accepted in ("https://example.com/r.git", "git@example.com:me/r.git", "ssh://h/r", "/srv/r.git"):
        info = await open_with(client, placement_settings={"repository": accepted})
        assert info.root == accepted


async def test_a_repository_goes_with_a_worktree_and_no_root(client: AsyncDaemon, tmp_path: Path) -> None:
    url = f"file://{bare_repository(tmp_path)}"
    with pytest.raises(InvalidParams, match="root: a session with a repository works in a clone of"):
        await open_with(client, root=str(tmp_path), placement_settings={"repository": url})
    with pytest.raises(InvalidParams, match="repository is a setting of placement worktree"):
        await open_with(client, placement="here", placement_settings={"repository": url})
    with pytest.raises(InvalidParams, match="checkoutDir 'here' is neither absolute nor under ~"):
        await open_with(client, placement_settings={"repository": url, "checkout_dir": "here"})
    info = await open_with(client, placement_settings={"repository": url})
    assert (info.placement, info.root) == ("worktree", url)  # a repository asked for is a worktree of it


async def test_a_session_works_in_a_worktree_of_its_repository_made_where_the_agent_runs(
    client: AsyncDaemon, tmp_path: Path
) -> None:
    remote = bare_repository(tmp_path)
    url = f"file://{remote}"
    checkouts = tmp_path / "checkouts"
    info = await open_with(client, placement_settings={"repository": url, "checkout_dir": str(checkouts)})
    session = await client.session(info.id)
    reply = await session.asend("write notes.txt from the worktree\nread notes.txt\nrun git status --short")
    assert "notes.txt has 1 line. First line: from the worktree" in reply.text
    assert "?? notes.txt" in reply.text  # the command ran in the worktree
    where = (await session.aget()).where
    assert where is not None
    assert where.repository == url
    assert where.branch is not None
    assert where.branch.startswith("sessiond/")
    assert where.worktree is not None
    worktree = Path(where.worktree)
    assert worktree.parent.parent.parent == checkouts
    assert where.root == where.worktree
    assert (worktree / "notes.txt").read_text() == "from the worktree"
    assert (worktree / "README").read_text() == "hello\n"
    changes = (await session.aget()).changes
    assert changes is not None
    assert [(f.path, f.kind) for f in changes.files] == [("notes.txt", "added")]
    assert changes.others is None  # its working copy is its own
    outside = await session.asend(f"write {tmp_path / 'escape.txt'} out")
    assert "is outside the session's root" in outside.text
    assert not (tmp_path / "escape.txt").exists()
    # Closed with its work unmerged: the work is pushed as the session's branch, the worktree goes.
    await session.aclose()
    closed = await client.session(info.id)
    assert closed.info.last_error is not None
    assert f"its work is kept as branch {where.branch} of {url}" in closed.info.last_error
    assert not worktree.exists()
    assert git(remote, "show", f"{where.branch}:notes.txt") == "from the worktree"


async def test_a_repository_the_agent_cannot_reach_fails_the_turn_saying_so(
    client: AsyncDaemon, tmp_path: Path
) -> None:
    later = tmp_path / "later"
    missing = later / "remote.git"
    info = await open_with(
        client, placement_settings={"repository": f"file://{missing}", "checkout_dir": str(tmp_path / "c")}
    )
    session = await client.session(info.id)
    with pytest.raises(PlacementFailed) as failed:
        await session.asend("say hello")
    assert f"cannot fetch the repository file://{missing} on this machine:" in str(failed.value)
    assert "check its URL, and that this machine can reach it" in str(failed.value)
    assert list((tmp_path / "c").glob("*.git")) == []  # no empty clone left behind
    later.mkdir()
    bare_repository(later)  # there now: the session stays usable
    assert (await session.asend("say hello")).text == "hello"


async def test_a_repository_session_merges_back_by_pushing_its_branch(
    client: AsyncDaemon, tmp_path: Path
) -> None:
    remote = bare_repository(tmp_path)
    settings = {"repository": f"file://{remote}", "checkout_dir": str(tmp_path / "checkouts")}
    first = await client.session((await open_with(client, placement_settings=settings)).id)
    second = await client.session((await open_with(client, placement_settings=settings)).id)
    await first.asend("write feature.txt new work\nwrite README from the first")
    await second.asend("write README from the second")
    made = await where_of(first)
    assert made.worktree is not None
    entry = await merged(client, first.id, gate="test -f feature.txt")  # the gate runs on the result
    assert entry.status == "merged", entry.reason
    assert entry.kept is False
    assert git(remote, "show", "main:feature.txt") == "new work"
    assert git(remote, "log", "-1", "--format=%s", "main").startswith(f"Merge session {first.id}")
    assert git(remote, "branch", "--list", "sessiond/*") == ""  # its branch went from the repository
    assert not Path(made.worktree).exists()  # and its worktree where it was made
    assert (await where_of(first)).worktree is None
    # Its next turn works in a new worktree, from the base as it is now.
    assert "feature.txt has 1 line" in (await first.asend("read feature.txt")).text
    # The second conflicts on README: nothing lands, and the session is told how to bring the base in.
    head = git(remote, "rev-parse", "main")
    async with client.events(sessions=[second.id], kinds=["turn.queued"]) as queued:
        failed = await merged(client, second.id, hand_back=True)
        handed = await anext(queued)
    assert failed.status == "failed"
    assert failed.conflicts == ["README"]
    assert git(remote, "rev-parse", "main") == head
    assert "git fetch origin && git merge origin/main" in handed.data["prompt"]
    kept = await merged(client, first.id, keep=True)  # its second worktree, nothing new in it
    assert kept.status == "merged"
    assert kept.kept is True
    kept_at = (await where_of(first)).worktree
    assert kept_at is not None
    assert Path(kept_at).is_dir()


async def test_a_repository_sessions_threads_work_in_worktrees_of_the_same_repository(
    client: AsyncDaemon, tmp_path: Path
) -> None:
    remote = bare_repository(tmp_path)
    settings = {"repository": f"file://{remote}", "checkout_dir": str(tmp_path / "checkouts")}
    coordinator = await client.session((await open_with(client, placement_settings=settings)).id)
    reply = await coordinator.asend("thread write helper.txt from the thread\nwait 60")
    (thread,) = [s for s in await client.sessions() if s.info.kind == "thread"]
    assert thread.info.root == f"file://{remote}"
    assert thread.info.placement == "worktree"
    made = await where_of(thread)
    assert made.worktree is not None
    assert made.worktree != (await where_of(coordinator)).worktree  # a worktree of its own
    assert (Path(made.worktree) / "helper.txt").read_text() == "from the thread"
    assert thread.id in reply.text
    with pytest.raises(Conflict, match="a side chat of it is not built"):
        await coordinator.aside("what did the thread do?")
