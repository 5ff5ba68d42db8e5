"""`worktree`: a git worktree apiece on branch sessiond/<session>, kept at close only if it holds work."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from placement_helpers import git

from sessiond.daemon.placements import (
    PathOutsideRoot,
    PlacementError,
    PlacementOptions,
    make_placement,
    validate_placement,
)
from sessiond.daemon.placements.worktree import WorktreePlacement

pytestmark = pytest.mark.timeout(30)


def worktree(root: Path, session: str = "s1", **options: str) -> WorktreePlacement:
    placement = make_placement(
        "worktree", root=str(root), session_id=session, options=PlacementOptions(**options)
    )
    assert isinstance(placement, WorktreePlacement)
    return placement


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").split()


async def test_a_root_outside_git_is_refused_at_open(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(PlacementError, match=f"root {plain} is not in a git repository; use placement here"):
        await validate_placement("worktree", root=str(plain), options=PlacementOptions())
    with pytest.raises(PlacementError, match="not in a git repository"):
        await worktree(plain).prepare()


async def test_prepare_makes_a_worktree_in_the_repository_on_the_session_branch(repo: Path) -> None:
    await validate_placement("worktree", root=str(repo), options=PlacementOptions())
    placement = worktree(repo)
    await placement.prepare()
    expected = repo / ".git" / "sessiond-worktrees" / "s1"
    assert placement.root == str(expected)
    assert placement.worktree == str(expected)
    assert git(expected, "symbolic-ref", "--short", "HEAD") == "sessiond/s1"
    assert git(expected, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")
    assert placement.base is not None
    assert placement.base.branch == "main"
    # Work lands in the worktree, not in the user's working copy.
    await placement.write_text("src/app.py", "print('two')\n")
    assert (expected / "src" / "app.py").read_text() == "print('two')\n"
    assert (repo / "src" / "app.py").read_text() == "print('one')\n"
    assert git(repo, "status", "--porcelain") == ""
    tid = await placement.create_terminal("git", ["rev-parse", "--abbrev-ref", "HEAD"], {}, None, None)
    await placement.wait_for_terminal_exit(tid)
    assert (await placement.terminal_output(tid))[0].strip() == "sessiond/s1"
    # Preparing again is cheap and changes nothing.
    await placement.prepare()
    assert placement.root == str(expected)
    await placement.close()


async def test_a_session_rooted_in_a_subfolder_stays_in_that_subfolder(repo: Path) -> None:
    (repo / "src" / "untracked-only").mkdir()
    for sub, expected in (("src", "src"), ("src/untracked-only", "src/untracked-only")):
        placement = worktree(repo / sub, session=f"sub-{len(sub)}")
        await placement.prepare()
        assert placement.worktree is not None
        assert placement.root == os.path.join(placement.worktree, expected)
        assert os.path.isdir(placement.root)
        if sub == "src":
            assert await placement.read_text("app.py") == "print('one')\n"
        await placement.close()


async def test_paths_outside_the_worktree_are_refused_including_the_users_working_copy(repo: Path) -> None:
    placement = worktree(repo)
    await placement.prepare()
    for path in (str(repo / "README"), "../../../README", "/etc/passwd"):
        with pytest.raises(PathOutsideRoot):
            await placement.write_text(path, "x")
    assert (repo / "README").read_text() == "hello\n"
    await placement.close()


async def test_close_removes_a_worktree_with_nothing_unmerged(repo: Path) -> None:
    placement = worktree(repo)
    await placement.prepare()
    assert await placement.close() is None
    assert not (repo / ".git" / "sessiond-worktrees" / "s1").exists()
    assert branches(repo) == ["main"]
    # The base recorded in the branch's config went with the branch.
    assert "sessiond" not in (repo / ".git" / "config").read_text()


async def test_close_keeps_uncommitted_changes_and_says_why(repo: Path) -> None:
    placement = worktree(repo)
    await placement.prepare()
    await placement.write_text("src/app.py", "print('changed')\n")
    await placement.write_text("new.txt", "new\n")
    kept = await placement.close()
    assert kept is not None
    assert "worktree kept at" in kept
    assert "uncommitted changes in 2 files" in kept
    assert (repo / ".git" / "sessiond-worktrees" / "s1" / "new.txt").exists()
    assert "sessiond/s1" in branches(repo)


async def test_close_keeps_commits_not_in_the_base(repo: Path) -> None:
    placement = worktree(repo)
    await placement.prepare()
    await placement.write_text("new.txt", "new\n")
    path = placement.root
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "work")
    kept = await placement.close()
    assert kept is not None
    assert "1 commit not merged into main" in kept
    assert "uncommitted" not in kept
    # Once the commit is in main, closing (again, as after a restart) removes both.
    git(repo, "merge", "-q", "--ff-only", "sessiond/s1")
    again = worktree(repo)
    assert await again.close() is None
    assert branches(repo) == ["main"]
    assert not os.path.exists(path)


async def test_a_restarted_daemon_finds_the_same_worktree(repo: Path) -> None:
    first = worktree(repo)
    await first.prepare()
    await first.write_text("notes.txt", "kept across a restart\n")
    second = worktree(repo)  # a new daemon: the placement is made again from the session's settings
    await second.prepare()
    assert second.root == first.root
    assert await second.read_text("notes.txt") == "kept across a restart\n"
    assert second.base is not None
    assert second.base.branch == "main"
    assert (await second.close() or "").startswith("worktree kept")


async def test_a_base_ref_is_where_the_branch_starts(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    (repo / "later.txt").write_text("later\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "later")
    git(repo, "branch", "old", first)
    placement = worktree(repo, base="old")
    await placement.prepare()
    assert placement.worktree is not None
    assert git(placement.worktree, "rev-parse", "HEAD") == first
    assert placement.base is not None
    assert placement.base.branch == "old"
    await placement.close()


async def test_set_up_failures_are_clear_and_a_retry_works(repo: Path, tmp_path: Path) -> None:
    bad = worktree(repo, base="no-such-ref")
    with pytest.raises(PlacementError, match="base 'no-such-ref' is not a commit"):
        await bad.prepare()
    assert branches(repo) == ["main"]
    git(repo, "branch", "no-such-ref")
    await bad.prepare()
    assert bad.worktree is not None
    assert os.path.isdir(bad.worktree)
    await bad.close()

    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    placement = worktree(empty)
    with pytest.raises(PlacementError, match="has no commits yet"):
        await placement.prepare()
    git(empty, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "first")
    await placement.prepare()
    assert await placement.close() is None


async def test_a_worktree_folder_deleted_by_hand_is_made_again(repo: Path) -> None:
    placement = worktree(repo)
    await placement.prepare()
    await placement.write_text("a.txt", "a")
    git(placement.root, "add", "-A")
    git(placement.root, "commit", "-q", "-m", "a")
    shutil.rmtree(placement.root)
    again = worktree(repo)
    await again.prepare()  # the branch is reused, so its commit is there
    assert await again.read_text("a.txt") == "a"
    assert "1 commit not merged" in (await again.close() or "")


async def test_stop_kills_terminals_and_keeps_the_worktree(repo: Path) -> None:
    placement = worktree(repo)
    await placement.prepare()
    await placement.write_text("a.txt", "work in progress")
    tid = await placement.create_terminal("sleep", ["60"], {}, None, None)
    terminal = placement.terminal(tid)
    await placement.stop()
    assert (terminal.exited.is_set(), terminal.signal) == (True, "SIGKILL")
    with pytest.raises(PlacementError, match="no terminal"):
        await placement.terminal_output(tid)
    assert (Path(placement.root) / "a.txt").exists()
    await placement.prepare()  # the next turn carries on where it was
    assert await placement.read_text("a.txt") == "work in progress"
