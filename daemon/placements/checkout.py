"""A repository's worktree where the agent runs: plain, blocking functions run on that machine
(in a Ray task on the agent's node, or in a thread of the daemon for an agent run here), on its
files and with its git. They answer plain data; a failure is a PlacementError whose sentence says
what happened to what, and what to do.

The layout under the checkout folder (`checkoutDir`, default ~/.cache/sessiond/checkouts there):

    <name>-<hash>.git/                                   a bare clone, fetched as worktrees are made
    <name>-<hash>.git/sessiond-worktrees/<session id>    a session's worktree, branch sessiond/<id>
    <name>-<hash>.lock                                   held while the clone or its worktrees change

The repository's branches are kept as `refs/remotes/origin/*`; a session's branch is a local
branch, pushed to the repository when it is merged, when its work must outlive the worktree
(the session closes unmerged, or moves to another machine), and fetched back from there when a
worktree is made again elsewhere. What the session started from is kept in the branch's config
(`branch.<name>.sessiondBase`, `...sessiondBaseCommit`), as the local worktree placement does.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

from sessiond.daemon import confine
from sessiond.daemon.changes import ChangeTracker
from sessiond.daemon.placements.base import PathOutsideRoot, PlacementError
from sessiond.daemon.placements.gitcmd import GitResult, run_git_blocking
from sessiond.daemon.placements.local import read_local, write_local

DEFAULT_DIR = "~/.cache/sessiond/checkouts"
BRANCH_PREFIX = "sessiond/"
WORKTREES = "sessiond-worktrees"
IDENTITY = ["-c", "user.name=sessiond", "-c", "user.email=sessiond@localhost"]


def clone_name(repository: str) -> str:
    """The clone's folder name: readable (the repository's last part) and unique (a hash of it)."""
    last = re.sub(r"\.git$", "", repository.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", last).strip("-.")[:40] or "repository"
    return f"{readable}-{hashlib.sha256(repository.encode()).hexdigest()[:12]}.git"


def worktree_path(checkout_dir: str | None, repository: str, session_id: str) -> str:
    folder = os.path.expanduser(checkout_dir or DEFAULT_DIR)
    return os.path.join(folder, clone_name(repository), WORKTREES, session_id)


def _git(*args: str, cwd: str) -> GitResult:
    return run_git_blocking(*args, cwd=cwd)


def _must(result: GitResult, what: str) -> str:
    if not result.ok:
        raise PlacementError(f"{what}: {result.reason()}")
    return result.out.strip()


def _lock_of(clone: str) -> str:
    return clone.removesuffix(".git") + ".lock"


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """One process at a time changes a clone (sessions starting at once on one machine)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _identity(cwd: str) -> list[str]:
    """Names sessiond as committer only where the machine's git has no identity of its own."""
    return [] if _git("var", "GIT_COMMITTER_IDENT", cwd=cwd).ok else IDENTITY


def _fetch(clone: str, repository: str, where: str) -> None:
    fetched = _git("fetch", "--quiet", "--prune", "origin", "+refs/heads/*:refs/remotes/origin/*", cwd=clone)
    if not fetched.ok:
        raise PlacementError(
            f"cannot fetch the repository {repository} {where}: {fetched.reason()}; check its URL, and "
            f"that {where.removeprefix('on ')} can reach it (its network, its keys or credentials)"
        )


def _open_clone(folder: str, repository: str, where: str) -> str:
    """The machine's clone of `repository`, made if new, fetched now (under the lock)."""
    clone = os.path.join(folder, clone_name(repository))
    fresh = not os.path.isdir(clone)
    if fresh:
        _must(
            _git("init", "--quiet", "--bare", clone, cwd=folder), f"cannot make a clone in {folder} {where}"
        )
        _must(_git("remote", "add", "origin", repository, cwd=clone), f"cannot name {repository} in {clone}")
    try:
        _fetch(clone, repository, where)
    except PlacementError:
        if fresh:
            shutil.rmtree(clone, ignore_errors=True)  # a clone of nothing helps nobody
        raise
    return clone


