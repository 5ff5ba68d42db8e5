"""`merge/request` and `merge/list`: a worktree session's branch into its base, through
the per-repository merge queue (placements/merge_queue.py), with the steps as events
and, when asked, the outcome handed back to the session as a prompt. A session whose worktree
was made from a repository where its agent runs pushes its branch there, and is merged in the
daemon's own clone of the repository (under the state directory's `repositories/`).

What it reads of the core and asks of it is `MergingPort`. The queue (and the worktree
placement under it) loads with the first merge asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sessiond.daemon.events import EventLog
from sessiond.daemon.placements import PlacementError, as_repository
from sessiond.daemon.records import SessionRecord, SessionRuntime
from sessiond.daemon.session_table import SessionTable
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.models import EventKind

if TYPE_CHECKING:
    from sessiond.daemon.placements.merge_queue import MergeEntry, MergeQueues


class MergingPort(Protocol):
    """What merging reads of the core (sessions, their runtimes), asks of it (a task it owns, a
    turn handing the outcome back) and tells it (events); the core is one."""

    @property
    def events(self) -> EventLog: ...
    @property
    def sessions(self) -> SessionTable: ...
    @property
    def state_dir(self) -> Path: ...
    def get_session(self, session_id: str) -> SessionRecord: ...
    def runtime_of(self, session: SessionRecord) -> SessionRuntime: ...
    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]: ...
    async def prompt(self, params: m.SessionPromptParams) -> m.TurnResult: ...


class Merging:
    def __init__(self, core: MergingPort) -> None:
        self.core = core
        self._queues: MergeQueues | None = None
        self.entries: dict[str, MergeEntry] = {}  # the last merge asked for, by session

    @property
    def queues(self) -> MergeQueues:
        if self._queues is None:
            from sessiond.daemon.placements.merge_queue import MergeQueues

            self._queues = MergeQueues(on_step=self._step)
        return self._queues

    def _step(self, session_id: str, step: str, data: dict[str, Any]) -> None:
        session = self.core.sessions.get(session_id.rsplit("-", 1)[0])
        self.core.events.emit(
            EventKind.MERGE_STEP,
            agent=session.agent if session else None,
            session=session.id if session else session_id,
            step=step,
            **data,
        )

    async def merge(self, params: m.MergeParams) -> m.MergeEntry:
        session = self.core.get_session(params.session)
        if session.placement != "worktree":
            raise RpcError(
                ErrorCode.CONFLICT,
                f"session {session.id!r} works {session.placement}, not in a worktree: "
                "there is no branch to merge",
            )
        rt = self.core.runtime_of(session)
        if rt.running is not None or rt.queue:
            raise RpcError(
                ErrorCode.CONFLICT,
                f"session {session.id!r} has a turn running or queued; "
                "merge it once it is idle (or cancel it)",
            )
        from sessiond.daemon.placements.merge_queue import request_for, request_for_repository
        from sessiond.daemon.placements.worktree import WorktreePlacement

        placement = rt.placement
        repository = as_repository(placement)
        try:
            if repository is not None:
                request = await request_for_repository(
                    repository,
                    str(self.core.state_dir / "repositories"),
                    strategy=params.strategy,
                    gate=params.gate,
                    keep=params.keep,
                    base_branch=params.base_branch,
                )
            else:
                assert isinstance(placement, WorktreePlacement)
                if placement.worktree is None and session.turns:
                    await placement.prepare()  # a worktree made before a restart is found again
                request = request_for(
                    placement,
                    strategy=params.strategy,
                    gate=params.gate,
                    keep=params.keep,
                    base_branch=params.base_branch,
                )
            entry = await self.queues.submit(request)
        except PlacementError as exc:
            raise RpcError(ErrorCode.CONFLICT, f"cannot merge session {session.id!r}: {exc}") from None
        self.entries[session.id] = entry
        if params.hand_back:
            self.core.spawn(self._hand_back(session, entry), f"merge-hand-back-{session.id}")
        found = self.queues.find(request.session_id)
        position = found[0].position(request.session_id) if found is not None else None
        return self._entry(session.id, {**entry.summary(), "position": position})

    async def _hand_back(self, session: SessionRecord, entry: MergeEntry) -> None:
        await entry.wait()
        prompt = entry.handback_prompt()
        if prompt and not session.closed:
            with contextlib.suppress(RpcError):
                await self.core.prompt(m.SessionPromptParams(session=session.id, prompt=prompt))

    def _entry(self, session_id: str, summary: dict[str, Any]) -> m.MergeEntry:
        return m.MergeEntry.model_validate({**summary, "session": session_id.rsplit("-", 1)[0]})

    def listing(self) -> m.MergeList:
        """Merges waiting or running (with their position), then those done, by session."""
        queued = self._queues.listing() if self._queues is not None else []
        active = [self._entry(row["session"], row) for row in queued]
        busy = {e.session for e in active}
        done = [
            self._entry(entry.session_id, entry.summary())
            for sid, entry in self.entries.items()
            if sid not in busy
        ]
        return m.MergeList(entries=active + done)

    async def close(self) -> None:
        if self._queues is not None:
            await self._queues.close()
