"""Running `git` without blocking the daemon, and finding a directory's repository."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass

from sessiond.daemon.child_env import DEFAULT_RULES, child_environment
from sessiond.daemon.placements.base import PlacementError

# Parsed output must not depend on the user's language; prompts must never wait for a tty.
_ENV = {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "GIT_MERGE_AUTOEDIT": "no"}


@dataclass(frozen=True)
class GitResult:
    code: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0

    def reason(self) -> str:
        """git's own explanation, on one line."""
        text = (self.err.strip() or self.out.strip()).splitlines()
        return "; ".join(line.strip() for line in text if line.strip())[:500] or f"exit code {self.code}"


class GitFailed(PlacementError):
    pass


NO_GIT = "git is not installed; install git, or open the session with placement here"


async def run_git(*args: str, cwd: str) -> GitResult:
    if shutil.which("git") is None:
        raise PlacementError(NO_GIT)
    process = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=cwd,
        env=child_environment(_ENV, DEFAULT_RULES),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return GitResult(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def run_git_blocking(*args: str, cwd: str) -> GitResult:
    """`run_git` for code that runs where a session's files are (a thread here, a task on a Ray
    node), without an event loop."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=child_environment(_ENV, DEFAULT_RULES),
            stdin=subprocess.DEVNULL,
            capture_output=True,
        )
    except FileNotFoundError as exc:
        if exc.filename == cwd:
            raise PlacementError(f"{cwd} does not exist (git was to run there)") from None
        raise PlacementError(NO_GIT) from None
    return GitResult(
        done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    )


async def git(*args: str, cwd: str) -> str:
    """git's standard output, stripped; GitFailed with git's reason if it fails."""
    result = await run_git(*args, cwd=cwd)
    if not result.ok:
        raise GitFailed(f"git {' '.join(args[:2])} failed in {cwd}: {result.reason()}")
    return result.out.strip()


async def has_branch(name: str, cwd: str) -> bool:
    return (await run_git("show-ref", "--verify", "--quiet", f"refs/heads/{name}", cwd=cwd)).ok


@dataclass(frozen=True)
class Repo:
    toplevel: str  # the working copy's top directory (real path)
    common_dir: str  # the repository's .git directory, shared by all its worktrees (real path)
    prefix: str  # where the asked directory sits under toplevel ("" at the top, else "a/b")


_known: dict[str, Repo] = {}


async def find_repo(directory: str) -> Repo:
    """The repository `directory` is in; PlacementError in a sentence if none.

    Found repositories are remembered (a directory rarely leaves its repository), so opening
    ten thousand sessions in one root costs one git call; a miss is asked again next time.
    """
    real = os.path.realpath(directory)
    if real in _known:
        return _known[real]
    if not os.path.isdir(real):
        raise PlacementError(f"root {directory} is not an existing directory")
    result = await run_git(
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--git-common-dir",
        "--show-prefix",
        cwd=real,
    )
    if not result.ok:
        if "not a git repository" in result.err:
            raise PlacementError(
                f"root {directory} is not in a git repository; use placement here or run git init"
            )
        raise PlacementError(f"cannot use the git repository of {directory}: {result.reason()}")
    lines = result.out.splitlines()
    if len(lines) < 2 or not lines[0]:
        # A bare repository, or a directory inside .git: there is no working copy to branch.
        raise PlacementError(f"root {directory} is not in a git working copy (bare repository or .git)")
    prefix = lines[2].rstrip("/") if len(lines) > 2 else ""
    repo = Repo(os.path.realpath(lines[0]), os.path.realpath(lines[1]), prefix)
    _known[real] = repo
    return repo
