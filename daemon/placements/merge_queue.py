"""Merging worktree sessions back into their base branch, one at a time per repository.

A session whose worktree was made elsewhere from a repository (placement `worktree` with
`repository`) pushes its branch there; the merge is then done in the daemon's own clone of that
repository, as below, and lands by pushing the base branch to it (`MergeRequest.remote`).

One entry at a time, in the order submitted:

1. Uncommitted work in the session's worktree is committed (agents edit files;
   they rarely commit).
2. The branch is integrated with the base's current tip, in the session's
   worktree, never in the user's working copy: `merge` computes the merge with
   `git merge-tree` (nothing is touched if it conflicts) and fast-forwards the
   session's branch to the merge commit (first parent: the base); `rebase`
   rebases the branch onto the base (`rebase --abort` on a conflict).
3. The gate, if any, runs in the worktree on that integrated result: what is
   tested is exactly what will land.
4. The base branch is fast-forwarded to the result: with `merge --ff-only` in
   the working copy that has it checked out (git refuses, changing nothing, if
   the user's uncommitted edits are in the way), else by a compare-and-swap
   `update-ref`.
5. The worktree and branch are removed, unless the entry says keep.

A conflict, a failing gate or a refused landing puts the session's branch
back where it was and leaves the base branch and the user's working copy
untouched; the entry fails with the conflicting files or the gate's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sessiond.daemon.placements import checkout
from sessiond.daemon.placements.base import PlacementError
from sessiond.daemon.placements.gitcmd import find_repo, git, has_branch, run_git
from sessiond.daemon.placements.repository import LOCAL, RepositoryPlacement
from sessiond.daemon.placements.worktree import WorktreePlacement, remove_worktree
from sessiond.daemon.terminals import Terminals

Strategy = Literal["merge", "rebase"]
Status = Literal["queued", "running", "merged", "failed", "cancelled"]
OnStep = Callable[[str, str, dict[str, Any]], None]

GATE_OUTPUT_LIMIT = 64 * 1024
GATE_TAIL_CHARS = 4000
HISTORY = 200


@dataclass(frozen=True)
class MergeRequest:
    session_id: str
    worktree: str  # the session's worktree (its top directory)
    branch: str  # the session's branch, checked out in the worktree
    base_branch: str  # the local branch the work goes into
    strategy: Strategy = "merge"
    gate: str | None = None  # a shell command run in the worktree; exit 0 lets the merge land
    gate_timeout: float = 1800.0
    keep: bool = False  # keep the worktree and branch after the merge (the session goes on there)
    message: str | None = None  # the merge commit's message
    # The remote of the worktree's repository the work goes back to, by push (a session's worktree
    # made elsewhere from a repository, merged here in a clone of it): the base is fetched from it
    # first, the result pushed to it, and this worktree is only the place where the merge is done.
    remote: str | None = None
    # Then, once landed: the session's own worktree (elsewhere) follows; why something of it was kept.
    follow: Callable[[MergeEntry], Awaitable[str | None]] | None = field(default=None, compare=False)

    @property
    def base_ref(self) -> str:
        """How the session's own git names the base: the remote's branch when it is a remote's."""
        return f"{self.remote}/{self.base_branch}" if self.remote else self.base_branch


