"""The merge queue: one branch at a time, a gate, and nothing touched when it fails."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from placement_helpers import git

from sessiond.daemon.placements import PlacementError, PlacementOptions, make_placement
from sessiond.daemon.placements.merge_queue import (
    MergeEntry,
    MergeQueues,
    MergeRequest,
    Strategy,
    request_for,
)
from sessiond.daemon.placements.worktree import WorktreePlacement
from sessiond.protocol.models import MergeEntry as MergeEntryInfo

pytestmark = pytest.mark.timeout(30)


class Steps:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []
        self._events: dict[tuple[str, str], asyncio.Event] = {}

    def __call__(self, session: str, step: str, data: dict[str, Any]) -> None:
        self.seen.append((session, step, data))
        self._event(session, step).set()

    def _event(self, session: str, step: str) -> asyncio.Event:
        return self._events.setdefault((session, step), asyncio.Event())

    async def reached(self, session: str, step: str) -> None:
        await asyncio.wait_for(self._event(session, step).wait(), 10)

    def of(self, session: str) -> list[str]:
        return [step for s, step, _ in self.seen if s == session]


async def session_worktree(repo: Path, session: str, files: dict[str, str]) -> WorktreePlacement:
    placement = make_placement("worktree", root=str(repo), session_id=session, options=PlacementOptions())
    assert isinstance(placement, WorktreePlacement)
    await placement.prepare()
    for path, content in files.items():
        await placement.write_text(path, content)
    return placement


def request(placement: WorktreePlacement, strategy: Strategy = "merge", **more: Any) -> MergeRequest:
    assert placement.worktree is not None
    return MergeRequest(
        session_id=placement.session_id,
        worktree=placement.worktree,
        branch=placement.branch,
        base_branch="main",
        strategy=strategy,
        **more,
    )


async def test_a_request_is_made_from_a_worktree_placement(repo: Path) -> None:
    fresh = make_placement("worktree", root=str(repo / "src"), session_id="s9", options=PlacementOptions())
    assert isinstance(fresh, WorktreePlacement)
    with pytest.raises(PlacementError, match="no worktree yet"):
        request_for(fresh)
    await fresh.prepare()
    made = request_for(fresh, strategy="rebase", gate="true")
    assert made == MergeRequest("s9", str(fresh.worktree), "sessiond/s9", "main", "rebase", "true")
    assert request_for(fresh, base_branch="release").base_branch == "release"
    git(repo, "switch", "-q", "--detach")
    detached = await session_worktree(repo, "s10", {})
    with pytest.raises(PlacementError, match="detached HEAD"):
        request_for(detached)


def commit_on_main(repo: Path, path: str, content: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(content)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", f"main changes {path}")
    return git(repo, "rev-parse", "HEAD")


def state(repo: Path) -> tuple[str, str, str, str]:
    """What must not change when a merge fails: main, HEAD, the working copy's status and diff."""
    return (
        git(repo, "rev-parse", "main"),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        git(repo, "diff", "HEAD"),
    )


async def merge(queues: MergeQueues, req: MergeRequest) -> MergeEntry:
    entry = await queues.submit(req)
    return await asyncio.wait_for(entry.wait(), 20)


@pytest.mark.parametrize("strategy", ["merge", "rebase"])
async def test_a_session_is_merged_into_main_and_cleaned_up(repo: Path, strategy: Strategy) -> None:
    steps = Steps()
    queues = MergeQueues(steps)
    s1 = await session_worktree(repo, "s1", {"README": "hello from s1\n", "feature.txt": "new\n"})
    before = commit_on_main(repo, "main-only.txt", "main moved on\n")  # the base moved meanwhile
    entry = await merge(queues, request(s1, strategy))
    assert entry.status == "merged", entry.reason
    main = git(repo, "rev-parse", "main")
    assert entry.commit == main
    parents = git(repo, "log", "-1", "--format=%P", "main").split()
    if strategy == "merge":
        assert parents[0] == before
        assert len(parents) == 2
    else:
        assert parents == [before]
    # The user's working copy (on main) has the merged files, and nothing else is changed.
    assert (repo / "README").read_text() == "hello from s1\n"
    assert (repo / "feature.txt").read_text() == "new\n"
    assert (repo / "main-only.txt").exists()
    assert git(repo, "status", "--porcelain") == ""
    assert not os.path.exists(str(s1.worktree))
    assert git(repo, "branch", "--format=%(refname:short)") == "main"
    assert steps.of("s1") == ["queued", "started", "committed", "integrated", "landed", "cleaned", "merged"]
    assert entry.kept is False
    assert await s1.close() is None  # merged and cleaned already: nothing left to keep


