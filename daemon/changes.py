"""Which files a session changed, against the state its root had when it first ran.

In a git repository the state is a git tree written from the working copy
at the first turn (tracked and untracked files, minus ignored ones), so
changes others made before the session started are not counted as its own.
Later states are written the same way and compared with `git diff-tree`.
The trees are written through a private index seeded from the repository's
own, so only files whose stat changed are hashed again.

Outside git the first turn takes a snapshot of the root's text files
(bounded in size) and later states are compared with it line by line.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import math
import os
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sessiond.daemon.child_env import DEFAULT_RULES, child_environment
from sessiond.daemon.shared_runs import Remembered, SharedRuns
from sessiond.protocol import models as m

FILE_TIME_TICK = 0.02  # file times come from the kernel's coarse clock, a tick behind time.time()
SNAPSHOT_FILE_LIMIT = 256 * 1024
SNAPSHOT_TOTAL_LIMIT = 64 * 1024 * 1024
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"}


State = str | dict[str, str]  # a git tree's id, or a snapshot's texts by relative path


class GitFailed(Exception):
    pass


async def _git(cwd: str, *args: str, env: dict[str, str] | None = None) -> str:
    process = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=cwd,
        env=child_environment(env, DEFAULT_RULES),  # the daemon's own git: no agent's rules
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise GitFailed(f"git {' '.join(args)}: {err.decode(errors='replace').strip()}")
    return out.decode(errors="replace")


@dataclass(frozen=True)
class _InGit:
    """Where a root is in git: its work tree's top, and that work tree's git folder."""

    top: str
    git_dir: str


_IN_GIT: Remembered[str, _InGit | None] = Remembered(most=4096)  # by root
# A root outside git may be made a repository later (`git init`): at most this often (seconds), a
# root remembered outside git is looked at for a `.git` in it or a folder above, a few stats where
# asking git again would start a process per wave of first turns.
RECHECK_OUTSIDE = 1.0
_LOOKED: dict[str, float] = {}  # by root remembered outside git: when it was last looked at


async def _in_git(root: str) -> _InGit | None:
    """Where a root is in git, if it is; asked of git once per root (two hundred sessions of one
    root starting at once start one git process, not two hundred), and again for a root outside
    git that has a `.git` now."""
    where = await _IN_GIT.get(root, lambda: _ask_git(root))
    if where is not None:
        return where
    now = time.monotonic()
    if now - _LOOKED.get(root, -math.inf) < RECHECK_OUTSIDE:
        return None
    _LOOKED[root] = now
    if len(_LOOKED) > _IN_GIT.most:
        del _LOOKED[next(iter(_LOOKED))]
    if not _has_git_above(root):
        return None
    _IN_GIT.forget(root, None)
    return await _IN_GIT.get(root, lambda: _ask_git(root))


def _has_git_above(root: str) -> bool:
    """Whether the root or a folder above it holds a `.git` (a folder, or a worktree's file)."""
    folder = os.path.abspath(root)
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent


async def _ask_git(root: str) -> _InGit | None:
    try:
        top, git_dir = (await _git(root, "rev-parse", "--show-toplevel", "--absolute-git-dir")).splitlines()
    except (GitFailed, OSError, ValueError):
        return None
    return _InGit(top, git_dir)


_TREES: SharedRuns[str, str] = SharedRuns()  # by work tree: sessions of one root share its state


async def _tree_now(where: _InGit) -> str:
    """The work tree's state now, as a git tree (tracked and untracked files, ignored ones left
    out), written through a private index seeded from the repository's own."""
    with tempfile.TemporaryDirectory(prefix="sessiond-index-") as scratch:
        index = os.path.join(scratch, "index")
        if os.path.exists(os.path.join(where.git_dir, "index")):
            # copy2 keeps the index's own mtime, which git's racy-clean check
            # compares file mtimes against: a file edited in the second the
            # index was written is then hashed again rather than trusted.
            shutil.copy2(os.path.join(where.git_dir, "index"), index)
        env = {"GIT_INDEX_FILE": index}
        await _git(where.top, "add", "-A", "--", ".", env=env)
        return (await _git(where.top, "write-tree", env=env)).strip()


def count_lines(old: str | None, new: str | None) -> tuple[int, int]:
    """(added, removed) lines between two texts."""
    added = removed = 0
    for line in difflib.ndiff((old or "").splitlines(), (new or "").splitlines()):
        if line.startswith("+ "):
            added += 1
        elif line.startswith("- "):
            removed += 1
    return added, removed


class CountsChanges(Protocol):
    """What counts a session's changed files: a `ChangeTracker` on this machine's files, or one
    that counts them where they are (a worktree made on the agent's node)."""

    @property
    def base(self) -> str | None: ...
    async def changes(self, extra: list[tuple[str, str | None, str]] | None = None) -> m.Changes: ...


@dataclass
class ChangeTracker:
    root: str
    git: _InGit | None = None  # where the root is in git, when it is
    base: str | None = None  # the git tree of the first turn, or "snapshot"
    snapshot: dict[str, str] = field(default_factory=dict)

    @classmethod
    async def start(cls, root: str, base: str | None = None) -> ChangeTracker:
        """Record the root's state now (or carry on from a base recorded before a restart)."""
        tracker = cls(root)
        tracker.git = await _in_git(root)
        if tracker.git is not None and not (base and base != "snapshot"):
            try:
                base = await tracker._write_tree()
            except GitFailed:
                if _has_git_above(root):
                    raise  # (a repository git cannot read: said as the session's trouble)
                # Its `.git` is gone since git was asked: outside git now, and asked again.
                _IN_GIT.forget(root, tracker.git)
                tracker.git = await _in_git(root)
                if tracker.git is not None:
                    base = await tracker._write_tree()
        if tracker.git is not None:
            tracker.base = base
        else:
            tracker.base = "snapshot"
            tracker.snapshot = await read_texts(root)
        return tracker

    @property
    def top(self) -> str | None:
        """The git work tree's top, when in git."""
        return self.git.top if self.git is not None else None

    @functools.cached_property
    def prefix(self) -> str:
        """The root's path in its git work tree ("." at its top)."""
        assert self.top is not None
        return os.path.relpath(os.path.realpath(self.root), os.path.realpath(self.top))

    def base_state(self) -> State | None:
        """The root's state at the base, as `state` gives states (None before `start`)."""
        return self.snapshot if self.top is None else self.base

    async def _write_tree(self) -> str:
        """The work tree's state now (shared with the sessions of the root asking at once)."""
        assert self.git is not None
        git = self.git
        return await _TREES.get(git.top, lambda: _tree_now(git))

    async def state(self) -> State:
        """The root's state now: a git tree, or a snapshot of its text files outside git."""
        if self.top is not None:
            return await self._write_tree()
        return await read_texts(self.root)

    def changed_since(self, paths: set[str], since: float) -> set[str]:
        """Of `paths` (relative to the root), those changed at or after `since` (wall clock) by
        their file's time, or by their folder's for one gone. Blocking: call it on a thread."""
        since -= FILE_TIME_TICK
        changed = set()
        for path in paths:
            full = os.path.join(self.root, path)
            with contextlib.suppress(OSError):
                try:
                    when = os.stat(full, follow_symlinks=False).st_mtime
                except FileNotFoundError:
                    when = os.stat(os.path.dirname(full)).st_mtime
                if when >= since:
                    changed.add(path)
        return changed

    async def changed_between(self, before: State, after: State) -> set[str]:
        """The paths (relative to the root) that differ between two states `state` gave."""
        if isinstance(before, dict) or isinstance(after, dict):
            old = before if isinstance(before, dict) else {}
            new = after if isinstance(after, dict) else {}
            return {path for path in set(old) | set(new) if old.get(path) != new.get(path)}
        if before == after or self.top is None:
            return set()
        prefix = self.prefix
        scope = [] if prefix == "." else ["--", prefix]
        out = await _git(self.top, "diff-tree", "-r", "--name-only", "-z", before, after, *scope)
        return {_under(prefix, path) for path in out.split("\0") if path}

    def relative(self, path: str) -> str | None:
        """A path (absolute, or relative to the root) as the root's changed files name it; None outside."""
        return _relative(self.root, path)

    async def changes(self, extra: list[tuple[str, str | None, str]] | None = None) -> m.Changes:
        """The changed files now, with `extra` diffs (path, old, new) from tool calls outside the root."""
        if self.top is not None:
            files = await self._git_changes()
        else:  # the root's texts read once for the sessions asking at once, compared once
            pair = _Snapshots(self.snapshot, await read_texts(self.root))
            files = list(await _COMPARED.get(pair, lambda: asyncio.to_thread(_compare, pair.old, pair.new)))
        listed = {f.path for f in files}
        for path, old, new in extra or []:
            inside = _relative(self.root, path)
            if inside is not None:
                continue  # the root's own state already says it
            if path in listed:
                continue
            added, removed = count_lines(old, new)
            kind: m.ChangeKind = "added" if old is None else "modified"
            files.append(m.ChangedFile(path=path, kind=kind, added=added, removed=removed, outside_root=True))
            listed.add(path)
        files.sort(key=lambda f: f.path)
        return m.Changes(
            files=files,
            added=sum(f.added for f in files),
            removed=sum(f.removed for f in files),
            base=self.base,
        )

    async def _git_changes(self) -> list[m.ChangedFile]:
        assert self.top is not None
        assert self.base is not None
        now = await self._write_tree()
        if now == self.base:
            return []
        prefix = self.prefix
        # Two trees differ as they always will: sessions of one root (which share their trees)
        # ask git once for each pair. (The files are shared: never changed, only copied.)
        top, base = self.top, self.base
        return list(await _DIFFED.get((top, base, now, prefix), lambda: _diff_trees(top, base, now, prefix)))


@dataclass(frozen=True, eq=False)
class _Snapshots:
    """Two snapshots of a root, the same objects (as sessions sharing their reads hold them): kept
    as a key, they keep their ids from being reused."""

    old: dict[str, str]
    new: dict[str, str]

    def __hash__(self) -> int:
        return hash((id(self.old), id(self.new)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Snapshots) and self.old is other.old and self.new is other.new


# (Few kept: each holds a snapshot of the root as it was, up to SNAPSHOT_TOTAL_LIMIT of texts.)
_COMPARED: Remembered[_Snapshots, list[m.ChangedFile]] = Remembered(most=8)


def _compare(old_texts: dict[str, str], new_texts: dict[str, str]) -> list[m.ChangedFile]:
    """The files that differ between two snapshots of a root."""
    files = []
    for path in sorted(set(new_texts) | set(old_texts)):
        old, new = old_texts.get(path), new_texts.get(path)
        if old == new:
            continue
        added, removed = count_lines(old, new)
        kind: m.ChangeKind = "added" if old is None else "deleted" if new is None else "modified"
        files.append(m.ChangedFile(path=path, kind=kind, added=added, removed=removed))
    return files


_DIFFED: Remembered[tuple[str, str, str, str], list[m.ChangedFile]] = Remembered(most=256)


async def _diff_trees(top: str, base: str, now: str, prefix: str) -> list[m.ChangedFile]:
    """The files that differ between two trees, under `prefix` of the work tree."""
    scope = [] if prefix == "." else ["--", prefix]
    status = await _git(top, "diff-tree", "-r", "-M", "--name-status", "-z", base, now, *scope)
    numstat = await _git(top, "diff-tree", "-r", "-M", "--numstat", "-z", base, now, *scope)
    counts = _parse_numstat(numstat)
    files = []
    fields = status.split("\0")
    i = 0
    while i < len(fields) - 1:
        code = fields[i]
        if code.startswith("R"):
            old, new = fields[i + 1], fields[i + 2]
            i += 3
        else:
            old, new = None, fields[i + 1]
            i += 2
        kind: m.ChangeKind = {"A": "added", "D": "deleted", "R": "renamed"}.get(code[:1], "modified")  # type: ignore[assignment]
        added, removed = counts.get(new, (0, 0))
        files.append(
            m.ChangedFile(
                path=_under(prefix, new),
                kind=kind,
                added=added,
                removed=removed,
                old_path=_under(prefix, old) if old else None,
            )
        )
    return files


def _parse_numstat(text: str) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = {}
    fields = text.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        if not entry:
            i += 1
            continue
        added, removed, path = [*entry.split("\t", 2), "", ""][:3]
        if path == "":  # a rename: the two paths follow
            path = fields[i + 2] if i + 2 < len(fields) else ""
            i += 3
        else:
            i += 1
        counts[path] = (int(added) if added.isdigit() else 0, int(removed) if removed.isdigit() else 0)
    return counts


def _under(prefix: str, path: str) -> str:
    return path if prefix == "." else os.path.relpath(path, prefix)


def _relative(root: str, path: str) -> str | None:
    real_root = os.path.realpath(root)
    real = os.path.realpath(path if os.path.isabs(path) else os.path.join(root, path))
    if real == real_root or real.startswith(real_root + os.sep):
        return os.path.relpath(real, real_root)
    return None


class _Texts:
    """File contents by (path, mtime, size), shared by every snapshot.

    Two hundred sessions snapshotting one root hold one copy of its files, and
    a file is read again only when its stat says it changed.
    """

    def __init__(self, limit: int = 4 * SNAPSHOT_TOTAL_LIMIT) -> None:
        self._texts: OrderedDict[tuple[str, int, int], str | None] = OrderedDict()
        self._size = 0
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, path: Path, *, cached_only: bool = False) -> str | None:
        """The file's text (None: too big, or not UTF-8); with `cached_only`, raises _TooBig
        rather than read a file whose text is not held already."""
        stat = path.stat()
        if stat.st_size > SNAPSHOT_FILE_LIMIT:
            return None
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if key in self._texts:
                self._texts.move_to_end(key)
                return self._texts[key]
        if cached_only:
            raise _TooBig
        try:
            text: str | None = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            text = None
        with self._lock:
            self._texts[key] = text
            self._size += len(text or "")
            while self._size > self._limit and self._texts:
                _, dropped = self._texts.popitem(last=False)
                self._size -= len(dropped or "")
        return text


_TEXTS = _Texts()


_READS: SharedRuns[str, dict[str, str]] = SharedRuns()  # by root


async def read_texts(root: str) -> dict[str, str]:
    """The root's text files now, as `_read_texts` gives them. A small root whose files are held
    already is read here (a thread hop costs more); any other on a thread, shared by the sessions
    of the root asking at once (`SharedRuns`: two hundred starting at once cost two reads and two
    thread hops, not two hundred). The dict may be shared with them: read it, do not change it."""
    with contextlib.suppress(_TooBig):
        return _read_texts(root, inline=True)
    return await _READS.get(root, lambda: asyncio.to_thread(_read_texts, root))


INLINE_ENTRIES = 64  # files and folders a root may hold to be read on the loop's thread


class _TooBig(Exception):
    """A root read in place turned out bigger than INLINE_ENTRIES, or holds a file not read yet."""


def _walk(root: str, limit: int | None = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(root)` (top down, into no linked folder, errors passed over), raising _TooBig
    once more than `limit` entries have been listed."""
    listed = 0
    stack = [root]
    while stack:
        top = stack.pop()
        dirs: list[str] = []
        names: list[str] = []
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    listed += 1
                    if limit is not None and listed > limit:
                        raise _TooBig
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else names).append(entry.name)
        except OSError:
            continue  # (os.walk passes over a folder it cannot list whole)
        yield top, dirs, names  # (the caller may cut dirs down, as os.walk's may)
        for name in reversed(dirs):
            path = os.path.join(top, name)
            if not os.path.islink(path):
                stack.append(path)


def _read_texts(root: str, *, inline: bool = False) -> dict[str, str]:
    """The root's text files by relative path; `inline` (on the loop's thread) raises _TooBig
    past INLINE_ENTRIES entries or at a file whose text is not held already."""
    texts: dict[str, str] = {}
    total = 0
    for directory, dirs, names in _walk(root, INLINE_ENTRIES if inline else None):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = Path(directory, name)
            try:
                if path.is_symlink():
                    continue
                text = _TEXTS.get(path, cached_only=inline)
            except OSError:
                continue
            if text is None:
                continue
            total += len(text)
            if total > SNAPSHOT_TOTAL_LIMIT:
                return texts
            texts[os.path.relpath(path, root)] = text
    return texts
