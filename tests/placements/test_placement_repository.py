"""A worktree of a repository the session names (placement `worktree` with `repository`), made
where the agent runs: here, for the demo agent run locally (tests/ray runs it on a Ray node whose
filesystem the daemon's machine does not share). A real daemon, real git, a bare repository
reached by a file:// URL."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from placement_helpers import git

from bench.harness import Daemon
from sessiond.client import AsyncDaemon, InvalidParams, aconnect
from sessiond.protocol.models import SessionInfo, SessionOpenResult


@pytest.fixture
async def client() -> AsyncIterator[AsyncDaemon]:
    daemon = Daemon().start()
    try:
        async with aconnect(daemon.socket, start=False) as connected:
            yield connected
    finally:
        assert daemon.stop() == 0
        shutil.rmtree(daemon.home, ignore_errors=True)


def bare_repository(folder: Path) -> Path:
    """A bare repository on `main` with one commit (README), as a server would hold it."""
    remote = folder / "remote.git"
    git(folder, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = folder / "seed"
    git(folder, "clone", "-q", str(remote), str(seed))
    git(seed, "config", "user.name", "Tester")
    git(seed, "config", "user.email", "tester@example.invalid")
    (seed / "README").write_text("hello\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "initial")
    git(seed, "push", "-q", "origin", "main")
    shutil.rmtree(seed)
    return remote


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
