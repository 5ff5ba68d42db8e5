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
  announces the call) and when it ends, and the difference is the command's,
  less the files another session's agent named (as above) meanwhile, and
  those its own agent named (they are its own already).

An agent that runs a command in its own process (opencode, Claude Code) does
not wait for the daemon: the command may be done before the daemon has taken
the state it starts from, or has even heard of it. So a command announced by a
`tool_call` also takes the files that changed between the session's base and
the state it starts from whose file times are no older than when it may have
begun: EARLY_RUN before its announcement, or, told of only once it ended, the
start of the turn (it may have run for any part of it).

Each window spans the time from when its command may have begun to when the
state after it was taken. When other sessions' windows in the same root span
some of the same time, the files it counts are counted for them too, each
naming the others (`sharedWith`): which command made a file cannot be told, and
it is never silently given to one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sessiond.daemon.changes import FILE_TIME_TICK, ChangeTracker, State

log = logging.getLogger("sessiond.insight")

# How long before its announcement a command an agent runs in its own process may have run: its
# `tool_call` trails the run by the agent's own event plumbing (opencode relays its tool parts
# over an internal event stream), more so on a loaded machine.
EARLY_RUN = 2.0


@dataclass(eq=False)
class _Window:
    session: str
    tracker: ChangeTracker
    before: asyncio.Task[Any]
    began: float  # when its command may have begun (wall clock)
    ended: float | None = None  # when the state after it was taken
    # For a command that may have run before the window opened: a state from before it ran (the
    # session's base).
    earlier: State | None = None

    def meets(self, other: _Window) -> bool:
        """Whether the two windows span some of the same time."""
        return (self.ended is None or self.ended >= other.began) and (
            other.ended is None or other.ended >= self.began
        )


@dataclass
class _Root:
    # By session: its own files (relative to the root), each with the sessions it may be shared with.
    claims: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    # By file: when an agent last named it (wrote it through fs, or named it in a tool call), and
    # whose agent.
    named: dict[str, tuple[float, str]] = field(default_factory=dict)
    windows: dict[tuple[str, str], _Window] = field(default_factory=dict)  # open, by command
    # Every window not yet past caring: open, closing, or ended lately enough to span some of the
    # time of one open or to come (one reaches back EARLY_RUN at most).
    spans: list[_Window] = field(default_factory=list)

    def forget_old_spans(self) -> None:
        now = time.time()
        horizon = min([now - EARLY_RUN, *(w.began for w in self.spans if w.ended is None)])
        self.spans = [w for w in self.spans if w.ended is None or w.ended >= horizon]


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
            root = self._root(tracker)
            root.claims.setdefault(session, {}).setdefault(relative, set()).update(shared_with)
            root.named[relative] = (time.time(), session)
        return relative

    def own(self, session: str, tracker: ChangeTracker) -> dict[str, set[str]]:
        return self._root(tracker).claims.get(session, {})

    def command_started(
        self, session: str, tracker: ChangeTracker, key: str, *, ran_since: float | None = None
    ) -> asyncio.Task[Any]:
        """A command of the session starts in the root: its window opens (awaiting the task
        returned waits for the state before it). `ran_since`: the agent runs it without waiting
        for the daemon, so it may have run already, from then on (wall clock; see EARLY_RUN)."""
        root = self._root(tracker)
        existing = root.windows.get((session, key))
        if existing is not None:
            return existing.before
        before = self._spawn(tracker.state(), f"state-{session}-{key}")
        window = _Window(session, tracker, before, began=ran_since if ran_since is not None else time.time())
        if ran_since is not None:
            window.earlier = tracker.base_state()
        root.forget_old_spans()
        root.windows[(session, key)] = window
        root.spans.append(window)
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
        root = self._root(window.tracker)
        try:
            try:
                before = await window.before
                after = await window.tracker.state()
            finally:
                window.ended = time.time()
            paths = await window.tracker.changed_between(before, after)
            paths |= await self._ran_early(window, before)
        except Exception as exc:  # git can fail on a broken repository: the turn goes on
            log.warning("could not work out what a command of %s changed: %s", window.session, exc)
            return
        paths = {path for path in paths if not self._named_apart(root, path, window)}
        if not paths:
            return
        others = {w.session for w in root.spans if w.session != window.session and w.meets(window)}
        mine = root.claims.setdefault(window.session, {})
        for path in paths:
            mine.setdefault(path, set()).update(others)
            for other in others:
                root.claims.setdefault(other, {}).setdefault(path, set()).add(window.session)
        for one in (window.session, *others):
            self._changed(one)

    @staticmethod
    def _named_apart(root: _Root, path: str, window: _Window) -> bool:
        """Whether an agent named the file apart from the window: its own session's (the file is
        its own already), or another's while the window spanned (the file is that one's)."""
        named = root.named.get(path)
        if named is None:
            return False
        when, who = named
        return who == window.session or when >= window.began - FILE_TIME_TICK

    @staticmethod
    async def _ran_early(window: _Window, before: State) -> set[str]:
        """The files a command that may have run before its window opened changed before it did:
        those that changed since the base, no earlier than it may have begun by their times."""
        if window.earlier is None:
            return set()
        gap = await window.tracker.changed_between(window.earlier, before)
        if not gap:
            return set()
        return await asyncio.to_thread(window.tracker.changed_since, gap, window.began)

    def forget(self, session: str) -> None:
        for root in self._roots.values():
            root.claims.pop(session, None)
            root.named = {path: named for path, named in root.named.items() if named[1] != session}
            root.spans = [w for w in root.spans if w.session != session]
            for key in [k for k in root.windows if k[0] == session]:
                root.windows.pop(key).before.cancel()
        self._closing.pop(session, None)