def _remote_branches(clone: str) -> list[str]:
    listed = _git("for-each-ref", "--format=%(refname:strip=3)", "refs/remotes/origin/", cwd=clone)
    return [name for name in listed.out.split() if name != "HEAD"]


def _start_of(clone: str, repository: str, base: str | None, where: str) -> tuple[str | None, str]:
    """(the branch work merges back into, or None; the commit the session's branch starts at)."""
    if base is None:
        head = _git("ls-remote", "--symref", "origin", "HEAD", cwd=clone)
        found = re.search(r"^ref: refs/heads/(\S+)\s+HEAD$", head.out, re.MULTILINE)
        branches = _remote_branches(clone)
        if found is None or found[1] not in branches:
            if not branches:
                raise PlacementError(
                    f"the repository {repository} has no branches yet; push a first commit to it "
                    f"(a worktree starts from a commit)"
                )
            raise PlacementError(
                f"the repository {repository} names no default branch {where}; name the base to start "
                f"from (placementSettings.base: one of {', '.join(branches[:10])})"
            )
        base = found[1]
    remote = f"refs/remotes/origin/{base}"
    commit = _git("rev-parse", "--verify", "--quiet", f"{remote}^{{commit}}", cwd=clone)
    if commit.ok:
        return base, commit.out.strip()
    commit = _git("rev-parse", "--verify", "--quiet", f"{base}^{{commit}}", cwd=clone)
    if commit.ok and not base.startswith("-"):
        return None, commit.out.strip()
    named = ", ".join(_remote_branches(clone)[:10]) or "none"
    raise PlacementError(
        f"base {base!r} is neither a branch nor a commit of {repository} (its branches: {named})"
    )


def _registered(clone: str, path: str) -> bool:
    listing = _git("worktree", "list", "--porcelain", cwd=clone).out
    paths = {line[len("worktree ") :] for line in listing.splitlines() if line.startswith("worktree ")}
    return path in paths and os.path.isdir(path)


def _recorded(clone: str, branch: str) -> tuple[str | None, str | None]:
    config = f"branch.{branch}"
    base = _git("config", "--get", f"{config}.sessiondBase", cwd=clone)
    commit = _git("config", "--get", f"{config}.sessiondBaseCommit", cwd=clone)
    return (base.out.strip() or None if base.ok else None), (commit.out.strip() if commit.ok else None)


def _record(clone: str, branch: str, start: tuple[str | None, str]) -> None:
    base_branch, commit = start
    _git("config", f"branch.{branch}.sessiondBaseCommit", commit, cwd=clone)
    if base_branch is not None:
        _git("config", f"branch.{branch}.sessiondBase", base_branch, cwd=clone)


def check_out(
    repository: str,
    checkout_dir: str | None,
    session_id: str,
    base: str | None,
    started: tuple[str | None, str] | None,
    where: str,
) -> dict[str, Any]:
    """The session's worktree of `repository` on this machine, made if it is not here: from the
    session's own branch (here, or pushed to the repository from elsewhere), else from `started`
    (the base branch and commit it began from elsewhere), else from `base`. `where` names this
    machine in sentences ("on Ray node …")."""
    folder = os.path.expanduser(checkout_dir or DEFAULT_DIR)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise PlacementError(f"cannot make the checkout folder {folder} {where}: {exc.strerror}") from None
    branch = BRANCH_PREFIX + session_id
    if not _git("check-ref-format", "--branch", branch, cwd=folder).ok:
        raise PlacementError(f"session id {session_id!r} cannot name a git branch ({branch})")
    with _locked(_lock_of(os.path.join(folder, clone_name(repository)))):
        clone = _open_clone(folder, repository, where)
        path = os.path.join(clone, WORKTREES, session_id)
        made = "kept"
        if not _registered(clone, path):
            _git("worktree", "prune", cwd=clone)
            pushed = f"refs/remotes/origin/{branch}"
            if _git("show-ref", "--verify", "--quiet", f"refs/heads/{branch}", cwd=clone).ok:
                added, made = _git("worktree", "add", path, branch, cwd=clone), "branch"
            elif _git("show-ref", "--verify", "--quiet", pushed, cwd=clone).ok:
                added, made = _git("worktree", "add", "-b", branch, path, pushed, cwd=clone), "pushed"
            else:
                start = started or _start_of(clone, repository, base, where)
                added, made = _git("worktree", "add", "-b", branch, path, start[1], cwd=clone), "base"
                if added.ok:
                    _record(clone, branch, start)
            _must(added, f"cannot make a worktree of {repository} at {path} {where}")
        base_branch, recorded = _recorded(clone, branch)
        if recorded is None:  # a branch pushed from elsewhere: its start is what it was given
            base_branch, commit = started or _start_of(clone, repository, base, where)
            _record(clone, branch, (base_branch, commit))
        else:
            commit = recorded
    tree = _must(_git("rev-parse", f"{commit}^{{tree}}", cwd=clone), f"cannot read commit {commit}")
    return {
        "worktree": path,
        "branch": branch,
        "base_branch": base_branch,
        "base_commit": commit,
        "base_tree": tree,
        "made": made,
    }


