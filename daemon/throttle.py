"""At most one run per key per interval; the last request in a window wins.

Used for a session's state events (plan, usage, changes, attention) and the
fleet summary: a burst of updates becomes one event now and one more at the
end of the window carrying the latest state, never a flood and never stale.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable


class Throttle:
    def __init__(self, interval: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._due: dict[Hashable, asyncio.TimerHandle] = {}
        self._latest: dict[Hashable, Callable[[], object]] = {}

    def request(self, key: Hashable, run: Callable[[], object]) -> None:
        if key in self._due:
            self._latest[key] = run  # runs at the end of the window, in place of the earlier one
            return
        now = self._clock()
        due = self._last.get(key, float("-inf")) + self.interval
        if now >= due:
            self._last[key] = now
            run()
            return
        self._latest[key] = run
        self._due[key] = asyncio.get_running_loop().call_later(due - now, self._fire, key)

    def _fire(self, key: Hashable) -> None:
        self._due.pop(key, None)
        run = self._latest.pop(key, None)
        self._last[key] = self._clock()
        if run is not None:
            run()

    def flush(self) -> None:
        """Run everything that waits, now (before a stop)."""
        for key, handle in list(self._due.items()):
            handle.cancel()
            self._fire(key)

    def now(self, key: Hashable) -> None:
        """Run what waits for `key` now, if anything does (a turn's end: its state before its answer)."""
        handle = self._due.get(key)
        if handle is not None:
            handle.cancel()
            self._fire(key)