@dataclass
class MergeEntry:
    request: MergeRequest
    status: Status = "queued"
    reason: str | None = None  # why it failed, in a sentence
    conflicts: list[str] = field(default_factory=list)
    gate_output: str | None = None  # the tail of the gate's output, when it failed
    commit: str | None = None  # the base branch's new tip
    # After a merge: True when kept as asked, False when removed, or why they could not be removed.
    kept: bool | str | None = None
    done: asyncio.Future[MergeEntry] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def session_id(self) -> str:
        return self.request.session_id

    async def wait(self) -> MergeEntry:
        return await asyncio.shield(self.done)

    def summary(self) -> dict[str, Any]:
        """The entry as plain values (for the queue's listing and for events)."""
        r = self.request
        return {
            "session": r.session_id,
            "branch": r.branch,
            "base": r.base_branch,
            "strategy": r.strategy,
            "gate": r.gate,
            "status": self.status,
            "reason": self.reason,
            "conflicts": list(self.conflicts),
            "gateOutput": self.gate_output,
            "commit": self.commit,
            "kept": self.kept,
        }

    def handback_prompt(self) -> str | None:
        """A prompt that hands a failed merge back to the owning session, or None."""
        if self.status != "failed":
            return None
        r = self.request
        if self.conflicts:
            files = "\n".join(f"- {f}" for f in self.conflicts)
            bring = (
                f"git fetch {r.remote} && git merge {r.base_ref}" if r.remote else f"git merge {r.base_ref}"
            )
            return (
                f"Merging your branch {r.branch} into {r.base_branch} stopped on conflicts in:\n{files}\n"
                f"Bring {r.base_branch} into your branch ({bring}), resolve these files, "
                "commit, and ask for the merge again."
            )
        if self.gate_output is not None:
            return (
                f"Merging your branch {r.branch} into {r.base_branch} was stopped by the gate "
                f"`{r.gate}`, which failed on the merged result. Its output ends with:\n"
                f"```\n{self.gate_output}\n```\nFix it on your branch and ask for the merge again."
            )
        return f"Merging your branch {r.branch} into {r.base_branch} failed: {self.reason}"


def request_for(
    placement: WorktreePlacement,
    *,
    strategy: Strategy = "merge",
    gate: str | None = None,
    keep: bool = False,
    base_branch: str | None = None,
) -> MergeRequest:
    """The merge request of a worktree session (after its first turn made the worktree).

    The work goes back to the branch it was made from, unless `base_branch` says otherwise.
    """
    if placement.worktree is None or placement.base is None:
        raise PlacementError("the session has no worktree yet: it is made on the session's first turn")
    target = base_branch or placement.base.branch
    if target is None:
        raise PlacementError("the session was branched from a detached HEAD; name the branch to merge into")
    return MergeRequest(
        session_id=placement.session_id,
        worktree=placement.worktree,
        branch=placement.branch,
        base_branch=target,
        strategy=strategy,
        gate=gate,
        keep=keep,
    )


async def request_for_repository(
    placement: RepositoryPlacement,
    clones: str,
    *,
    strategy: Strategy = "merge",
    gate: str | None = None,
    keep: bool = False,
    base_branch: str | None = None,
) -> MergeRequest:
    """The merge request of a session whose worktree was made elsewhere from a repository: what
    is pending there is committed and its branch pushed to the repository, then fetched into the
    daemon's own clone of it (under `clones`), where the merge is done and from which it lands."""
    _, made = placement.at()
    target = base_branch or made.base_branch
    if target is None:
        raise PlacementError(
            f"session {placement.session_id} was branched from a commit of {placement.repository}, not a "
            "branch; name the branch to merge into"
        )
    pushed = await placement.push()
    worktree = await LOCAL.call(
        checkout.merge_worktree,
        placement.repository,
        clones,
        placement.session_id,
        pushed,
        "on the daemon's machine",
    )

    async def follow(entry: MergeEntry) -> str | None:
        try:
            if not keep:
                await placement.merged()
            elif entry.commit is not None and not await placement.follow(pushed, entry.commit):
                return f"the session's worktree {made.worktree} changed meanwhile: it stays as it was"
        except PlacementError as exc:
            return str(exc)
        return None

    return MergeRequest(
        session_id=placement.session_id,
        worktree=worktree,
        branch=placement.branch,
        base_branch=target,
        strategy=strategy,
        gate=gate,
        keep=keep,
        remote="origin",
        follow=follow,
    )