def merge_worktree(repository: str, checkout_dir: str, session_id: str, pushed: str, where: str) -> str:
    """A worktree of the session's branch as it was pushed, in this machine's clone, where the
    daemon merges it (reset to `pushed` if one is there from an earlier attempt); its path."""
    folder = os.path.expanduser(checkout_dir)
    os.makedirs(folder, exist_ok=True)
    branch = BRANCH_PREFIX + session_id
    with _locked(_lock_of(os.path.join(folder, clone_name(repository)))):
        clone = _open_clone(folder, repository, where)
        path = os.path.join(clone, WORKTREES, session_id)
        if _registered(clone, path):
            _must(_git("reset", "--quiet", "--hard", pushed, cwd=path), f"cannot reset {path} {where}")
            _git("clean", "-fdq", cwd=path)
        else:
            _git("worktree", "prune", cwd=clone)
            added = _git("worktree", "add", "--quiet", "-B", branch, path, pushed, cwd=clone)
            _must(added, f"cannot make a worktree of {branch} at {path} {where}")
    return path


def _inside(worktree: str, path: str) -> str:
    try:
        return confine.resolve_inside(worktree, path)
    except confine.PathOutsideRoot as exc:
        raise PathOutsideRoot(str(exc)) from None


def read_text(worktree: str, path: str) -> str:
    return read_local(_inside(worktree, path))


def write_text(worktree: str, path: str, content: str) -> str:
    """Writes (parents made); the real path written."""
    real = _inside(worktree, path)
    write_local(real, content)
    return real


def directory(worktree: str, path: str | None) -> str:
    """The real directory a command starts in: `path` under the worktree (default: the worktree)."""
    real = _inside(worktree, path) if path else os.path.realpath(worktree)
    if not os.path.isdir(real):
        raise PlacementError(f"{path} is not a directory in the session's worktree")
    return real


def changes(worktree: str, base_tree: str, extra: list[tuple[str, str | None, str]]) -> dict[str, Any]:
    """The worktree's changed files against `base_tree` (as the daemon counts a local root's)."""

    async def count() -> dict[str, Any]:
        tracker = await ChangeTracker.start(worktree, base_tree)
        return (await tracker.changes(extra)).wire()

    if not os.path.isdir(worktree):
        raise PlacementError(f"the session's worktree {worktree} is gone")
    return asyncio.run(count())


def _commit_pending(worktree: str, session_id: str) -> int:
    """Commits what is uncommitted in the worktree; how many files that was."""
    status = _must(_git("status", "--porcelain", cwd=worktree), f"cannot read {worktree}")
    if not status:
        return 0
    _must(_git("add", "-A", cwd=worktree), f"cannot stage the work in {worktree}")
    message = f"sessiond: work of session {session_id}"
    committed = _git(*_identity(worktree), "commit", "--quiet", "--no-verify", "-m", message, cwd=worktree)
    _must(committed, f"cannot commit the work in {worktree}")
    return len(status.splitlines())


