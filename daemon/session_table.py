"""Every session by id, read from the store on first need: a restart costs the same beside
a hundred thousand idle sessions as beside ten.

At start-up the core loads only the sessions that have something to show (a status other
than idle or closed, a turn cut off, a plan, usage or changes stored); the rest stay rows in
the store until a request names one (`get`, `in`, `[]`), a page lists it, or something walks
them all (`values()`, which loads every one, once). Their share of the fleet's tally is
counted in SQL. `loaded()` is what is in memory, for walks that concern only live sessions.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, ValuesView
from typing import Any

from sessiond.daemon import store as st
from sessiond.daemon.controls import Choices
from sessiond.daemon.records import SessionRecord
from sessiond.daemon.states import outcome_of
from sessiond.protocol.models import SessionStatus


def record_of(row: Any) -> SessionRecord:
    """A session's record from its stored row."""
    status = SessionStatus(row["status"])
    return SessionRecord(
        id=row["id"],
        ordinal=row["ordinal"],
        agent=row["agent"],
        root=row["root"],
        placement=row["placement"],
        title=row["title"],
        status=status,
        status_since=row["status_since"],
        created_at=row["created_at"],
        turns=row["turns"],
        agent_session_id=row["agent_session_id"],
        last_stop_reason=row["last_stop_reason"],
        last_error=row["last_error"],
        recap=row["recap"],
        run=row["run"],
        placement_options=row["placement_options"],
        kind=row["kind"],
        parent=row["parent"],
        choices=Choices.loads(row["choices"]) if row["choices"] else None,
        mcp_servers=row["mcp_servers"],
        last_outcome=outcome_of(status),
        stored_activity=row["activity"],
        title_from=row["title_from"],
        cost_copied=row["cost_copied"],
    )


class SessionTable:
    """Sessions by id: those in memory, and the store's rows loaded when first asked for."""

    def __init__(self, store: st.Store, adopt: Callable[[SessionRecord], None]) -> None:
        self._store = store
        self._adopt = adopt  # called with each record loaded from the store (not with new ones)
        self._loaded: dict[str, SessionRecord] = {}
        self._all = False
        # Sessions a prune is deleting (pruning.py): gone to every request from the moment their
        # deletion is queued, though their rows stay until it commits.
        self.gone: set[str] = set()

    def _load(self, session_id: str) -> SessionRecord | None:
        rows = self._store.lookup("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return self._take(rows[0]) if rows else None

    def in_memory(self, session_id: str) -> SessionRecord | None:
        """The session if it is in memory, without reading the store."""
        return self._loaded.get(session_id)

    def forget(self, session_id: str) -> SessionRecord | None:
        """A session whose row was deleted (a prune): out of memory; what it was, if loaded."""
        return self._loaded.pop(session_id, None)

    def _take(self, row: Any) -> SessionRecord:
        """(Callers leave out the rows of sessions `gone`.)"""
        known = self._loaded.get(row["id"])
        if known is not None:
            return known
        record = record_of(row)
        self._loaded[record.id] = record
        self._adopt(record)
        return record

    def get(self, session_id: str, default: SessionRecord | None = None) -> SessionRecord | None:
        if session_id in self.gone:
            return default
        record = self._loaded.get(session_id)
        if record is None and not self._all and isinstance(session_id, str):
            record = self._load(session_id)
        return record if record is not None else default

    def __getitem__(self, session_id: str) -> SessionRecord:
        record = self.get(session_id)
        if record is None:
            raise KeyError(session_id)
        return record

    def __contains__(self, session_id: object) -> bool:
        return isinstance(session_id, str) and self.get(session_id) is not None

    def __setitem__(self, session_id: str, record: SessionRecord) -> None:
        self._loaded[session_id] = record

    def loaded(self) -> ValuesView[SessionRecord]:
        """The sessions in memory: every one with a runtime, a turn or flags is among them."""
        return self._loaded.values()

    def values(self) -> ValuesView[SessionRecord]:
        """Every session (the first call loads those still in the store: a walk over all)."""
        if not self._all:
            self.take_rows(self._store.lookup("SELECT * FROM sessions ORDER BY ordinal"))
            self._all = True
        return self._loaded.values()

    def load_many(self, session_ids: Iterable[str]) -> None:
        """Read these sessions from the store at once, those not in memory yet (one query, where
        `get` of each would make one apiece)."""
        wanted = [i for i in session_ids if i not in self._loaded]
        if wanted and not self._all:
            query = "SELECT * FROM sessions WHERE id IN (SELECT value FROM json_each(?))"
            self.take_rows(self._store.lookup(query, (json.dumps(wanted),)))

    def take_rows(self, rows: Iterable[Any]) -> list[SessionRecord]:
        """Records for these stored rows, in their order (the ones in memory as they are; none for
        a session being pruned)."""
        return [self._take(row) for row in rows if row["id"] not in self.gone]

    def where(self, condition: str, params: tuple[Any, ...] = ()) -> list[SessionRecord]:
        """The sessions whose stored rows match an SQL condition, by ordinal."""
        rows = self._store.lookup(f"SELECT * FROM sessions WHERE {condition} ORDER BY ordinal", params)
        return self.take_rows(rows)

    def not_loaded_tally(self, every: Iterable[Any]) -> tuple[Counter[str], int]:
        """Sessions by stored status, and their turns, of those still only in the store; `every`:
        the counts of all (rows of status, n, turns), less those of the sessions in memory."""
        by_status: Counter[str] = Counter()
        turns = 0
        for row in every:
            by_status[row["status"]] += row["n"]
            turns += row["turns"]
        for row in self._store.lookup(
            "SELECT status, COUNT(*) AS n, COALESCE(SUM(turns), 0) AS turns FROM sessions "
            "WHERE id IN (SELECT value FROM json_each(?)) GROUP BY status",
            (json.dumps(list(self._loaded)),),
        ):
            by_status[row["status"]] -= row["n"]
            turns -= row["turns"]
        return by_status, turns


class LazyIndex(dict[str, list[SessionRecord]]):
    """Sessions by a column's value (`parent`, `run`): a key's list is read from the store the
    first time it is asked for, and kept up to date in memory after."""

    def __init__(self, table: SessionTable, column: str) -> None:
        super().__init__()
        self._table = table
        self._column = column
        self._filled: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self._filled:
            records = self._table.where(f"{self._column} = ?", (key,))
            self._filled.add(key)
            if records:
                self[key] = records
        return super().get(key, default)

    def drop(self, key: str, record: SessionRecord) -> None:
        """A session with this key was deleted (a prune)."""
        records = super().get(key)
        if records is not None:
            records[:] = [r for r in records if r is not record]

    def forget(self, key: str) -> None:
        """A key no session will have again (its parent or run deleted)."""
        self.pop(key, None)
        self._filled.discard(key)

    def add(self, key: str, record: SessionRecord) -> None:
        """A session with this key was opened or loaded (a key not read yet is read whole later;
        once read, every session with it is in memory, so one loaded later is a new one)."""
        if key in self._filled:
            self.setdefault(key, []).append(record)
