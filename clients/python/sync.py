"""Blocking twins of the async client: ``connect`` → ``Daemon`` → ``Agent`` → ``Session``.

Nothing here talks to the daemon or holds logic of its own. Each sync client
owns one private ``asyncio.Runner`` and, on that loop, one ``AsyncDaemon``.
Every method below is a signature under ``@twin(AsyncX.amethod)``: the
decorator runs the async method on the client's loop, hands it the async
handles behind the sync ones it is given (``Session`` → ``AsyncSession``), and
wraps the handles it returns (``AsyncSession`` → ``Session``). A test holds the
twins to the same names and signatures, so they cannot drift apart.

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
import sys
import threading
import weakref
from asyncio import events
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
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
    AsyncSideChat,
    AsyncTurnStream,
    BatchProgress,
    Reply,
    StrPath,
    _AsyncStream,
    _open_daemon,
    outcome_of,
)
from sessiond.client.errors import ConnectionLost, SyncCallInEventLoop
from sessiond.protocol.models import (
    AgentInfo,
    DaemonStatus,
    Event,
    EventKind,
    Fleet,
    MergeEntry,
    PermissionRequestParams,
    PruneResult,
    RunInfo,
    RunOutcome,
    SessionControls,
    SessionInfo,
    SessionStatus,
    Snapshot,
    StopResult,
    TaskInfo,
    ThreadReport,
    Transcript,
    TreeNode,
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
        # How the client's run ended, when it was closed by hand; None: closed when forgotten.
        self.outcome: RunOutcome | None = None

    def run(self, work: Coroutine[Any, Any, T] | Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run a call on the loop: a coroutine, or better a function that makes one, so that a
        Ctrl-C landing before the call starts leaves no coroutine behind that was never awaited."""
        made: list[Coroutine[Any, Any, T]] = [work] if isinstance(work, Coroutine) else []
        started = abandoned = False
        try:
            with self.lock:
                if self.closed:
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
                    nonlocal started
                    task = asyncio.current_task()
                    assert task is not None
                    call.append(task)
                    if abandoned or (ctrl_c is not None and ctrl_c.pressed):
                        raise asyncio.CancelledError
                    if not made:
                        assert not isinstance(work, Coroutine)
                        made.append(work())
                    started = True
                    if ctrl_c is not None:
                        ctrl_c.task = task
                    return await made[0]

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
                        # Raised as the call ended (or before it began): the loop still holds the
                        # callback that would have stopped it. Run it now, or it would stop the
                        # next call early; a call that had not begun ends at once.
                        abandoned = True
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
        finally:
            if not started and made:
                made[0].close()

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
            await self.daemon.aclose(self.outcome or _outcome_at_exit())


def _outcome_at_exit() -> RunOutcome:
    """The outcome of a run whose client was never closed: at interpreter exit after an
    uncaught exception (``sys.last_value``), failed, or stopped after Ctrl-C; else completed."""
    error = getattr(sys, "last_value", None)
    return outcome_of(error) if isinstance(error, BaseException) else "completed"


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


