"""Blocking twins of the async client: ``connect`` → ``Daemon`` → ``Agent`` → ``Session``.

Nothing here talks to the daemon or holds logic of its own. Each sync client
owns one private ``asyncio.Runner`` and, on that loop, one ``AsyncDaemon``.
Every method below is a signature under ``@twin(AsyncX.amethod)``: the
decorator runs the async method on the client's loop and wraps the handles it
returns (``AsyncSession`` → ``Session``). A test holds the twins to the same
names and signatures, so they cannot drift apart.

- Ctrl-C: during a call, SIGINT cancels the call (as ``asyncio.Runner`` does,
  see ``_CtrlC`` for why not Runner's own handler), so the async code's cleanup
  (cancelling the turn in the daemon) runs before ``KeyboardInterrupt`` reaches
  the caller. That works in the main thread over Python's default SIGINT
  handler; where a program has its own handler, KeyboardInterrupt escapes the
  loop, and the call is then cancelled and run to its end before it propagates.
- Streams: one pump task per stream iterates the async stream under
  ``contextlib.aclosing``, one step per ``next()``, so the async code always
  runs in the same task (a timeout held across ``yield`` keeps working).
  Leaving the ``for`` loop early closes the stream, which cancels the turn.
- Called inside a running event loop, a method raises ``SyncCallInEventLoop``
  naming the async method to await instead, rather than deadlocking.
- A client never closed is closed (its turns cancelled) when its last handle
  is garbage-collected, or at interpreter exit (``weakref.finalize``).
"""

# The methods are signatures whose bodies `@twin` replaces, so their bodies are empty.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import signal
import socket
import threading
import weakref
from asyncio import events
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Generic, Literal, Self, TypeVar, cast, overload