def push(worktree: str, branch: str, session_id: str, repository: str, where: str) -> str:
    """Commits what is pending and pushes the session's branch to the repository (the branch is
    the session's own: pushed over whatever it was there); the commit pushed."""
    if not os.path.isdir(worktree):
        raise PlacementError(f"the session's worktree {worktree} {where} is gone")
    _commit_pending(worktree, session_id)
    head = _must(_git("rev-parse", "HEAD", cwd=worktree), f"cannot read {worktree}")
    pushed = _git("push", "--quiet", "--force", "origin", f"HEAD:refs/heads/{branch}", cwd=worktree)
    if not pushed.ok:
        raise PlacementError(
            f"cannot push branch {branch} to {repository} {where}: {pushed.reason()}; the work stays "
            f"in the worktree {worktree} there"
        )
    _git("update-ref", f"refs/remotes/origin/{branch}", head, cwd=worktree)
    return head


def follow(worktree: str, branch: str, expected: str, commit: str) -> bool:
    """After a merge that kept the session's branch: the worktree moves to the merged `commit` if
    it is still clean at `expected` (what was pushed for the merge). Whether it moved."""
    if not os.path.isdir(worktree):
        return False
    head = _git("rev-parse", "HEAD", cwd=worktree).out.strip()
    if head != expected or _git("status", "--porcelain", cwd=worktree).out.strip():
        return False
    if not _git(
        "fetch", "--quiet", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}", cwd=worktree
    ).ok:
        return False
    return _git("reset", "--quiet", "--hard", commit, cwd=worktree).ok


def _unmerged(worktree: str, base_branch: str | None, base_commit: str) -> tuple[int, int]:
    """(commits not in the base as the repository has it now, files not committed)."""
    target = base_commit
    if base_branch is not None:
        remote = f"refs/remotes/origin/{base_branch}"
        _git("fetch", "--quiet", "origin", f"+refs/heads/{base_branch}:{remote}", cwd=worktree)
        if _git("rev-parse", "--verify", "--quiet", remote, cwd=worktree).ok:
            target = remote
    ahead = _git("rev-list", "--count", f"{target}..HEAD", cwd=worktree)
    status = _git("status", "--porcelain", cwd=worktree)
    return int(ahead.out.strip() or 0) if ahead.ok else 0, len(status.out.splitlines())


def retire(
    worktree: str,
    branch: str,
    session_id: str,
    repository: str,
    base: tuple[str | None, str],
    where: str,
) -> str | None:
    """The session is closed: its worktree here goes. Work not in the base is pushed first as the
    session's branch, and the sentence saying so returned; else the branch goes from the
    repository too (pushed by an earlier merge or move). A push that fails keeps the worktree."""
    if not os.path.isdir(worktree):
        return None
    ahead, dirty = _unmerged(worktree, *base)
    kept = None
    if ahead or dirty:
        push(worktree, branch, session_id, repository, where)
        what = [f"{ahead} commit{'s' if ahead != 1 else ''} not merged"] if ahead else []
        what += [f"{dirty} uncommitted file{'s' if dirty != 1 else ''} committed"] if dirty else []
        kept = (
            f"its work is kept as branch {branch} of {repository} ({'; '.join(what)}): merge it there, "
            f"or delete it with `git push {repository} --delete {branch}`"
        )
    elif _git("show-ref", "--verify", "--quiet", f"refs/remotes/origin/{branch}", cwd=worktree).ok:
        _git("push", "--quiet", "origin", "--delete", branch, cwd=worktree)
    remove(worktree, branch)
    return kept


def remove(worktree: str, branch: str) -> None:
    """The worktree and its branch go from this machine's clone (the repository is not touched)."""
    clone = os.path.dirname(os.path.dirname(worktree))
    if not os.path.isdir(clone):
        return
    with _locked(_lock_of(clone)):
        _git("worktree", "remove", "--force", worktree, cwd=clone)
        shutil.rmtree(worktree, ignore_errors=True)
        _git("worktree", "prune", cwd=clone)
        _git("branch", "-D", branch, cwd=clone)  # and its config, with what it started from