def _to_async(value: Any) -> Any:
    """An argument as the async method takes it: sync handles (``Session``, ...) become theirs."""
    if isinstance(value, _Twin):
        return value._async
    if isinstance(value, list | tuple) and any(isinstance(item, _Twin) for item in value):
        return [_to_async(item) for item in value]
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
            args = tuple(_to_async(arg) for arg in args)
            kwargs = {key: _to_async(value) for key, value in kwargs.items()}
            method = getattr(self._async, async_name)
            if awaited:
                result = self._client.loop.run(functools.partial(method, *args, **kwargs))
            else:
                result = method(*args, **kwargs)
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
            while not isinstance(item := self._client.loop.run(self._next), _End):
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Close the stream; a turn still running is cancelled. Closed already, it does nothing:
        an iterator left unfinished is closed again when collected, perhaps inside a running loop."""
        if self._closed:
            return
        _refuse_in_loop(type(self).__name__, "close", "await stream.aclose()")
        self._closed = True
        if not self._client.loop.closed:
            self._client.loop.run(self._stop)

    def __enter__(self) -> Self:
        _refuse_in_loop(type(self).__name__, "__enter__", "async with ...")
        self._client.loop.run(self._async.__aenter__)
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
    """Events as they happen, until closed; raises ``ConnectionLost`` when the daemon goes away.
    One from ``trace()`` ends by itself at the head."""

    @property
    def head(self) -> int | None:
        return self._async.head

    @property
    def snapshot(self) -> Snapshot | None:
        return self._async.snapshot


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

    @property
    def run(self) -> RunInfo | None:
        return self._async.run

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(outcome_of(error))

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

    @twin(AsyncDaemon.stop)
    def stop(self) -> StopResult: ...

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

    @twin(AsyncDaemon.permissions)
    def permissions(self, session: str | None = None) -> list[PermissionRequestParams]: ...

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
        snapshot: bool = False,
    ) -> EventStream: ...

    @twin(AsyncDaemon.trace)
    def trace(
        self,
        *,
        since: int = 0,
        sessions: Sequence[str] | None = None,
        agents: Sequence[str] | None = None,
        kinds: Sequence[EventKind | str] | None = None,
        run: str | None = None,
        follow: bool = False,
    ) -> EventStream: ...

    @twin(AsyncDaemon.declare_run)
    def declare_run(
        self, name: str, *, argv: Sequence[str] | None = None, cwd: StrPath | None = None
    ) -> RunInfo: ...

    @twin(AsyncDaemon.end_run)
    def end_run(self, outcome: RunOutcome = "completed") -> RunInfo: ...

    @twin(AsyncDaemon.prune)
    def prune(self, closed_before: datetime | timedelta, *, dry_run: bool = False) -> PruneResult: ...

    @twin(AsyncDaemon.runs)
    def runs(self) -> list[RunInfo]: ...

    @twin(AsyncDaemon.get_run)
    def get_run(self, id: str) -> RunInfo: ...

    @twin(AsyncDaemon.merges)
    def merges(self) -> list[MergeEntry]: ...

    @twin(AsyncDaemon.tasks)
    def tasks(
        self, *, agent: str | None = None, status: str | Iterable[str] | None = None
    ) -> list[TaskInfo]: ...

    @twin(AsyncDaemon.suggest_task)
    def suggest_task(
        self,
        title: str,
        prompt: str,
        *,
        agent: str | None = None,
        why: str | None = None,
        placement: str | None = None,
        root: StrPath | None = None,
        from_session: Session | str | None = None,
    ) -> TaskInfo: ...

    @twin(AsyncDaemon.accept_task)
    def accept_task(self, task: str) -> TaskInfo: ...

    @twin(AsyncDaemon.dismiss_task)
    def dismiss_task(self, task: str, reason: str) -> TaskInfo: ...

    @twin(AsyncDaemon.broadcast)
    def broadcast(
        self,
        prompt: str,
        *,
        sessions: Iterable[Session | str] | None = None,
        threads_of: Session | str | None = None,
    ) -> list[str]: ...

    @twin(AsyncDaemon.wait_threads)
    def wait_threads(
        self, threads: Iterable[Session | str], *, timeout: float | None = None
    ) -> list[ThreadReport]: ...

    def close(self, outcome: RunOutcome | None = None) -> None:
        """Cancel this client's open streams and turns, end its run (with ``outcome``, default
        ``completed``), close the connection and the loop. Idempotent."""
        if self._client.loop.outcome is None:
            self._client.loop.outcome = outcome or "completed"
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
        self,
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        title: str | None = None,
        repository: str | None = None,
    ) -> Session: ...

    @twin(AsyncAgent.sessions)
    def sessions(
        self,
        count: int,
        root: StrPath | None = None,
        *,
        placement: str | None = None,
        title: str | None = None,
        repository: str | None = None,
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
        on_progress: Callable[[BatchProgress], object] | None = ...,
        on_reply: Callable[[int, Reply | Exception], object] | None = ...,
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
        on_progress: Callable[[BatchProgress], object] | None = ...,
        on_reply: Callable[[int, Reply | Exception], object] | None = ...,
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
        on_progress: Callable[[BatchProgress], object] | None = None,
        on_reply: Callable[[int, Reply | Exception], object] | None = None,
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
    def cancel(self, reason: str | None = None) -> int: ...

    @twin(AsyncSession.aclose)
    def close(self) -> SessionInfo: ...

    @twin(AsyncSession.aget)
    def get(self) -> SessionInfo: ...

    @twin(AsyncSession.areopen)
    def reopen(self) -> SessionInfo: ...

    @twin(AsyncSession.arename)
    def rename(self, title: str) -> SessionInfo: ...

    @twin(AsyncSession.atranscript)
    def transcript(self, offset: int | None = None, limit: int | None = None) -> Transcript: ...

    @twin(AsyncSession.acontrols)
    def controls(self) -> SessionControls: ...

    @twin(AsyncSession.aset_mode)
    def set_mode(self, mode: str) -> SessionControls: ...

    @twin(AsyncSession.aset_option)
    def set_option(self, config_id: str, value: str | bool) -> SessionControls: ...

    @twin(AsyncSession.aside)
    def side(self, question: str | None = None, *, writable: bool = False) -> SideChat: ...

    @twin(AsyncSession.atree)
    def tree(self) -> TreeNode: ...

    @twin(AsyncSession.athread)
    def thread(self, prompt: str, *, placement: str | None = None, title: str | None = None) -> Session: ...

    @twin(AsyncSession.areport)
    def report(self) -> ThreadReport: ...

    @twin(AsyncSession.amerge)
    def merge(
        self,
        *,
        strategy: Literal["merge", "rebase"] = "merge",
        gate: str | None = None,
        keep: bool = False,
        base_branch: str | None = None,
        hand_back: bool = False,
        wait: bool = True,
        on_step: Callable[[Event], object] | None = None,
    ) -> MergeEntry: ...


@_twin_of(AsyncSideChat)
class SideChat(Session):
    """A side chat beside a session: a session of its own, with the answer to its question."""

    @property
    def reply(self) -> Reply | None:
        return cast(AsyncSideChat, self._async).reply

    @property
    def forked(self) -> bool:
        return cast(AsyncSideChat, self._async).forked


def connect(
    socket: StrPath | None = None,
    *,
    start: bool = True,
    timeout: float = launch.START_TIMEOUT,
    run: str | None = None,
) -> Daemon:
    """Connect to the daemon at ``socket`` (default: ``sessiond.protocol.paths.socket_path()``).

    When nothing accepts there and ``start`` is true, a daemon is started in
    the background and awaited for up to ``timeout`` seconds. Use it as
    ``with connect() as daemon:`` or call ``daemon.close()``.

    With ``run="name"`` the connection declares a run (the command line is
    ``sys.argv``, the directory the current one): every session it opens
    carries the run, and closing the client ends it: ``completed`` when the
    ``with`` block ends normally (or on ``close()``), ``failed`` when an
    exception leaves it, ``stopped`` on Ctrl-C (KeyboardInterrupt).
    """
    _refuse_in_loop("sessiond.client", "connect", "async with sessiond.client.aconnect() as daemon: ...")
    loop = _Loop()
    try:
        loop.daemon = loop.run(functools.partial(_open_daemon, socket, start, timeout, run))
    except BaseException:
        loop.shutdown()
        raise
    return Daemon(_Client(loop), loop.daemon)
