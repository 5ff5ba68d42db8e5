"""The inbox of suggested tasks: proposed by agents or people, accepted or dismissed.

Pure bookkeeping over the store; the core opens and runs a task's session.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sessiond.daemon import store as st
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError


@dataclass
class TaskRecord:
    id: str
    agent: str
    title: str
    prompt: str
    why: str | None
    placement: str | None
    root: str | None
    from_session: str | None
    status: str
    created_at: float
    session: str | None = None
    reason: str | None = None

    def row(self) -> tuple[object, ...]:
        return (
            self.id,
            self.agent,
            self.title,
            self.prompt,
            self.why,
            self.placement,
            self.root,
            self.from_session,
            self.status,
            self.created_at,
            self.session,
            self.reason,
        )

    def info(self) -> m.TaskInfo:
        return m.TaskInfo(
            id=self.id,
            agent=self.agent,
            title=self.title,
            prompt=self.prompt,
            why=self.why,
            placement=self.placement,
            root=self.root,
            from_session=self.from_session,
            status=self.status,
            session=self.session,
            reason=self.reason,
            created_at=self.created_at,
        )


class TaskBook:
    def __init__(self, store: st.Store) -> None:
        self._store = store
        self.tasks: dict[str, TaskRecord] = {}
        for row in store.query("SELECT * FROM tasks ORDER BY created_at"):
            self.tasks[row["id"]] = TaskRecord(**dict(row))
        # A task that was running when the daemon stopped did not finish.
        for task in self.tasks.values():
            if task.status in ("running", "queued"):
                task.status, task.reason = "failed", "the daemon stopped while it ran; accept it again"
                self.save(task)

    def save(self, task: TaskRecord) -> None:
        self._store.write(
            st.execute("INSERT OR REPLACE INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", task.row()),
            wait=False,
        )

    def add(self, agent: str, params: m.TaskSuggestParams, root: str | None) -> TaskRecord:
        task = TaskRecord(
            id=f"k-{uuid.uuid4().hex[:8]}",
            agent=agent,
            title=params.title,
            prompt=params.prompt,
            why=params.why,
            placement=params.placement,
            root=root,
            from_session=params.from_session,
            status="suggested",
            created_at=time.time(),
        )
        self.tasks[task.id] = task
        self.save(task)
        return task

    def get(self, task_id: str) -> TaskRecord:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise RpcError(
                ErrorCode.TASK_NOT_FOUND, f"no task {task_id!r}; list them with task/list (`sessiond tasks`)"
            ) from None

    def running(self, agent: str) -> int:
        return sum(1 for t in self.tasks.values() if t.agent == agent and t.status == "running")

    def next_queued(self, agent: str) -> TaskRecord | None:
        return next((t for t in self.tasks.values() if t.agent == agent and t.status == "queued"), None)
