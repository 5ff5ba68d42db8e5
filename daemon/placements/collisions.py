"""Two live sessions editing the same file of the same working copy undo each other's work.

Pure bookkeeping, no I/O: the core tells it which real file a session wrote
(the path a placement's write_text returns, with the placement's host), and
it answers with the collisions that write made. Two sessions share a file
only when they share a working copy, so the real path (on its host) is the
file's identity; sessions in separate worktrees never collide. Each pair is
reported once per file; a closed session is forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Collision:
    path: str
    host: str | None
    first: str  # the session that wrote the file before
    second: str  # the session whose write this is

    def sentence(self) -> str:
        where = f"{self.path} on {self.host}" if self.host else self.path
        return (
            f"sessions {self.first} and {self.second} both edited {where}: "
            "two agents editing one file undo each other's work"
        )


@dataclass
class Collisions:
    # (host, real path) -> the live sessions that wrote it, in the order they first did.
    _writers: dict[tuple[str | None, str], list[str]] = field(default_factory=dict)
    _reported: set[tuple[str | None, str, frozenset[str]]] = field(default_factory=set)

    def wrote(self, session_id: str, path: str, host: str | None = None) -> list[Collision]:
        """Record a write; the collisions it makes that were not reported before."""
        key = (host, path)
        writers = self._writers.setdefault(key, [])
        found = []
        for other in writers:
            if other == session_id:
                continue
            pair = (host, path, frozenset((other, session_id)))
            if pair not in self._reported:
                self._reported.add(pair)
                found.append(Collision(path, host, other, session_id))
        if session_id not in writers:
            writers.append(session_id)
        return found

    def forget(self, session_id: str) -> None:
        """The session closed: its writes no longer collide with anyone's."""
        for key in list(self._writers):
            writers = self._writers[key]
            if session_id in writers:
                writers.remove(session_id)
                if not writers:
                    del self._writers[key]
        self._reported = {r for r in self._reported if session_id not in r[2]}

    def files_of(self, session_id: str) -> list[tuple[str | None, str]]:
        return [key for key, writers in self._writers.items() if session_id in writers]
