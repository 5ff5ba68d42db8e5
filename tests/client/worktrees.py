"""A worktree session with work in it, for the tests of what its close keeps."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sessiond.client import Daemon, Session


def repository(path: Path) -> Path:
    """A git repository with one empty commit on main."""
    path.mkdir()
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *identity, *argv], cwd=path, check=True, capture_output=True)
    return path


def session_with_work(client: Daemon, repo: Path, note: str) -> tuple[Session, str]:
    """A demo session in a worktree of `repo` that wrote `note` to notes.txt (uncommitted, so its
    close keeps the worktree); the session and its worktree's path."""
    session = client.agent("demo").session(repo, placement="worktree")
    session.send(f"write notes.txt {note}")
    where = session.get().where
    assert where is not None
    assert where.worktree is not None
    return session, where.worktree