class _Failed(Exception):
    def __init__(self, reason: str, **details: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details


class MergeQueue:
    """The queue of one repository; one worker task while it has entries, none when idle."""

    def __init__(self, repo: str, on_step: OnStep | None = None) -> None:
        self.repo = repo
        self._on_step = on_step
        self._queue: deque[MergeEntry] = deque()
        self.running: MergeEntry | None = None
        self.history: deque[MergeEntry] = deque(maxlen=HISTORY)
        self._worker: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ the queue

    def submit(self, request: MergeRequest) -> MergeEntry:
        if request.strategy not in ("merge", "rebase"):
            raise PlacementError(f"merge strategy {request.strategy!r} is not merge or rebase")
        position = self.position(request.session_id)
        if position is not None:
            raise PlacementError(
                f"session {request.session_id} is already in the merge queue (position {position})"
            )
        entry = MergeEntry(request)
        self._queue.append(entry)
        self._step(entry, "queued", position=self.position(request.session_id))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work(), name=f"merge-queue {self.repo}")
        return entry

    def entries(self) -> list[MergeEntry]:
        """The one merging now, then those waiting, in order."""
        return ([self.running] if self.running else []) + list(self._queue)

    def position(self, session_id: str) -> int | None:
        """0 while merging, 1.. while waiting, None when not in the queue."""
        for index, entry in enumerate(self.entries()):
            if entry.session_id == session_id:
                return index if self.running else index + 1
        return None

    def cancel(self, session_id: str) -> bool:
        """Take a waiting entry out of the queue (one already merging runs to its end)."""
        for entry in self._queue:
            if entry.session_id == session_id:
                self._queue.remove(entry)
                self._finish(entry, "cancelled", "taken out of the merge queue before its turn")
                return True
        return False

    async def close(self) -> None:
        """Stop: waiting entries are cancelled; the one merging is put back as it was."""
        while self._queue:
            entry = self._queue.popleft()
            self._finish(entry, "cancelled", "the merge queue stopped before its turn")
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)

    async def _work(self) -> None:
        while self._queue:
            entry = self._queue.popleft()
            self.running = entry
            try:
                await self._merge(entry)
            except asyncio.CancelledError:
                self._finish(entry, "cancelled", "the merge queue stopped while it was merging")
                raise
            except Exception as exc:  # a bug or an unexpected git state must not stop the queue
                self._finish(entry, "failed", f"unexpected error while merging: {exc}")
            finally:
                self.running = None

    def _step(self, entry: MergeEntry, step: str, **data: Any) -> None:
        if self._on_step is not None:
            self._on_step(entry.session_id, step, {"branch": entry.request.branch, **data})

    def _finish(self, entry: MergeEntry, status: Status, reason: str | None = None) -> None:
        entry.status = status
        entry.reason = reason
        self.history.append(entry)
        if status == "failed":
            self._step(
                entry, "failed", reason=reason, conflicts=entry.conflicts, gateOutput=entry.gate_output
            )
        elif status == "cancelled":
            self._step(entry, "cancelled", reason=reason)
        if not entry.done.done():
            entry.done.set_result(entry)

    # ------------------------------------------------------------ one merge

    async def _merge(self, entry: MergeEntry) -> None:
        r = entry.request
        entry.status = "running"
        self._step(entry, "started", base=r.base_branch, strategy=r.strategy, gate=r.gate)
        wt = r.worktree
        original: str | None = None
        try:
            ident = await _identity(wt)
            if r.remote is not None:
                await _fetch_base(r)
            await self._check(r)
            await self._commit_pending(entry, ident)
            original = await git("rev-parse", "HEAD", cwd=wt)
            base_tip = await git("rev-parse", f"refs/heads/{r.base_branch}", cwd=wt)
            if await _is_ancestor(original, base_tip, wt):
                entry.commit = base_tip
                self._step(entry, "nothing-to-merge", base=r.base_branch, commit=base_tip)
            else:
                result = await self._integrate(entry, ident, original, base_tip)
                await self._gate(entry)
                await self._land(entry, base_tip, result)
                entry.commit = result
                self._step(entry, "landed", base=r.base_branch, commit=result)
        except _Failed as failed:
            if original is not None:
                await _restore(wt, original)
            entry.conflicts = failed.details.get("conflicts", [])
            entry.gate_output = failed.details.get("gate_output")
            self._finish(entry, "failed", failed.reason)
            return
        except PlacementError as exc:  # git failed, or is gone
            if original is not None:
                await _restore(wt, original)
            self._finish(entry, "failed", str(exc))
            return
        except asyncio.CancelledError:
            if original is not None:
                await asyncio.shield(_restore(wt, original))
            raise
        if r.remote is not None:
            entry.kept = await self._hand_back_branch(entry)
        elif r.keep:
            entry.kept = True
        else:
            # From the repository itself: the worktree's own folder is going away.
            repo = await find_repo(wt)
            why_kept = await remove_worktree(repo.common_dir, wt, r.branch)
            entry.kept = why_kept if why_kept is not None else False
            self._step(entry, "cleaned" if why_kept is None else "kept", reason=why_kept)
        entry.status = "merged"
        self._step(entry, "merged", base=r.base_branch, commit=entry.commit)
        self._finish(entry, "merged")

    async def _hand_back_branch(self, entry: MergeEntry) -> bool | str:
        """A remote's merge is landed: the session's branch there follows the result (keep) or goes,
        and so does the session's worktree wherever it is; the worktree here, only where the merge
        was done, goes either way. True or False as kept or removed, or why something was kept."""
        r = entry.request
        assert r.remote is not None
        why_kept: str | None = None
        if r.keep:
            branch = f"{r.branch}:refs/heads/{r.branch}"
            moved = await run_git("push", "--quiet", "--force", r.remote, branch, cwd=r.worktree)
            if not moved.ok:
                why_kept = f"branch {r.branch} was not moved to the result there ({moved.reason()})"
        else:
            await run_git("push", "--quiet", r.remote, "--delete", r.branch, cwd=r.worktree)
        await asyncio.to_thread(checkout.remove, r.worktree, r.branch)
        if why_kept is None and r.follow is not None:
            why_kept = await r.follow(entry)
        self._step(entry, "cleaned" if why_kept is None else "kept", reason=why_kept)
        return why_kept if why_kept is not None else r.keep

    async def _check(self, r: MergeRequest) -> None:
        if not os.path.isdir(r.worktree):
            raise _Failed(f"the session's worktree {r.worktree} does not exist")
        head = await run_git("symbolic-ref", "--quiet", "--short", "HEAD", cwd=r.worktree)
        if head.out.strip() != r.branch:
            raise _Failed(f"the worktree {r.worktree} is not on branch {r.branch}")
        if not await has_branch(r.base_branch, r.worktree):
            raise _Failed(f"base branch {r.base_branch} does not exist")
        for marker in ("rebase-merge", "rebase-apply", "MERGE_HEAD"):
            path = await git("rev-parse", "--path-format=absolute", "--git-path", marker, cwd=r.worktree)
            if os.path.exists(path):
                raise _Failed(f"a merge or rebase is in progress in {r.worktree}; finish or abort it first")

    async def _commit_pending(self, entry: MergeEntry, ident: list[str]) -> None:
        wt = entry.request.worktree
        status = await git("status", "--porcelain", cwd=wt)
        if not status:
            return
        await git("add", "-A", cwd=wt)
        message = f"sessiond: work of session {entry.session_id}"
        await git(*ident, "commit", "--quiet", "--no-verify", "-m", message, cwd=wt)
        commit = await git("rev-parse", "HEAD", cwd=wt)
        self._step(entry, "committed", commit=commit, files=len(status.splitlines()))

    async def _integrate(self, entry: MergeEntry, ident: list[str], original: str, base_tip: str) -> str:
        r = entry.request
        wt = r.worktree
        if r.strategy == "rebase":
            if not await _is_ancestor(base_tip, original, wt):
                rebased = await run_git(*ident, "rebase", "--quiet", base_tip, cwd=wt)
                if not rebased.ok:
                    unmerged = await run_git("diff", "--name-only", "--diff-filter=U", cwd=wt)
                    conflicts = unmerged.out.splitlines()
                    await run_git("rebase", "--abort", cwd=wt)
                    self._step(entry, "conflict", files=conflicts, base=r.base_branch)
                    raise _Failed(_conflict_reason(r, conflicts, rebased.reason()), conflicts=conflicts)
            result = await git("rev-parse", "HEAD", cwd=wt)
        else:
            merged = await run_git(
                "merge-tree", "--write-tree", "--name-only", "--no-messages", base_tip, original, cwd=wt
            )
            lines = merged.out.split("\n")
            if merged.code == 1:
                conflicts = [line for line in lines[1:] if line]
                self._step(entry, "conflict", files=conflicts, base=r.base_branch)
                raise _Failed(_conflict_reason(r, conflicts, ""), conflicts=conflicts)
            if not merged.ok:
                raise _Failed(f"git merge-tree failed: {merged.reason()}")
            message = r.message or f"Merge session {r.session_id} ({r.branch}) into {r.base_branch}"
            result = await git(
                *ident, "commit-tree", lines[0].strip(), "-p", base_tip, "-p", original, "-m", message, cwd=wt
            )
            # The worktree moves to the merge result, so the gate tests what will land.
            await git("merge", "--quiet", "--ff-only", result, cwd=wt)
        self._step(entry, "integrated", commit=result, strategy=r.strategy)
        return result

    async def _gate(self, entry: MergeEntry) -> None:
        r = entry.request
        if not r.gate:
            return
        self._step(entry, "gate-started", command=r.gate)
        # The gate is a command with bounded output, killed with its group on timeout: a terminal.
        terminals = Terminals()
        terminal_id = await terminals.create("sh", ["-c", r.gate], {}, r.worktree, GATE_OUTPUT_LIMIT)
        timed_out = False
        try:
            terminal = await asyncio.wait_for(terminals.wait(terminal_id), r.gate_timeout)
        except TimeoutError:
            timed_out = True
            await terminals.kill(terminal_id)
            terminal = terminals.get(terminal_id)
        finally:
            output = terminals.get(terminal_id).text()[-GATE_TAIL_CHARS:]
            await terminals.close()
        if timed_out or terminal.exit_code != 0:
            ended = f"exit code {terminal.exit_code}" if terminal.signal is None else terminal.signal
            how = f"did not finish within {r.gate_timeout:.0f} s" if timed_out else f"failed ({ended})"
            self._step(entry, "gate-failed", command=r.gate, exitCode=terminal.exit_code, output=output)
            raise _Failed(f"the gate `{r.gate}` {how} on the merged result", gate_output=output)
        self._step(entry, "gate-passed", command=r.gate)

    async def _land(self, entry: MergeEntry, base_tip: str, result: str) -> None:
        r = entry.request
        if r.remote is not None:
            # The repository itself refuses what is not a fast-forward of its base as it is now.
            pushed = await run_git(
                "push", "--quiet", r.remote, f"{result}:refs/heads/{r.base_branch}", cwd=r.worktree
            )
            if not pushed.ok:
                url = await _url_of(r)
                raise _Failed(
                    f"could not push the result to {r.base_branch} of {url} ({pushed.reason()}); it moved "
                    f"while merging, or refuses pushes: submit the merge again once it lets you"
                )
            await run_git("update-ref", f"refs/heads/{r.base_branch}", result, cwd=r.worktree)
            return
        checked_out = await _worktree_of(r.base_branch, r.worktree)
        if checked_out is not None:
            # Updates the user's files too; refuses (changing nothing) if their edits are in the way
            # or if the base moved on since the merge was computed.
            landed = await run_git("merge", "--quiet", "--ff-only", result, cwd=checked_out)
            if not landed.ok:
                raise _Failed(
                    f"could not move {r.base_branch} in the working copy {checked_out}: {landed.reason()}; "
                    "nothing was changed there"
                )
            return
        ref, note = f"refs/heads/{r.base_branch}", f"sessiond: merge {r.branch}"
        moved = await run_git("update-ref", "-m", note, ref, result, base_tip, cwd=r.worktree)
        if not moved.ok:
            raise _Failed(f"{r.base_branch} moved while merging ({moved.reason()}); submit the merge again")


