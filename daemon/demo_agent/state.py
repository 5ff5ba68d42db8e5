"""What the demo agent remembers of a session, and its one-JSON-file-per-session store.

The files let `session/load` and `session/resume` work after the agent process
was restarted, the way a real agent keeps its transcripts on disk.
"""

from __future__ import annotations

import os
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field, ValidationError

from .script import PlanStatus

STATE_DIR_ENV = "SESSIOND_DEMO_STATE"
FILE_FORMAT_VERSION = 1
_TITLE_LIMIT = 80
# Session ids become file names: allow nothing that could climb out of the directory.
_SESSION_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def default_state_dir() -> Path:
    """`$SESSIOND_DEMO_STATE` if set, else the platform's state directory for sessiond."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(platformdirs.user_state_dir("sessiond")) / "demo-agent"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PlanItem(BaseModel):
    content: str
    status: PlanStatus = "pending"


class TurnRecord(BaseModel):
    prompt: str
    reply: str
    stop_reason: str  # "end_turn", "cancelled" or "error"


class SessionRecord(BaseModel):
    version: int = FILE_FORMAT_VERSION
    session_id: str
    cwd: str
    model: str
    mode: str
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    plan: list[PlanItem] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    threads: list[str] = Field(default_factory=list)  # ids of the threads its scripts started

    @property
    def title(self) -> str | None:
        """The first non-blank line of the first prompt, shortened."""
        for turn in self.turns:
            for line in turn.prompt.splitlines():
                if line.strip():
                    text = line.strip()
                    return text if len(text) <= _TITLE_LIMIT else text[: _TITLE_LIMIT - 1] + "…"
        return None

    def context_chars(self) -> int:
        return sum(len(turn.prompt) + len(turn.reply) for turn in self.turns)


class UnreadableSessionError(Exception):
    """A session file exists but is not a session record (corrupt or from elsewhere)."""


def is_valid_session_id(session_id: str) -> bool:
    return _SESSION_ID_RE.fullmatch(session_id) is not None


class SessionStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, session_id: str) -> Path:
        return self.directory / f"{session_id}.json"

    def save(self, record: SessionRecord) -> None:
        """Write atomically, so a crash mid-write leaves the previous version intact."""
        self.directory.mkdir(parents=True, exist_ok=True)
        data = record.model_dump_json(indent=1)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=f".{record.session_id}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(data)
            os.replace(temporary, self._path(record.session_id))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def load(self, session_id: str) -> SessionRecord | None:
        """The stored record, None when there is none; UnreadableSessionError when it is corrupt."""
        if not is_valid_session_id(session_id):
            return None
        path = self._path(session_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            record = SessionRecord.model_validate_json(text)
        except ValidationError as exc:
            raise UnreadableSessionError(f"{path} is not a demo agent session file: {exc}") from exc
        if record.session_id != session_id:
            raise UnreadableSessionError(f"{path} holds session {record.session_id!r}")
        return record

    def all_sessions(self) -> list[SessionRecord]:
        """Every readable stored session, most recently updated first."""
        if not self.directory.is_dir():
            return []
        records: list[SessionRecord] = []
        for path in self.directory.glob("*.json"):
            try:
                record = self.load(path.stem)
            except (UnreadableSessionError, OSError):
                continue  # one bad file must not hide the others
            if record is not None:
                records.append(record)
        records.sort(key=lambda record: record.updated_at, reverse=True)
        return records