@pytest.mark.parametrize("strategy", ["merge", "rebase"])
async def test_a_conflict_changes_nothing_and_names_the_files(repo: Path, strategy: Strategy) -> None:
    steps = Steps()
    queues = MergeQueues(steps)
    s1 = await session_worktree(repo, "s1", {"src/app.py": "print('s1')\n", "other.txt": "fine\n"})
    commit_on_main(repo, "src/app.py", "print('main')\n")
    (repo / "README").write_text("the user's own edit, not committed\n")
    (repo / "scratch.txt").write_text("untracked\n")
    before = state(repo)
    entry = await merge(queues, request(s1, strategy))
    assert entry.status == "failed"
    assert entry.conflicts == ["src/app.py"]
    assert "conflicts with main in src/app.py" in (entry.reason or "")
    assert state(repo) == before
    assert (repo / "README").read_text() == "the user's own edit, not committed\n"
    # The session's worktree is on its branch, its work committed, no merge or rebase left open.
    assert s1.worktree is not None
    assert git(s1.worktree, "symbolic-ref", "--short", "HEAD") == "sessiond/s1"
    assert git(s1.worktree, "status", "--porcelain") == ""
    assert (Path(s1.worktree) / "src" / "app.py").read_text() == "print('s1')\n"
    assert git(s1.worktree, "log", "-1", "--format=%s") == "sessiond: work of session s1"
    assert "conflict" in steps.of("s1")
    assert steps.of("s1")[-1] == "failed"
    prompt = entry.handback_prompt()
    assert prompt is not None
    assert "src/app.py" in prompt
    assert "git merge main" in prompt
    assert (await s1.close() or "").startswith("worktree kept")


async def test_a_failing_gate_changes_nothing_and_reports_its_output(repo: Path) -> None:
    queues = MergeQueues()
    s1 = await session_worktree(repo, "s1", {"feature.txt": "new\n"})
    (repo / "README").write_text("user edit\n")
    before = state(repo)
    gate = "echo building; touch gate-artifact; echo 'test_x FAILED' >&2; exit 2"
    entry = await merge(queues, request(s1, gate=gate))
    assert entry.status == "failed"
    assert entry.gate_output is not None
    assert "test_x FAILED" in entry.gate_output
    assert "the gate" in (entry.reason or "")
    assert "exit code 2" in (entry.reason or "")
    assert state(repo) == before
    assert s1.worktree is not None
    wt = Path(s1.worktree)
    # Back on the session's own commit: not the merge result, and nothing the gate left behind.
    assert git(wt, "rev-parse", "HEAD") == git(wt, "rev-parse", "sessiond/s1")
    assert len(git(wt, "log", "--format=%P", "-1").split()) == 1
    assert not (wt / "gate-artifact").exists()
    assert git(wt, "status", "--porcelain") == ""
    prompt = entry.handback_prompt()
    assert prompt is not None
    assert "test_x FAILED" in prompt
    await s1.close()