class MergeQueues:
    """A merge queue per repository (worktrees of one repository share its queue)."""

    def __init__(self, on_step: OnStep | None = None) -> None:
        self._on_step = on_step
        self._queues: dict[str, MergeQueue] = {}

    async def submit(self, request: MergeRequest) -> MergeEntry:
        repo = await find_repo(request.worktree)
        queue = self._queues.get(repo.common_dir)
        if queue is None:
            queue = self._queues[repo.common_dir] = MergeQueue(repo.common_dir, self._on_step)
        return queue.submit(request)

    def queues(self) -> list[MergeQueue]:
        return list(self._queues.values())

    def listing(self) -> list[dict[str, Any]]:
        """Every entry merging or waiting, with its repository and position (0: merging now)."""
        rows = []
        for queue in self._queues.values():
            for entry in queue.entries():
                rows.append(
                    {**entry.summary(), "repo": queue.repo, "position": queue.position(entry.session_id)}
                )
        return rows

    def find(self, session_id: str) -> tuple[MergeQueue, MergeEntry] | None:
        for queue in self._queues.values():
            for entry in queue.entries():
                if entry.session_id == session_id:
                    return queue, entry
        return None

    def cancel(self, session_id: str) -> bool:
        return any(queue.cancel(session_id) for queue in self._queues.values())

    async def close(self) -> None:
        await asyncio.gather(*(queue.close() for queue in self._queues.values()))


