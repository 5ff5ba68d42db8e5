"""Runs: what a scripted flow did, written down.

A client connection may declare a run (a name, its command line, its
directory); the sessions it opens carry the run, and its end says how it
went: completed, failed, or stopped by hand. A connection that goes away
without saying ends its run as stopped.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sessiond.daemon import store as st
from sessiond.daemon.records import SessionRecord
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError


@dataclass
class RunRecord:
    id: str
    name: str
    argv: list[str]
    cwd: str
    started_at: float
    ended_at: float | None = None
    outcome: str | None = None

    def row(self) -> tuple[object, ...]:
        return (
            self.id,
            self.name,
            json.dumps(self.argv),
            self.cwd,
            self.started_at,
            self.ended_at,
            self.outcome,
        )


class RunBook:
    def __init__(self, store: st.Store) -> None:
        self._store = store
        self.runs: dict[str, RunRecord] = {}
        for row in store.query("SELECT * FROM runs ORDER BY started_at"):
            self.runs[row["id"]] = RunRecord(
                row["id"],
                row["name"],
                json.loads(row["argv"]),
                row["cwd"],
                row["started_at"],
                row["ended_at"],
                row["outcome"],
            )
        # Runs whose daemon stopped under them did not end by themselves.
        for run in self.runs.values():
            if run.outcome is None:
                self.end(run.id, "stopped")

    def _save(self, run: RunRecord) -> None:
        self._store.write(
            st.execute("INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?)", run.row()), wait=False
        )

    def declare(self, params: m.RunDeclareParams) -> RunRecord:
        run = RunRecord(f"r-{uuid.uuid4().hex[:10]}", params.name, params.argv, params.cwd, time.time())
        self.runs[run.id] = run
        self._save(run)
        return run

    def get(self, run_id: str) -> RunRecord:
        try:
            return self.runs[run_id]
        except KeyError:
            raise RpcError(
                ErrorCode.RUN_NOT_FOUND, f"no run {run_id!r}; list runs with run/list (`sessiond runs`)"
            ) from None

    def end(self, run_id: str, outcome: str) -> RunRecord:
        run = self.get(run_id)
        if run.outcome is None:
            run.outcome = outcome
            run.ended_at = time.time()
            self._save(run)
        return run

    @staticmethod
    def info(run: RunRecord, sessions: Iterable[SessionRecord]) -> m.RunInfo:
        """The run's summary from the sessions it opened."""
        mine = list(sessions)
        serial = sum(s.insight.busy_seconds for s in mine if s.insight is not None)
        cost = sum(s.insight.cost() for s in mine if s.insight is not None)
        end = run.ended_at if run.ended_at is not None else time.time()
        return m.RunInfo(
            id=run.id,
            name=run.name,
            argv=run.argv,
            cwd=run.cwd,
            started_at=run.started_at,
            ended_at=run.ended_at,
            outcome=run.outcome,
            sessions=len(mine),
            turns=sum(s.turns for s in mine),
            serial_seconds=round(serial, 3),
            wall_seconds=round(max(end - run.started_at, 0.0), 3),
            cost=round(cost, 6),
        )
