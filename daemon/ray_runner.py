"""Agents whose process runs on a node of a Ray cluster (agent option `runner = "ray"`).

The daemon stays the one place that holds sessions, the event log and the clients; Ray holds the
agent's process. It is started inside an actor (`AgentActor`) that Ray places on a node with
the resources the agent asks for (`RaySettings`); ACP flows through the actor: the agent's stdout
comes back as a Ray streaming generator of byte chunks, what the daemon writes to the agent goes
in actor calls (batched, in order). To the ACP side it is one more `AgentProc` (`RayProc`).

A node that dies takes the actor with it: the stream ends, `wait()` answers with `lost` naming
the node, and the agent's running turns fail saying so, as with a crashed local agent; the next
turn starts a new actor wherever Ray finds room and restores its sessions (`session/resume` or
`session/load`) as eviction does.

A session's ACP commands run on the node (`NodeTerminals`); its ACP file reads and writes are
served by the daemon at the session's placement, so its root must be the same path on every node:
a filesystem the nodes share (docs/scale.md says what that means). The other honest case is a
worktree made on the node from a repository the session names (placements/repository.py): its
files are the node's alone, and everything done on them runs there (`RayMachine`). Only an agent
with runner `ray` imports this module, and with it Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal as signals
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

# Ray's own fatal-signal handler would print a stack trace on the SIGTERM that stops the daemon.
os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sessiond.daemon.agent_spawn import STDOUT_LIMIT, Spawned, ray_request, tree_rss
from sessiond.daemon.agent_types import AgentExited
from sessiond.daemon.child_env import child_environment
from sessiond.daemon.placements.base import Machine, MachineUnreachable, PlacementError
from sessiond.daemon.terminals import Terminal, Terminals
from sessiond.protocol.models import RaySettings

log = logging.getLogger("sessiond.ray")
T = TypeVar("T")

READ_SIZE = 1 << 16  # the most one chunk of the agent's stdout carries
# The daemon waits for its writes to the agent (drain) only past this many bytes in flight.
WRITE_HIGH_WATER = 1 << 20
NAMESPACE = "sessiond"
MEASURE_EVERY = 5.0  # seconds between readings of a Ray-run process's memory


# Threaded: the agent's stdout and its exit each hold a thread for the process's life, each command
# run on the node one for its own; writes and signals go on beside them.
@ray.remote(max_concurrency=64)  # type: ignore[call-overload]
class AgentActor:
    """One agent process on the node Ray placed this actor on."""

    def __init__(self, command: list[str], environment: dict[str, str], log_path: str) -> None:
        path = Path(log_path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            stderr = open(path, "ab")  # noqa: SIM115 (the process holds it open)
        except OSError:  # not shared with this node: a log of its own here
            path = Path("/tmp") / f"sessiond-agent-{os.getpid()}.log"
            stderr = open(path, "ab")  # noqa: SIM115
        stderr.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {command} (Ray)\n".encode())
        stderr.flush()
        self.log_path = str(path)
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment,
            start_new_session=True,
        )
        self._writing = threading.Lock()

    def where(self) -> dict[str, Any]:
        context = ray.get_runtime_context()
        return {
            "node": context.get_node_id(),
            "address": ray.util.get_node_ip_address(),
            "pid": self.proc.pid,
            "log": self.log_path,
        }

    def read(self) -> Any:
        """The agent's stdout, chunk by chunk as it comes, until it closes (a streaming generator)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while chunk := os.read(fd, READ_SIZE):
            yield chunk

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        with self._writing:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError), self._writing:
                self.proc.stdin.close()

    def signal(self, sig: int) -> None:
        self.signal_group(self.proc.pid, sig)

    def signal_group(self, pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)

    def wait(self) -> int:
        return self.proc.wait()

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def call(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """A function of ours run on this node (`RayMachine.call`, while this actor lives)."""
        return function(*args)

    def memory(self) -> int | None:
        return tree_rss(self.proc.pid)

    def run(self, argv: list[str], environment: dict[str, str], cwd: str) -> Any:
        """A command on this node, for a terminal of the agent's: ("pid", n), then ("out", bytes) as
        its output comes (stderr merged), then ("exit", returncode); or ("error", what) if it could
        not start. A streaming generator; the command is in a process group of its own."""
        try:
            command = subprocess.Popen(
                argv,
                cwd=cwd,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except FileNotFoundError:
            yield ("error", f"command not found: {argv[0]!r} (on {ray.util.get_node_ip_address()})")
            return
        except PermissionError:
            yield ("error", f"command {argv[0]!r} is not executable")
            return
        yield ("pid", command.pid)
        assert command.stdout is not None
        fd = command.stdout.fileno()
        while chunk := os.read(fd, READ_SIZE):
            yield ("out", chunk)
        command.stdout.close()
        yield ("exit", command.wait())


class _ActorTransport(asyncio.WriteTransport):
    """What the daemon writes to the agent, sent to its actor in order and batched while a call is
    out; the writer pauses (drain waits) past WRITE_HIGH_WATER bytes in flight. Under an asyncio
    StreamWriter, which is what the ACP SDK writes to."""

    def __init__(self, actor: Any, protocol: asyncio.StreamReaderProtocol) -> None:
        super().__init__()
        self._actor = actor
        self._protocol = protocol
        self._buffer: list[bytes] = []
        self._in_flight = 0  # bytes written and not yet delivered
        self._paused = False
        self._closing = False
        self._sender: asyncio.Future[None] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            raise ConnectionResetError("the agent's stdin is closed")
        self._buffer.append(bytes(data))
        self._in_flight += len(data)
        if self._in_flight > WRITE_HIGH_WATER and not self._paused:
            self._paused = True
            self._protocol.pause_writing()
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        while self._buffer:
            batch, self._buffer = b"".join(self._buffer), []
            try:
                await self._actor.write.remote(batch)
            except RayError:
                self._buffer.clear()  # the actor is gone: the end of its stdout says so
            self._in_flight -= len(batch)
            if self._paused and self._in_flight <= WRITE_HIGH_WATER // 2:
                self._paused = False
                self._protocol.resume_writing()
        if self._closing:
            with contextlib.suppress(RayError):
                await self._actor.close_stdin.remote()

    def get_write_buffer_size(self) -> int:
        return self._in_flight

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._send())

    def abort(self) -> None:
        self._buffer.clear()
        self.close()


class _NodeOutput:
    """A command's output on its node, read like a local process's stdout (for `Terminals`)."""

    def __init__(self, stream: Any, node: str | None) -> None:
        self._stream = stream
        self._node = node
        self.returncode: int | None = None
        self.ended = asyncio.Event()

    async def read(self, _n: int) -> bytes:
        while not self.ended.is_set():
            try:
                kind, value = await (await self._stream.__anext__())
            except StopAsyncIteration:
                break
            except RayError as exc:
                self.returncode = 255
                self.ended.set()
                lost = f"{self._node} was lost while the command ran: {type(exc).__name__}"
                return f"\n[sessiond: {lost}]\n".encode()
            if kind == "out":
                return bytes(value)
            if kind == "exit":
                self.returncode = int(value)
        self.ended.set()
        return b""


class _NodeCommand:
    """Looks to `Terminals` like an asyncio subprocess: `pid`, `stdout.read`, `wait`."""

    def __init__(self, pid: int, stdout: _NodeOutput) -> None:
        self.pid = pid
        self.stdout = stdout

    async def wait(self) -> int:
        await self.stdout.ended.wait()
        return self.stdout.returncode if self.stdout.returncode is not None else 255


class NodeTerminals(Terminals):
    """A session's terminals whose commands run on the node of its agent's actor (the bookkeeping is
    `Terminals`'; only starting and killing a command differ)."""

    def __init__(self, actor: Any, node: str | None) -> None:
        super().__init__()
        self._actor = actor
        self._node = node

    async def create(
        self, command: str, args: list[str], env: dict[str, str], cwd: str, limit: int | None
    ) -> str:
        stream = self._actor.run.options(num_returns="streaming").remote(
            [command, *args], child_environment(env), cwd
        )
        try:
            kind, value = await (await stream.__anext__())
        except (RayError, StopAsyncIteration) as exc:
            raise PlacementError(f"cannot run {command!r} on {self._node}: {exc}") from None
        if kind == "error":
            raise PlacementError(str(value))
        return self._adopt("ray-term", _NodeCommand(int(value), _NodeOutput(stream, self._node)), limit)

    # `Terminals._kill` is a staticmethod (a local kill needs nothing else); this one needs the actor.
    async def _kill(self, terminal: Terminal) -> None:  # type: ignore[override]
        if not terminal.exited.is_set():
            with contextlib.suppress(RayError):
                await self._actor.signal_group.remote(terminal.process.pid, signals.SIGKILL)
        if terminal.reader is not None:
            await asyncio.gather(terminal.reader, return_exceptions=True)


# A function of ours run on a chosen node, in a worker of its own (no CPU taken from the node's
# agents): what a worktree made there from a repository needs done on its files.
@ray.remote(num_cpus=0, max_retries=0)
def _on_node(function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return function(*args)


class RayMachine:
    """A node of the cluster, as a worktree made there uses it. A call goes through the agent's
    actor on the node while it lives (an actor call: a millisecond or two), else in a task pinned
    to the node by its id (several), so that the node is reached after the process that ran there
    is gone: to take a session's work along, to remove its worktree."""

    def __init__(self, node_id: str, name: str, actor: Any = None) -> None:
        self.id = node_id
        self.name: str | None = name
        self._actor = actor

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        try:
            if self._actor is not None:
                try:
                    return await self._actor.call.remote(function, args)
                except RayActorError:
                    self._actor = None  # its process ended (or its node went): the node itself, then
            there = NodeAffinitySchedulingStrategy(self.id, soft=False)
            return await _on_node.options(scheduling_strategy=there).remote(function, args)
        except RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, PlacementError):
                raise PlacementError(str(cause)) from None
            raise PlacementError(f"{function.__name__} failed on {self.name}: {cause!r}") from None
        except RayError as exc:
            raise MachineUnreachable(f"{self.name} cannot be reached ({type(exc).__name__})") from None


class RayProc:
    """An agent process in an `AgentActor`, as the ACP side sees a process."""

    def __init__(self, actor: Any, where: dict[str, Any]) -> None:
        self._actor = actor
        self.pid: int | None = int(where["pid"])
        self.node: str | None = f"Ray node {str(where['node'])[:12]} ({where['address']})"
        self._machine = RayMachine(str(where["node"]), self.node, actor)
        self.lost: str | None = None
        self.stdout = asyncio.StreamReader(limit=STDOUT_LIMIT)
        protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())
        transport = _ActorTransport(actor, protocol)
        protocol.connection_made(transport)
        self.stdin = asyncio.StreamWriter(transport, protocol, None, asyncio.get_running_loop())
        self._pump = asyncio.ensure_future(self._read())
        self._signals: set[asyncio.Future[None]] = set()
        self._roots_seen: set[str] = set()  # roots found on its node (asked once each)
        self._memory: int | None = None
        self._measuring = asyncio.ensure_future(self._measure())

    async def _measure(self) -> None:
        """Its memory, as its node sees it, every MEASURE_EVERY seconds while it runs."""
        while self.lost is None and not self.stdout.at_eof():
            # A reading that fails is tried again at the next (a node slow to answer its first kept
            # it unknown for good); a process lost ends the readings.
            with contextlib.suppress(RayError):
                self._memory = await self._actor.memory.remote()
            await asyncio.sleep(MEASURE_EVERY)

    def memory(self) -> int | None:
        return self._memory

    def terminals(self) -> Terminals:
        return NodeTerminals(self._actor, self.node)

    def machine(self) -> Machine:
        return self._machine

    async def root_problem(self, root: str) -> str | None:
        if root in self._roots_seen:
            return None
        try:
            there = bool(await self._actor.is_dir.remote(root))
        except RayError:
            return None  # the actor is gone: the session call that follows says so
        if not there:
            return (
                f"the session's root {root} is not on {self.node}, where the agent's process runs: "
                f"a Ray-run agent's sessions need their roots at the same path on every node (a "
                f"filesystem the nodes share; see docs/scale.md)"
            )
        self._roots_seen.add(root)
        return None

    async def _read(self) -> None:
        try:
            async for ref in self._actor.read.options(num_returns="streaming").remote():
                self.stdout.feed_data(await ref)
        except RayError as exc:
            self._lose(exc)
        finally:
            self.stdout.feed_eof()

    def _lose(self, exc: BaseException) -> None:
        if self.lost is None:
            self.lost = (
                f"was lost with {self.node}, where it ran (the node or its actor died: {type(exc).__name__})"
            )

    async def wait(self) -> int:
        try:
            code = int(await self._actor.wait.remote())
        except RayError as exc:
            self._lose(exc)
            return -signals.SIGKILL
        # The process ended: its actor goes too, and with it what it holds of its node's resources.
        with contextlib.suppress(RayError):
            ray.kill(self._actor)
        return code

    def signal(self, sig: int) -> None:
        async def send() -> None:
            with contextlib.suppress(RayError):
                await self._actor.signal.remote(sig)
            if sig == signals.SIGKILL:
                with contextlib.suppress(RayError):
                    ray.kill(self._actor)

        sending = asyncio.ensure_future(send())
        self._signals.add(sending)
        sending.add_done_callback(self._signals.discard)