def _conflict_reason(r: MergeRequest, conflicts: list[str], detail: str) -> str:
    files = ", ".join(conflicts) if conflicts else detail or "unknown files"
    return f"{r.branch} conflicts with {r.base_branch} in {files}"


async def _fetch_base(r: MergeRequest) -> None:
    """A remote's base as it is there now (the merge is computed against it, and landed on it)."""
    assert r.remote is not None
    ref = f"refs/heads/{r.base_branch}"
    fetched = await run_git("fetch", "--quiet", r.remote, f"+{ref}:{ref}", cwd=r.worktree)
    if not fetched.ok:
        raise _Failed(f"could not fetch {r.base_branch} from {await _url_of(r)}: {fetched.reason()}")


async def _url_of(r: MergeRequest) -> str:
    """The repository a remote names, for a sentence."""
    assert r.remote is not None
    url = await run_git("remote", "get-url", r.remote, cwd=r.worktree)
    return url.out.strip() if url.ok else r.remote


async def _is_ancestor(commit: str, of: str, cwd: str) -> bool:
    return (await run_git("merge-base", "--is-ancestor", commit, of, cwd=cwd)).ok


async def _identity(cwd: str) -> list[str]:
    """`-c` settings naming sessiond as committer, only when the user has no identity configured."""
    if (await run_git("var", "GIT_COMMITTER_IDENT", cwd=cwd)).ok:
        return []
    return ["-c", "user.name=sessiond", "-c", "user.email=sessiond@localhost"]


async def _worktree_of(branch: str, cwd: str) -> str | None:
    """The working copy that has `branch` checked out, if any."""
    listing = await git("worktree", "list", "--porcelain", cwd=cwd)
    path = None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            path = line[len("worktree ") :]
        elif line == f"branch refs/heads/{branch}":
            return path
    return None


async def _restore(wt: str, original: str) -> None:
    """Put the session's worktree back on its commit, as it was before the merge started."""
    with contextlib.suppress(PlacementError):
        for marker in ("rebase-merge", "rebase-apply"):
            path = await git("rev-parse", "--path-format=absolute", "--git-path", marker, cwd=wt)
            if os.path.exists(path):
                await run_git("rebase", "--abort", cwd=wt)
        await run_git("reset", "--quiet", "--hard", original, cwd=wt)
        # Files the gate made: the worktree had no untracked files before (they were committed).
        await run_git("clean", "-fdq", cwd=wt)
