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
        self._waiting: dict[Hashable, tuple[asyncio.TimerHandle, Callable[[], object]]] = {}

    def request(self, key: Hashable, run: Callable[[], object]) -> None:
        if key in self._waiting:
            return  # a run is already due at the end of this window; it will read the latest state
        now = self._clock()
        due = self._last.get(key, -1e18) + self.interval
        if now >= due:
            self._last[key] = now
            run()
            return

        def fire() -> None:
            self._waiting.pop(key, None)
            self._last[key] = self._clock()
            run()

        self._waiting[key] = (asyncio.get_running_loop().call_later(due - now, fire), fire)

    def flush(self) -> None:
        """Run everything that waits, now (before a stop)."""
        for handle, fire in list(self._waiting.values()):
            handle.cancel()
            fire()

    def forget(self, key: Hashable) -> None:
        waiting = self._waiting.pop(key, None)
        if waiting is not None:
            waiting[0].cancel()
        self._last.pop(key, None)