_connected = threading.Lock()


def _connect(address: str | None) -> None:
    """Join the cluster once per daemon (RAY_ADDRESS, else `address`, else 'auto')."""
    with _connected:
        if ray.is_initialized():
            return
        ray.init(
            address=address or os.environ.get("RAY_ADDRESS") or "auto",
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )


async def spawn_on_ray(
    name: str, command: list[str], environment: dict[str, str], log_path: Path, settings: RaySettings
) -> Spawned:
    """Start the agent's process in an actor on a node with what it asks for; raises AgentExited
    with a sentence when the cluster cannot be reached, no node has room in time, or the process
    does not start there."""
    try:
        await asyncio.to_thread(_connect, settings.address)
    except Exception as exc:
        cluster = settings.address or os.environ.get("RAY_ADDRESS") or "auto"
        raise AgentExited(
            f"agent {name!r} runs on Ray, but the cluster at {cluster} cannot be reached ({exc}); "
            f"start it (ray start --head) or fix the agent's ray.address"
        ) from None
    options: dict[str, Any] = {"num_cpus": settings.num_cpus, "resources": dict(settings.resources)}
    if settings.memory is not None:
        options["memory"] = settings.memory
    actor = AgentActor.options(**options).remote(command, environment, str(log_path))  # type: ignore[attr-defined]
    try:
        where = await asyncio.wait_for(actor.where.remote(), settings.start_timeout)
    except TimeoutError:
        ray.kill(actor)
        raise AgentExited(
            f"no node of the Ray cluster had room for agent {name!r} ({ray_request(settings)}) within "
            f"{settings.start_timeout:g} s; add a node with these resources, or change the agent's "
            f"ray settings"
        ) from None
    except RayError as exc:
        raise AgentExited(f"could not start agent {name!r} with {command!r} on Ray: {exc}") from None
    log.info("agent %r runs on Ray node %s (%s), pid %s", name, where["node"], where["address"], where["pid"])

    return Spawned(RayProc(actor, where), environment, time.time())
