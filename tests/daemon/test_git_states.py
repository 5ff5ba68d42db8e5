"""A root in git is recorded at a session's first turn as a git tree of its working copy: sessions of
one root starting (or counting their changes) at once share git's answers, each begun after they
asked (200 first turns on a repository took 8.5x those on a plain folder when each wrote its own
tree).

Real git, on repositories made here; `changes._git` counted, not replaced.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from sessiond.daemon import changes
from sessiond.daemon.changes import ChangeTracker


def _repository(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "first"],
        cwd=root,
        check=True,
    )
    return root


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The git commands the daemon's change tracking runs from now on (run for real), by name."""
    names: list[str] = []
    real = changes._git

    async def counted(cwd: str, *args: str, env: dict[str, str] | None = None) -> str:
        names.append(args[0])
        return await real(cwd, *args, env=env)

    monkeypatch.setattr(changes, "_git", counted)
    return names


async def test_sessions_of_one_root_starting_at_once_share_git_and_see_the_tree_of_now(
    tmp_path: Path, asked: list[str]
) -> None:
    repo = _repository(tmp_path / "repo")
    (repo / "src" / "new.py").write_text("untracked, there before they start\n")
    trackers = await asyncio.gather(*(ChangeTracker.start(str(repo / "src")) for _ in range(50)))
    assert {t.top for t in trackers} == {str(repo)}
    assert len({t.base for t in trackers}) == 1  # one state for all: the working copy's, then
    # One question of where the root is in git; at most two trees written (the second shared by
    # those who asked while the first was written).
    assert asked.count("rev-parse") == 1
    assert 1 <= asked.count("write-tree") <= 2
    tracker = trackers[0]
    listed = await changes._git(str(repo), "ls-tree", "-r", "--name-only", str(tracker.base))
    assert listed.split() == ["src/a.py", "src/new.py"]

    # Later, each asks afresh: a change made since is in the next state, and the sessions counting
    # their changes at once ask git what two trees differ by once for all of them.
    (repo / "src" / "a.py").write_text("a = 2\n")
    counted_now = await asyncio.gather(*(t.changes() for t in trackers))
    for changed in counted_now:
        assert [(f.path, f.kind, f.added, f.removed) for f in changed.files] == [("a.py", "modified", 1, 1)]
    assert asked.count("diff-tree") == 2  # (its files' kinds, and their lines)
    assert asked.count("rev-parse") == 1  # (where the root is in git is known)
    counted_now[0].files.clear()  # what one session does with its list is its own
    assert len((await tracker.changes()).files) == 1


async def test_a_root_outside_git_is_asked_once_too(tmp_path: Path, asked: list[str]) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hello\n")
    trackers = await asyncio.gather(*(ChangeTracker.start(str(tmp_path / "plain")) for _ in range(20)))
    assert all(t.top is None and t.base == "snapshot" for t in trackers)
    assert trackers[0].snapshot == {"notes.txt": "hello\n"}
    assert asked == ["rev-parse"]


async def test_a_root_made_a_repository_later_is_found_in_git_by_the_next_sessions(
    tmp_path: Path, asked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a root is in git is remembered; a root outside git is looked at again (for a `.git`,
    without a git process) at most every RECHECK_OUTSIDE seconds, and git asked again once it has
    one: the sessions starting after `git init` record git trees."""
    root = tmp_path / "later"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    before = await ChangeTracker.start(str(root / "src"))
    assert before.top is None
    monkeypatch.setattr(changes, "RECHECK_OUTSIDE", 3600.0)
    for _ in range(20):  # within the period: neither looked at nor asked again
        assert (await ChangeTracker.start(str(root / "src"))).top is None
    assert asked.count("rev-parse") == 1

    monkeypatch.setattr(changes, "RECHECK_OUTSIDE", 0.0)
    for _ in range(5):  # no `.git` yet: looked at, git not asked
        assert (await ChangeTracker.start(str(root / "src"))).top is None
    assert asked.count("rev-parse") == 1
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q"], cwd=root, check=True)
    after = await asyncio.gather(*(ChangeTracker.start(str(root / "src")) for _ in range(10)))
    assert {t.top for t in after} == {str(root)}
    assert asked.count("rev-parse") == 2  # asked again once, for all of them


async def test_a_root_whose_repository_is_removed_is_found_outside_git_by_the_next_sessions(
    tmp_path: Path, asked: list[str]
) -> None:
    """The reverse: a root remembered in git whose `.git` is gone since. The next sessions' trees
    cannot be written; they record snapshots instead (git asked again once for all of them), rather
    than tracking nothing until the daemon restarts."""
    repo = _repository(tmp_path / "gone")
    assert (await ChangeTracker.start(str(repo / "src"))).top == str(repo)
    assert asked.count("rev-parse") == 1
    await asyncio.to_thread(shutil.rmtree, repo / ".git")
    after = await asyncio.gather(*(ChangeTracker.start(str(repo / "src")) for _ in range(10)))
    assert all(t.top is None and t.base == "snapshot" for t in after)
    assert after[0].snapshot == {"a.py": "a = 1\n"}
    assert asked.count("rev-parse") == 2  # asked again once, for all of them
    (repo / "src" / "a.py").write_text("a = 2\n")
    changed = await after[0].changes()
    assert [(f.path, f.kind) for f in changed.files] == [("a.py", "modified")]


async def test_a_repository_git_cannot_read_is_still_said(tmp_path: Path, asked: list[str]) -> None:
    """Only a root with no `.git` left is taken for outside git: one whose repository git fails on
    (here its objects are gone) still fails its session's start, as before, and is not snapshotted."""
    repo = _repository(tmp_path / "broken")
    assert (await ChangeTracker.start(str(repo))).top == str(repo)
    await asyncio.to_thread(shutil.rmtree, repo / ".git" / "objects")
    with pytest.raises(changes.GitFailed):
        await ChangeTracker.start(str(repo))
    assert asked.count("rev-parse") == 1
