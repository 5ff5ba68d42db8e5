"""Work that callers asking at the same time share: each run begun after its callers asked
(`SharedRuns`, for the state of a root now), or asked once and kept (`Remembered`, for answers that
do not change; one that did after all is forgotten and asked again).

Two hundred sessions of one root starting at once each need the root's state as it is now (its
text files, its git tree). A run shared with a caller must begin after that caller asked (what
came before is not "now" to it), so per key at most one run goes on: whoever asks while none runs
starts one; whoever asks while one runs shares the next, begun when that one ends. Two hundred
callers cost two runs, not two hundred.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass
class _Runs(Generic[T]):
    """One key's runs: at most one running, and one asked for behind it."""

    loop: asyncio.AbstractEventLoop
    make: Callable[[], Awaitable[T]]
    running: asyncio.Future[T] | None = None
    queued: asyncio.Future[T] | None = None


class SharedRuns(Generic[K, T]):
    """Runs of `make` per key, shared by the callers that asked before each began."""

    def __init__(self) -> None:
        self._keys: dict[K, _Runs[T]] = {}  # (a loop closed meanwhile leaves its runs behind: not shared)

    async def get(self, key: K, make: Callable[[], Awaitable[T]]) -> T:
        """The result of a run of `make` begun after this call (or of the equal `make` of a caller
        asking at the same time). The result may be shared: read it, do not change it."""
        loop = asyncio.get_running_loop()
        runs = self._keys.get(key)
        if runs is None or runs.loop is not loop:
            runs = self._keys[key] = _Runs(loop, make)
        runs.make = make
        if runs.queued is None:
            runs.queued = loop.create_future()
            if runs.running is None:
                self._begin(key, runs)
        return await asyncio.shield(runs.queued if runs.queued is not None else runs.running)

    def _begin(self, key: K, runs: _Runs[T]) -> None:
        assert runs.queued is not None
        result, runs.running, runs.queued = runs.queued, runs.queued, None
        work = asyncio.ensure_future(runs.make())

        def done(work: asyncio.Future[T]) -> None:
            if not result.done():
                if work.cancelled():
                    result.cancel()
                elif (error := work.exception()) is not None:
                    result.set_exception(error)
                else:
                    result.set_result(work.result())
            if not result.cancelled():
                result.exception()  # (retrieved: each caller is told through its shield)
            runs.running = None
            if runs.queued is not None:
                self._begin(key, runs)
            elif self._keys.get(key) is runs:
                del self._keys[key]

        work.add_done_callback(done)


_ANY = object()  # (`Remembered.forget` without an answer: whatever is kept)


class Remembered(Generic[K, T]):
    """Answers that do not change for their key (what two git trees differ by): asked once, by the
    first caller, shared by those asking meanwhile and kept for the next, the `most` latest keys;
    a failure is not kept (the next caller asks again)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._kept: OrderedDict[K, asyncio.Future[T]] = OrderedDict()

    async def get(self, key: K, make: Callable[[], Awaitable[T]]) -> T:
        answer = self._kept.get(key)
        if answer is None or answer.get_loop() is not asyncio.get_running_loop():
            answer = self._kept[key] = asyncio.ensure_future(make())
            while len(self._kept) > self.most:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        try:
            return await asyncio.shield(answer)
        except Exception:
            if self._kept.get(key) is answer:
                del self._kept[key]
            raise

    def forget(self, key: K, answer: object = _ANY) -> None:
        """Ask again at the next `get` (the answer changed after all). Given the `answer` found
        wrong, only while that is still the one kept: callers finding it wrong at once ask again
        once, not each its own."""
        kept = self._kept.get(key)
        if kept is None:
            return
        if answer is not _ANY and not (
            kept.done() and not kept.cancelled() and kept.exception() is None and kept.result() is answer
        ):
            return  # (asked again already)
        del self._kept[key]