async def test_the_gate_runs_on_the_merged_result_in_the_worktree(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queues = MergeQueues()
    s1 = await session_worktree(repo, "s1", {"feature.txt": "new\n"})
    commit_on_main(repo, "from-main.txt", "x\n")
    gate = 'test -f from-main.txt && test -f feature.txt && pwd > "$RECORD"'
    record = repo.parent / "gate-cwd"
    monkeypatch.setenv("RECORD", str(record))
    entry = await merge(queues, request(s1, gate=gate))
    assert entry.status == "merged", entry.reason
    assert record.read_text().strip() == s1.worktree


async def test_merges_run_strictly_one_at_a_time_in_order(repo: Path) -> None:
    steps = Steps()
    queues = MergeQueues(steps)
    sessions = [await session_worktree(repo, f"s{i}", {f"file{i}.txt": f"{i}\n"}) for i in (1, 2, 3)]
    entries = [await queues.submit(request(s, gate="sleep 0.2")) for s in sessions]
    queue = queues.queues()[0]
    positions = [queue.position(f"s{i}") for i in (1, 2, 3)]
    assert [row["session"] for row in queues.listing()] == ["s1", "s2", "s3"]
    assert None not in positions
    assert positions == sorted(positions)
    done = await asyncio.wait_for(asyncio.gather(*(e.wait() for e in entries)), 20)
    assert [e.status for e in done] == ["merged"] * 3
    order = [(s, step) for s, step, _ in steps.seen if step in ("started", "merged")]
    assert order == [("s1", "started"), ("s1", "merged"), ("s2", "started"), ("s2", "merged"),
                     ("s3", "started"), ("s3", "merged")]  # fmt: skip
    assert all((repo / f"file{i}.txt").exists() for i in (1, 2, 3))
    assert queue.entries() == []
    assert [e.session_id for e in queue.history] == ["s1", "s2", "s3"]


async def test_keep_leaves_the_worktree_on_the_merged_commit(repo: Path) -> None:
    queues = MergeQueues()
    s1 = await session_worktree(repo, "s1", {"feature.txt": "new\n"})
    entry = await merge(queues, request(s1, keep=True))
    assert entry.status == "merged"
    assert entry.summary()["kept"] is True
    assert s1.worktree is not None
    assert os.path.isdir(s1.worktree)
    assert git(s1.worktree, "rev-parse", "HEAD") == git(repo, "rev-parse", "main")
    assert await s1.close() is None  # all of it is in main now, so close removes it


async def test_every_way_a_merge_leaves_its_worktree_reads_on_the_wire(repo: Path) -> None:
    # Kept as asked (True), removed (False), or kept for a reason the merge gives (a sentence):
    # `merge/list` must read each (a sentence once broke it for every client).
    queues = MergeQueues()
    s1 = await session_worktree(repo, "s1", {"feature.txt": "new\n"})
    summary = (await merge(queues, request(s1))).summary()
    for kept in (True, False, "worktree kept at /x: uncommitted changes in 1 file"):
        info = MergeEntryInfo.model_validate({**summary, "session": "s1", "kept": kept})
        assert info.kept == kept


async def test_a_base_checked_out_nowhere_is_moved_without_touching_any_working_copy(repo: Path) -> None:
    queues = MergeQueues()
    s1 = await session_worktree(repo, "s1", {"feature.txt": "new\n"})
    git(repo, "switch", "-q", "-c", "elsewhere")
    before = git(repo, "status", "--porcelain")
    entry = await merge(queues, request(s1))
    assert entry.status == "merged", entry.reason
    assert git(repo, "show", "main:feature.txt") == "new"
    assert not (repo / "feature.txt").exists()
    assert git(repo, "status", "--porcelain") == before


async def test_the_users_uncommitted_edit_in_the_way_stops_the_landing_and_changes_nothing(
    repo: Path,
) -> None:
    queues = MergeQueues()
    s1 = await session_worktree(repo, "s1", {"README": "from s1\n"})
    (repo / "README").write_text("the user is editing this\n")
    before = state(repo)
    entry = await merge(queues, request(s1))
    assert entry.status == "failed"
    assert "could not move main in the working copy" in (entry.reason or "")
    assert state(repo) == before
    assert (repo / "README").read_text() == "the user is editing this\n"


async def test_nothing_to_merge_is_a_merge_that_changes_nothing(repo: Path) -> None:
    steps = Steps()
    queues = MergeQueues(steps)
    s1 = await session_worktree(repo, "s1", {})
    main = git(repo, "rev-parse", "main")
    entry = await merge(queues, request(s1))
    assert (entry.status, entry.commit) == ("merged", main)
    assert "nothing-to-merge" in steps.of("s1")
    assert not os.path.exists(str(s1.worktree))


async def test_a_session_is_queued_once_and_a_waiting_entry_can_be_taken_out(repo: Path) -> None:
    queues = MergeQueues()
    s1 = await session_worktree(repo, "s1", {"a.txt": "a"})
    s2 = await session_worktree(repo, "s2", {"b.txt": "b"})
    first = await queues.submit(request(s1, gate="sleep 0.3"))
    with pytest.raises(PlacementError, match="already in the merge queue"):
        await queues.submit(request(s1))
    second = await queues.submit(request(s2))
    assert queues.cancel("s2")
    assert not queues.cancel("s2")
    assert (await second.wait()).status == "cancelled"
    assert (await first.wait()).status == "merged"
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main", "sessiond/s2"]
    await queues.close()


async def test_a_gate_that_runs_too_long_is_killed_and_fails_the_merge(repo: Path) -> None:
    queues = MergeQueues()
    s1 = await session_worktree(repo, "s1", {"a.txt": "a"})
    before = state(repo)
    entry = await merge(queues, request(s1, gate="echo started; sleep 30", gate_timeout=0.5))
    assert entry.status == "failed"
    assert "did not finish within" in (entry.reason or "")
    assert entry.gate_output == "started\n"
    assert state(repo) == before


async def test_closing_the_queue_mid_merge_puts_the_worktree_back(repo: Path) -> None:
    steps = Steps()
    queues = MergeQueues(steps)
    s1 = await session_worktree(repo, "s1", {"a.txt": "a"})
    commit_on_main(repo, "m.txt", "m")
    before = state(repo)
    entry = await queues.submit(request(s1, gate="sleep 30"))
    await steps.reached("s1", "gate-started")
    assert s1.worktree is not None
    assert len(git(s1.worktree, "log", "-1", "--format=%P").split()) == 2  # on the merge result now
    await asyncio.wait_for(queues.close(), 10)
    assert (await entry.wait()).status == "cancelled"
    assert state(repo) == before
    assert git(s1.worktree, "rev-parse", "HEAD") == git(s1.worktree, "rev-parse", "sessiond/s1")
    assert len(git(s1.worktree, "log", "-1", "--format=%P").split()) == 1