from sessiond.client import launch
from sessiond.client.aio import (
    CLEANUP_TIMEOUT,
    AsyncAgent,
    AsyncDaemon,
    AsyncEventStream,
    AsyncSession,
    AsyncTurnStream,
    Reply,
    StrPath,
    _AsyncStream,
    _open_daemon,
)
from sessiond.client.errors import ConnectionLost, SyncCallInEventLoop
from sessiond.protocol.models import (
    AgentInfo,
    DaemonStatus,
    Event,
    EventKind,
    Fleet,
    SessionInfo,
    SessionStatus,
    Transcript,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
A = TypeVar("A")
S = TypeVar("S", bound=_AsyncStream)
F = TypeVar("F", bound=Callable[..., Any])


class _Loop:
    """The private event loop of one sync client, and what lives on it."""

    def __init__(self) -> None:
        self.runner = asyncio.Runner()
        self.lock = threading.Lock()  # one call at a time, from whichever thread
        self.daemon: AsyncDaemon | None = None
        self.pumps: set[asyncio.Task[None]] = set()
        self.closed = False
        self.wakeup: _Wakeup | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self.lock:
            if self.closed:
                coro.close()
                raise ConnectionLost(
                    "this sessiond client is closed; connect again with sessiond.client.connect()"
                )
            loop = self.runner.get_loop()
            in_main_thread = threading.current_thread() is threading.main_thread()
            if in_main_thread and self.wakeup is None:
                self.wakeup = _Wakeup(loop)
            previous_wakeup_fd = self.wakeup.arm() if in_main_thread and self.wakeup else None
            ctrl_c = _CtrlC.install(loop) if in_main_thread else None
            call: list[asyncio.Task[Any]] = []

            async def main() -> T:
                task = asyncio.current_task()
                assert task is not None
                call.append(task)
                if ctrl_c is not None:
                    if ctrl_c.pressed:
                        coro.close()
                        raise asyncio.CancelledError
                    ctrl_c.task = task
                return await coro

            try:
                result = self.runner.run(main())
            except asyncio.CancelledError:
                if ctrl_c is not None and ctrl_c.pressed:
                    raise KeyboardInterrupt from None
                raise
            except KeyboardInterrupt:
                if call and not call[0].done():
                    # Raised inside the loop (a SIGINT handler of the program's own, or Ctrl-C
                    # pressed twice): cancel the call now, so its cleanup still runs.
                    call[0].cancel()
                    loop.run_until_complete(asyncio.wait(call))
                else:
                    # Raised as the call ended: the loop still holds the callback that would
                    # have stopped it. Run it now, or it would stop the next call early.
                    loop.call_soon(loop.stop)
                    loop.run_forever()
                raise
            finally:
                if ctrl_c is not None:
                    ctrl_c.remove()
                if previous_wakeup_fd is not None:
                    signal.set_wakeup_fd(previous_wakeup_fd)
            if ctrl_c is not None and ctrl_c.pressed:
                raise KeyboardInterrupt  # pressed as the call ended; it ended, and Ctrl-C still stops
            return result

    def shutdown(self) -> None:
        """Close the open streams (cancelling their turns), the connection and the loop. Idempotent."""
        if not self.lock.acquire(timeout=CLEANUP_TIMEOUT):
            log.warning("a sessiond client was not closed: another thread is still using it")
            return
        try:
            if self.closed:
                return
            self.closed = True
            if events._get_running_loop() is None:
                self._shutdown()
            else:  # collected inside some other event loop, which must not be blocked by ours
                worker = threading.Thread(target=self._shutdown, name="sessiond-client-close")
                worker.start()
                worker.join()
        finally:
            self.lock.release()

    def _shutdown(self) -> None:
        try:
            self.runner.run(self._aclose())
        except Exception:
            log.exception("closing a sessiond client failed")
        finally:
            self.runner.close()
            if self.wakeup is not None:
                self.wakeup.close()

    async def _aclose(self) -> None:
        pumps = list(self.pumps)
        for pump in pumps:
            pump.cancel()
        if pumps:
            await asyncio.wait(pumps)
        if self.daemon is not None:
            await self.daemon.aclose()


class _CtrlC:
    """While a call runs, Ctrl-C cancels it, so its cleanup (telling the daemon to cancel
    the turn) runs before KeyboardInterrupt reaches the caller.

    asyncio.Runner does the same, but when Ctrl-C comes just as the call ends it raises
    KeyboardInterrupt inside the loop, where it can land in the connection's reader and
    lose the connection. This handler never raises inside the loop on the first press; a
    second press raises at once, to stop waiting for the cleanup. Installed only in the
    main thread over Python's default handler; a program's own handler is left alone.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.task: asyncio.Task[Any] | None = None
        self.pressed = 0

    @classmethod
    def install(cls, loop: asyncio.AbstractEventLoop) -> _CtrlC | None:
        """The handler, installed; None where it is not ours to install."""
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return None
        handler = cls(loop)
        try:
            signal.signal(signal.SIGINT, handler)
        except ValueError:  # an interpreter without signals in its main thread
            return None
        return handler

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.pressed += 1
        if self.pressed > 1:
            raise KeyboardInterrupt
        if self.task is not None and not self.task.done():
            self.task.cancel()
        # The select this handler interrupted would go back to sleep: make it return.
        self.loop.call_soon_threadsafe(lambda: None)

    def remove(self) -> None:
        if signal.getsignal(signal.SIGINT) is self:
            signal.signal(signal.SIGINT, signal.default_int_handler)


class _Wakeup:
    """Wakes the loop when a signal arrives, whichever thread the kernel gives it to.

    Only the main thread runs Python's signal handlers, and a signal delivered to
    another thread would leave it asleep in the loop's select: with this pair as the
    signal wakeup fd, the select returns and the handler runs.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.reading, self.writing = socket.socketpair()
        self.reading.setblocking(False)
        self.writing.setblocking(False)
        loop.add_reader(self.reading.fileno(), self._drain)

    def arm(self) -> int:
        """Make this the signal wakeup fd (main thread only); the previous one, to restore."""
        return signal.set_wakeup_fd(self.writing.fileno(), warn_on_full_buffer=False)

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            while self.reading.recv(4096):
                pass

    def close(self) -> None:
        self.reading.close()
        self.writing.close()


class _Client:
    """What every handle of one sync client shares. When the last handle is gone, the client closes."""

    def __init__(self, loop: _Loop) -> None:
        self.loop = loop
        self.close = weakref.finalize(self, loop.shutdown)


_TWINS: dict[type, type[_Twin[Any]]] = {}


def _twin_of(async_class: type) -> Callable[[type[_Twin[Any]]], Any]:
    def register(sync_class: type[_Twin[Any]]) -> type[_Twin[Any]]:
        _TWINS[async_class] = sync_class
        return sync_class

    return register


def _to_sync(client: _Client, value: Any) -> Any:
    twin_class = _TWINS.get(type(value))
    if twin_class is not None:
        return twin_class(client, value)
    if type(value) is list and value and type(value[0]) in _TWINS:
        return [_to_sync(client, item) for item in value]
    return value


def _refuse_in_loop(owner: str, sync_name: str, instead: str) -> None:
    if events._get_running_loop() is not None:
        raise SyncCallInEventLoop(
            f"{owner}.{sync_name}() blocks, and was called inside a running event loop, which it would "
            f"stall; in async code use the async client instead: `{instead}`"
        )


def twin(async_method: Callable[..., Any]) -> Callable[[F], F]:
    """Make the decorated signature call ``async_method`` of the same object on the client's loop."""
    async_name = async_method.__name__
    awaited = inspect.iscoroutinefunction(async_method)

    def decorate(sync_method: F) -> F:
        sync_name = sync_method.__name__

        @functools.wraps(sync_method)
        def call(self: _Twin[Any], /, *args: Any, **kwargs: Any) -> Any:
            if events._get_running_loop() is not None:
                owner = type(self).__name__
                instead = f"{owner.lower()}.{async_name}(...)"
                _refuse_in_loop(owner, sync_name, f"await {instead}" if awaited else instead)
            result = getattr(self._async, async_name)(*args, **kwargs)
            if awaited:
                result = self._client.loop.run(result)
            return _to_sync(self._client, result)

        call.__doc__ = sync_method.__doc__ or async_method.__doc__
        return cast(F, call)

    return decorate


class _Twin(Generic[A]):
    def __init__(self, client: _Client, target: A) -> None:
        self._client = client
        self._async = target

    def __repr__(self) -> str:
        return repr(self._async).replace("<Async", "<", 1)


# ---------------------------------------------------------------- streams


class _End:
    """What a pump answers when the stream is over."""


_END = _End()


async def _pump(stream: _AsyncStream, asks: asyncio.Queue[asyncio.Future[Event | _End]]) -> None:
    # A free function: holding the sync stream would keep its client from being collected.
    async with contextlib.aclosing(stream):
        while True:
            answer = await asks.get()
            try:
                item: Event | _End = await stream.__anext__()
            except StopAsyncIteration:
                item = _END
            except asyncio.CancelledError:
                answer.cancel()
                raise
            except Exception as e:
                if not answer.done():
                    answer.set_exception(e)
                return
            if not answer.done():
                answer.set_result(item)
            if item is _END:
                return


class _SyncStream(_Twin[S]):
    """Iterate with ``for``; leaving the loop early (or ``close()``) closes the stream."""

    def __init__(self, client: _Client, target: S) -> None:
        super().__init__(client, target)
        self._asks: asyncio.Queue[asyncio.Future[Event | _End]] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None
        self._closed = False

    def __iter__(self) -> Iterator[Event]:
        _refuse_in_loop(
            type(self).__name__, "__iter__", "async with ...astream(...) as stream: async for ..."
        )
        try:
            while not isinstance(item := self._client.loop.run(self._next()), _End):
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Close the stream; a turn still running is cancelled."""
        _refuse_in_loop(type(self).__name__, "close", "await stream.aclose()")
        self._closed = True
        if not self._client.loop.closed:
            self._client.loop.run(self._stop())

    def __enter__(self) -> Self:
        _refuse_in_loop(type(self).__name__, "__enter__", "async with ...")
        self._client.loop.run(self._async.__aenter__())
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def _next(self) -> Event | _End:
        if self._pump is None:
            if self._closed:
                return _END
            self._pump = asyncio.get_running_loop().create_task(_pump(self._async, self._asks))
            pumps = self._client.loop.pumps
            pumps.add(self._pump)
            self._pump.add_done_callback(pumps.discard)
        if self._pump.done():
            return _END
        answer: asyncio.Future[Event | _End] = asyncio.get_running_loop().create_future()
        self._asks.put_nowait(answer)
        try:
            return await answer
        except asyncio.CancelledError:
            # Ctrl-C: close the stream in its own task (cancelling the turn), then let it propagate.
            await self._stop()
            raise

    async def _stop(self) -> None:
        pump = self._pump
        if pump is None:
            await self._async.aclose()  # never iterated: it may still hold what __enter__ opened
        elif not pump.done():
            pump.cancel()
            await asyncio.wait([pump])


@_twin_of(AsyncEventStream)
class EventStream(_SyncStream[AsyncEventStream]):
    """Events as they happen, until closed; raises ``ConnectionLost`` when the daemon goes away."""


@_twin_of(AsyncTurnStream)
class TurnStream(_SyncStream[AsyncTurnStream]):
    """The events of one turn as they happen; ``reply`` once the loop has ended."""

    @property
    def session(self) -> Session:
        return cast(Session, _to_sync(self._client, self._async.session))

    @property
    def turn_id(self) -> str:
        return self._async.turn_id

    @property
    def reply(self) -> Reply | None:
        return self._async.reply


# ---------------------------------------------------------------- handles


@_twin_of(AsyncDaemon)
class Daemon(_Twin[AsyncDaemon]):
    """A connection to the daemon, from ``connect()``. Close it with ``close()`` or ``with``."""

    @property
    def socket(self) -> Path:
        return self._async.socket

    @property
    def server_info(self) -> dict[str, Any]:
        return self._async.server_info

    @property
    def closed(self) -> bool:
        return self._async.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @twin(AsyncDaemon.agent)
    def agent(
        self,
        name: str = "demo",
        *,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Agent: ...

    @twin(AsyncDaemon.agents)
    def agents(self) -> list[Agent]: ...

    @twin(AsyncDaemon.status)
    def status(self) -> DaemonStatus: ...

    @twin(AsyncDaemon.fleet)
    def fleet(self) -> Fleet: ...

    @twin(AsyncDaemon.sessions)
    def sessions(
        self,
        *,
        agent: str | None = None,
        status: SessionStatus | str | Iterable[SessionStatus | str] | None = None,
        include_closed: bool = False,
        **filters: Any,
    ) -> list[Session]: ...

    @twin(AsyncDaemon.session)
    def session(self, id: str) -> Session: ...

    @twin(AsyncDaemon.answer_permission)
    def answer_permission(self, permission: str, option_id: str | None) -> bool: ...

    @twin(AsyncDaemon.events)
    def events(
        self,
        *,
        since: int | None = None,
        sessions: Sequence[str] | None = None,
        agents: Sequence[str] | None = None,
        kinds: Sequence[EventKind | str] | None = None,
    ) -> EventStream: ...

    def close(self) -> None:
        """Cancel this client's open streams and turns, close the connection and the loop. Idempotent."""
        self._client.close()


@_twin_of(AsyncAgent)
class Agent(_Twin[AsyncAgent]):
    """An agent: its ``name`` and the last ``info`` the daemon sent about it."""

    @property
    def name(self) -> str:
        return self._async.name

    @property
    def info(self) -> AgentInfo:
        return self._async.info

    @twin(AsyncAgent.session)
    def session(
        self, root: StrPath | None = None, *, placement: str | None = None, title: str | None = None
    ) -> Session: ...

    @twin(AsyncAgent.sessions)
    def sessions(
        self,
        count: int,
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        title: str | None = None,
    ) -> list[Session]: ...

    @overload
    def batch(
        self,
        prompts: Iterable[str],
        root: StrPath | None = ...,
        *,
        placement: str | None = ...,
        max_concurrency: int | None = ...,
        suppress: Literal[False] = ...,
    ) -> list[Reply]: ...

    @overload
    def batch(
        self,
        prompts: Iterable[str],
        root: StrPath | None = ...,
        *,
        placement: str | None = ...,
        max_concurrency: int | None = ...,
        suppress: Literal[True],
    ) -> list[Reply | Exception]: ...

    @twin(AsyncAgent.abatch)
    def batch(
        self,
        prompts: Iterable[str],
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        max_concurrency: int | None = None,
        suppress: bool = False,
    ) -> list[Reply] | list[Reply | Exception]: ...

    @twin(AsyncAgent.aget)
    def get(self) -> AgentInfo: ...

    @twin(AsyncAgent.aremove)
    def remove(self) -> None: ...


@_twin_of(AsyncSession)
class Session(_Twin[AsyncSession]):
    """A session: its ``id`` and the last ``info`` the daemon sent about it."""

    @property
    def id(self) -> str:
        return self._async.id

    @property
    def info(self) -> SessionInfo:
        return self._async.info

    @twin(AsyncSession.asend)
    def send(self, prompt: str) -> Reply: ...

    @twin(AsyncSession.astream)
    def stream(self, prompt: str) -> TurnStream: ...

    @twin(AsyncSession.acancel)
    def cancel(self) -> int: ...

    @twin(AsyncSession.aclose)
    def close(self) -> SessionInfo: ...

    @twin(AsyncSession.aget)
    def get(self) -> SessionInfo: ...

    @twin(AsyncSession.atranscript)
    def transcript(self, offset: int | None = None, limit: int | None = None) -> Transcript: ...


def connect(
    socket: StrPath | None = None, *, start: bool = True, timeout: float = launch.START_TIMEOUT
) -> Daemon:
    """Connect to the daemon at ``socket`` (default: ``sessiond.protocol.paths.socket_path()``).

    When nothing accepts there and ``start`` is true, a daemon is started in
    the background and awaited for up to ``timeout`` seconds. Use it as
    ``with connect() as daemon:`` or call ``daemon.close()``.
    """
    _refuse_in_loop("sessiond.client", "connect", "async with sessiond.client.aconnect() as daemon: ...")
    loop = _Loop()
    try:
        loop.daemon = loop.run(_open_daemon(socket, start, timeout))
    except BaseException:
        loop.shutdown()
        raise
    return Daemon(_Client(loop), loop.daemon)
