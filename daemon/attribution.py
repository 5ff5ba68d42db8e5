"""Which of a shared working copy's changed files are a session's own.

Sessions placed `here` (or in a sandbox or container over the same root) share
one working copy, so the root's changes since a session's base are everybody's.
A session's own files are what its agent did:

- files it wrote through ACP `fs/write_text_file` (exact);
- files its tool calls named, in their `locations` (edits, deletes, moves) and
  diff content;
- files that changed while one of its commands ran (a terminal, or an `execute`
  tool call): the root's state is taken when the command starts (its
  `tool_call`, or the answer allowing it, for an agent that asks before it
  announces the call) and when it ends, and the difference is the command's, less the files other sessions
  wrote through fs meanwhile. When another session's command ran in the same
  root at the same time, such a file is counted for both, each naming the other
  (`sharedWith`): it is never silently given to one.

An agent that runs a command in its own process (opencode, Claude Code) does
not wait for the daemon: the command may be done before the daemon has taken
the state it starts from, or has even heard of it. So a command announced by a
`tool_call` also takes the files that changed between the state taken
EARLY_RUN before its announcement and the one it starts from whose file times
are no older than that, unless another session has claimed them.

Worktree sessions do not need this: their working copy is their own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sessiond.daemon.changes import EARLY_RUN, ChangeTracker, State

log = logging.getLogger("sessiond.insight")


@dataclass
class _Window:
    session: str
    tracker: ChangeTracker
    before: asyncio.Task[Any]
    others: set[str] = field(default_factory=set)  # sessions whose commands ran meanwhile
    written_by_others: set[str] = field(default_factory=set)  # files others wrote through fs meanwhile
    # For a command that may have run before the window opened: a state taken before it ran
    # (when its taking began, and the state), and when the command may have run from.
    earlier: tuple[float, State] | None = None
    since: float = 0.0


@dataclass
class _Root:
    # By session: its own files (relative to the root), each with the sessions it may be shared with.
    claims: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    windows: dict[tuple[str, str], _Window] = field(default_factory=dict)


class Attribution:
    def __init__(
        self, spawn: Callable[[Any, str], asyncio.Task[Any]], changed: Callable[[str], None]
    ) -> None:
        self._spawn = spawn
        self._changed = changed  # told the id of a session whose own files changed
        self._roots: dict[str, _Root] = {}
        self._closing: dict[str, set[asyncio.Task[Any]]] = {}  # by session: windows being worked out

    def _root(self, tracker: ChangeTracker) -> _Root:
        return self._roots.setdefault(os.path.realpath(tracker.root), _Root())

    def claim(
        self, session: str, tracker: ChangeTracker, path: str, shared_with: Iterable[str] = ()
    ) -> str | None:
        """The session's agent changed `path` (absolute or relative to the root): its name
        relative to the root, or None when it is outside (and not counted here)."""
        relative = tracker.relative(path)
        if relative is not None:
            self._root(tracker).claims.setdefault(session, {}).setdefault(relative, set()).update(shared_with)
        return relative

    def wrote(self, session: str, tracker: ChangeTracker, path: str) -> None:
        """Written through fs: the session's, and not the commands' that others run meanwhile."""
        relative = self.claim(session, tracker, path)
        if relative is None:
            return
        for window in self._root(tracker).windows.values():
            if window.session != session:
                window.written_by_others.add(relative)

    def own(self, session: str, tracker: ChangeTracker) -> dict[str, set[str]]:
        return self._root(tracker).claims.get(session, {})

    def command_started(
        self, session: str, tracker: ChangeTracker, key: str, *, maybe_ran: bool = False
    ) -> asyncio.Task[Any]:
        """A command of the session starts in the root: its window opens (awaiting the task
        returned waits for the state before it). `maybe_ran`: the agent runs it without waiting
        for the daemon, so it may have run already (see EARLY_RUN)."""
        root = self._root(tracker)
        existing = root.windows.get((session, key))
        if existing is not None:
            return existing.before
        since = time.time() - EARLY_RUN
        earlier = tracker.state_before(since) if maybe_ran else None
        before = self._spawn(tracker.state(), f"state-{session}-{key}")
        window = _Window(session, tracker, before, earlier=earlier, since=since)
        for other in root.windows.values():
            if other.session != session:
                other.others.add(session)
                window.others.add(other.session)
        root.windows[(session, key)] = window
        return before

    def command_ended(self, session: str, tracker: ChangeTracker, key: str) -> None:
        """The command ended: what changed in the root meanwhile is worked out, in the background."""
        window = self._root(tracker).windows.pop((session, key), None)
        if window is None:
            return
        task = self._spawn(self._close(window), f"window-{session}-{key}")
        closing = self._closing.setdefault(session, set())
        closing.add(task)
        task.add_done_callback(closing.discard)

    def rename(self, session: str, tracker: ChangeTracker, key: str, new_key: str) -> None:
        root = self._root(tracker)
        window = root.windows.pop((session, key), None)
        if window is not None:
            root.windows[(session, new_key)] = window

    def end_all(self, session: str) -> None:
        """The session's turn ended: commands still counted as running are counted as ended."""
        for root in self._roots.values():
            for window_session, key in [k for k in root.windows if k[0] == session]:
                self.command_ended(window_session, root.windows[(window_session, key)].tracker, key)

    async def settled(self, session: str) -> None:
        """Wait until the session's ended commands are worked out."""
        pending = list(self._closing.get(session, ()))
        if pending:
            await asyncio.wait(pending)

    async def _close(self, window: _Window) -> None:
        try:
            before = await window.before
            after = await window.tracker.state()
            paths = await window.tracker.changed_between(before, after)
        except Exception as exc:  # git can fail on a broken repository: the turn goes on
            log.warning("could not work out what a command of %s changed: %s", window.session, exc)
            return
        root = self._root(window.tracker)
        paths |= await self._ran_early(window, root, before)
        paths -= window.written_by_others
        if not paths:
            return
        mine = root.claims.setdefault(window.session, {})
        for path in paths:
            mine.setdefault(path, set()).update(window.others)
            for other in window.others:
                root.claims.setdefault(other, {}).setdefault(path, set()).add(window.session)
        self._changed(window.session)
        for other in window.others:
            self._changed(other)

    async def _ran_early(self, window: _Window, root: _Root, before: State) -> set[str]:
        """The files a command that may have run before its window opened changed before it did:
        those that changed since a state taken before it ran, no earlier than EARLY_RUN before
        its announcement by their times, and that no other session claims."""
        if window.earlier is None:
            return set()
        began, earlier = window.earlier
        try:
            gap = await window.tracker.changed_between(earlier, before)
        except Exception as exc:
            log.warning("could not work out what a command of %s changed: %s", window.session, exc)
            return set()
        for other, claims in root.claims.items():
            if other != window.session:
                gap -= claims.keys()
        if not gap:
            return set()
        return await asyncio.to_thread(window.tracker.changed_since, gap, max(began, window.since))

    def forget(self, session: str) -> None:
        for root in self._roots.values():
            root.claims.pop(session, None)
            for key in [k for k in root.windows if k[0] == session]:
                root.windows.pop(key).before.cancel()
        self._closing.pop(session, None)
