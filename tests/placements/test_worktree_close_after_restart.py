"""A worktree session closed after a restart, before its next turn: its worktree is one the daemon
before made (a stop keeps them), removed as any other when nothing in it is unmerged. Through the
CLI against a real daemon, restarted, with the demo agent and real git."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import AgentError, connect
from tests.client.worktrees import repository, session_with_work

SESSIOND = [sys.executable, "-m", "sessiond.client"]


def sessiond(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SESSIOND, *args], env=daemon.env, capture_output=True, text=True, timeout=60)


def worktrees(repo: Path) -> list[str]:
    listing = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    return [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]


def branches(repo: Path) -> list[str]:
    listing = subprocess.run(
        ["git", "branch", "--format=%(refname:short)"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    return listing.split()


def closes_kept(daemon: Daemon) -> dict[str, object]:
    said = sessiond(daemon, "trace")  # (JSON lines)
    assert said.returncode == 0, said.stderr
    events = [json.loads(line) for line in said.stdout.splitlines() if line.strip()]
    return {e["session"]: e["data"].get("kept") for e in events if e["kind"] == "session.closed"}


def test_a_clean_worktree_made_before_a_restart_goes_with_its_close(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    daemon = Daemon().start()
    try:
        with connect(daemon.socket, start=False) as client:
            clean = client.agent("demo").session(repo, placement="worktree")
            clean.send("say nothing to keep")
            where = clean.get().where
            assert where is not None
            assert where.worktree is not None
            clean_tree = where.worktree
            busy, busy_tree = session_with_work(client, repo, "work not merged")
            failed = client.agent("demo").session(tmp_path, title="a failed turn")
            with pytest.raises(AgentError, match="boom"):
                failed.send("fail boom")
        assert sorted(worktrees(repo)) == sorted([str(repo), clean_tree, busy_tree])
        daemon.stop()
        daemon.start()  # the worktrees outlive the stop; the sessions load back unplaced

        for session in (clean.id, busy.id, failed.id):
            closed = sessiond(daemon, "close", session)
            assert closed.returncode == 0, closed.stderr
        assert worktrees(repo) == [str(repo), busy_tree]  # the clean one went, with its branch
        assert not Path(clean_tree).exists()
        assert branches(repo) == ["main", f"sessiond/{Path(busy_tree).name}"]
        assert (Path(busy_tree) / "notes.txt").read_text() == "work not merged"

        kept = closes_kept(daemon)
        assert kept[clean.id] is None
        assert str(kept[busy.id]).startswith(f"worktree kept at {busy_tree} (branch ")
        assert kept[failed.id] is None  # its last turn's error is not something its close kept

        pruned = sessiond(daemon, "prune", "0m", "--yes")
        assert pruned.returncode == 0, pruned.stderr
        said_kept = pruned.stdout.split("what their closes kept stays where it is:\n", 1)[1]
        assert said_kept.splitlines()[0].startswith(f"  worktree kept at {busy_tree} (branch ")
        assert "boom" not in pruned.stdout
    finally:
        daemon.stop()
        shutil.rmtree(daemon.home, ignore_errors=True)
