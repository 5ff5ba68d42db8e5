"""`worktree`: a git worktree apiece, on a branch named after the session.

Where the worktrees live: `<repository's .git>/sessiond-worktrees/<session id>`.
Inside .git because git never tracks it (no stray folder in `git status`),
tools that walk the project (ripgrep, editors' watchers, `git clean -x`) skip
it, it needs no write access beside the project, and it goes away with the
repository. A sibling folder would litter the user's parent directory.

What the session branched from is kept in the branch's own git config
(`branch.<name>.sessiondBase`, `...sessiondBaseCommit`), so a restarted
daemon, the merge queue and close() all know it, and `git branch -D`
removes it with the branch.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from sessiond.daemon.placements.base import PlacementError, PlacementOptions
from sessiond.daemon.placements.gitcmd import Repo, find_repo, git, has_branch, run_git
from sessiond.daemon.placements.local import LocalPlacement

BRANCH_PREFIX = "sessiond/"
FOLDER = "sessiond-worktrees"


async def validate(root: str, options: PlacementOptions) -> Repo:
    """At session open: the root must be in a git working copy (one git call, then remembered)."""
    return await find_repo(root)


def worktree_dir(repo: Repo, session_id: str) -> str:
    return os.path.join(repo.common_dir, FOLDER, session_id)


@dataclass(frozen=True)
class Base:
    branch: str | None  # the local branch work merges back into; None when branched from a detached HEAD
    commit: str  # the commit the session's branch started from


async def _base_of(repo: Repo, start: str, base: str | None) -> Base:
    ref = base or "HEAD"
    found = await run_git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=start)
    if not found.ok:
        if base is None:
            raise PlacementError(
                f"the repository at {repo.toplevel} has no commits yet; commit something first "
                "(a worktree starts from a commit)"
            )
        raise PlacementError(f"base {base!r} is not a commit in the repository at {repo.toplevel}")
    if base is None:
        # Work goes back to the branch the user's working copy is on.
        branch = await run_git("symbolic-ref", "--quiet", "--short", "HEAD", cwd=start)
        return Base(branch.out.strip() if branch.ok else None, found.out.strip())
    return Base(base if await has_branch(base, start) else None, found.out.strip())


class WorktreePlacement(LocalPlacement):
    kind = "worktree"

    def __init__(self, *, root: str, session_id: str, options: PlacementOptions) -> None:
        super().__init__(root=root, session_id=session_id, options=options)
        self.session_root = root
        self.branch = BRANCH_PREFIX + session_id
        self.repo: Repo | None = None
        self.base: Base | None = None
        self.worktree: str | None = None

    def describe(self) -> str:
        if self.worktree is None:
            return f"worktree of {self.session_root} (made on the first turn)"
        return f"worktree {self.worktree}, branch {self.branch}"

    async def prepare(self) -> None:
        if self.worktree is not None and os.path.isdir(self.worktree):
            return
        repo = await find_repo(self.session_root)
        await self._check_branch_name(repo)
        path = worktree_dir(repo, self.session_id)
        # git writes the repository's config and worktree list under a lock file:
        # sessions of one repository setting up at once take turns.
        async with _repo_lock(repo.common_dir):
            if not await self._registered(repo, path):
                await self._add(repo, path)
            self.base = await self._recorded_base(repo)
        self.repo = repo
        self.worktree = path
        self.root = os.path.join(path, repo.prefix) if repo.prefix else path
        # The session's subfolder may hold only untracked files, so the checkout lacks it.
        os.makedirs(self.root, exist_ok=True)

    async def _check_branch_name(self, repo: Repo) -> None:
        checked = await run_git("check-ref-format", "--branch", self.branch, cwd=repo.toplevel)
        if not checked.ok:
            raise PlacementError(f"session id {self.session_id!r} cannot name a git branch ({self.branch})")

    async def _registered(self, repo: Repo, path: str) -> bool:
        listing = await git("worktree", "list", "--porcelain", cwd=repo.toplevel)
        paths = {line[len("worktree ") :] for line in listing.splitlines() if line.startswith("worktree ")}
        return path in paths and os.path.isdir(path)

    async def _add(self, repo: Repo, path: str) -> None:
        # A folder left by a failed or interrupted attempt is forgotten first, so a retry can add it.
        await run_git("worktree", "prune", cwd=repo.toplevel)
        exists = await has_branch(self.branch, repo.toplevel)
        if exists:
            # The session's branch outlived its worktree (kept, then the folder was deleted): reuse it.
            added = await run_git("worktree", "add", path, self.branch, cwd=repo.toplevel)
        else:
            base = await _base_of(repo, self.session_root, self.options.base)
            added = await run_git("worktree", "add", "-b", self.branch, path, base.commit, cwd=repo.toplevel)
            if added.ok:
                config = f"branch.{self.branch}"
                await git("config", f"{config}.sessiondBaseCommit", base.commit, cwd=repo.toplevel)
                if base.branch is not None:
                    await git("config", f"{config}.sessiondBase", base.branch, cwd=repo.toplevel)
        if not added.ok:
            raise PlacementError(f"cannot make a worktree at {path}: {added.reason()}")

    async def _recorded_base(self, repo: Repo) -> Base:
        config = f"branch.{self.branch}"
        branch = await run_git("config", "--get", f"{config}.sessiondBase", cwd=repo.toplevel)
        commit = await run_git("config", "--get", f"{config}.sessiondBaseCommit", cwd=repo.toplevel)
        if commit.ok:
            return Base(branch.out.strip() if branch.ok else None, commit.out.strip())
        # A branch made by hand: take where it forks from the base it would merge into.
        return await _base_of(repo, repo.toplevel, self.options.base)

    # ------------------------------------------------------------ closing

    async def close(self) -> str | None:
        await self.terminals.close()
        try:
            repo = self.repo or await find_repo(self.session_root)
        except PlacementError:
            return None  # the repository is gone: there is nothing of ours to remove
        path = worktree_dir(repo, self.session_id)
        branch_exists = await has_branch(self.branch, repo.toplevel)
        if not os.path.isdir(path) and not branch_exists:
            return None  # never made, or merged and cleaned up already
        kept = await self.unmerged(repo, path)
        if kept:
            remove = f"git worktree remove --force {path} && git branch -D {self.branch}"
            return (
                f"worktree kept at {path} (branch {self.branch}): {kept}. "
                f"Merge it back through the merge queue, or remove it with `{remove}`"
            )
        return await remove_worktree(repo.common_dir, path, self.branch)

    async def unmerged(self, repo: Repo, path: str) -> str | None:
        """Why the worktree must be kept (commits not in its base, uncommitted changes), or None."""
        reasons = []
        base = await self._recorded_base(repo)
        target = base.branch if base.branch is not None else base.commit
        ahead = await run_git("rev-list", "--count", f"{target}..{self.branch}", cwd=repo.toplevel)
        if ahead.ok and int(ahead.out.strip() or 0) > 0:
            count = int(ahead.out.strip())
            reasons.append(f"{count} commit{'s' if count != 1 else ''} not merged into {target}")
        elif not ahead.ok:
            reasons.append(f"cannot tell whether it is merged into {target} ({ahead.reason()})")
        if os.path.isdir(path):
            status = await run_git("status", "--porcelain", cwd=path)
            changed = [line for line in status.out.splitlines() if line.strip()]
            if changed:
                reasons.append(
                    f"uncommitted changes in {len(changed)} file{'s' if len(changed) != 1 else ''}"
                )
        return "; ".join(reasons) or None


async def remove_worktree(git_dir: str, path: str, branch: str) -> str | None:
    """Remove a clean worktree and its branch; a sentence if git refused (then it is kept).

    Run from the repository's git directory, which outlives every worktree of it.
    """
    if os.path.isdir(path):
        removed = await run_git("worktree", "remove", path, cwd=git_dir)
        if not removed.ok:
            return f"worktree kept at {path}: git could not remove it ({removed.reason()})"
    await run_git("worktree", "prune", cwd=git_dir)
    deleted = await run_git("branch", "-D", branch, cwd=git_dir)
    if not deleted.ok and "not found" not in deleted.err:
        return f"branch {branch} kept: git could not delete it ({deleted.reason()})"
    return None


_REPO_LOCKS: dict[str, asyncio.Lock] = {}


def _repo_lock(common_dir: str) -> asyncio.Lock:
    return _REPO_LOCKS.setdefault(common_dir, asyncio.Lock())
