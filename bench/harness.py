"""What tests and benchmarks need: a real daemon of their own, its memory, and a table."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path


def temporary_files_in(folder: Path) -> dict[str, str]:
    """The environment that keeps an agent's temporary files in `folder` (the caller makes it, and
    removes it): opencode (a bun binary) leaves a 5.5 MB library in TMPDIR at each start (381 had
    gathered in /tmp here), and claude-agent-acp a folder per project in /tmp unless told."""
    return {"TMPDIR": str(folder), "CLAUDE_CODE_TMPDIR": str(folder)}


@contextlib.contextmanager
def ray_files_in_scratch() -> Iterator[None]:
    """Ray's session files (sockets, logs) in a scratch folder, removed at the end: Ray's default,
    /tmp/ray, keeps every run's (64 had gathered here). Short, under /tmp: its sockets are in it."""
    folder = scratch("sdray-")
    previous = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = previous
        shutil.rmtree(folder, ignore_errors=True)


class Daemon:
    """A real daemon process in a SESSIOND_HOME of its own."""

    # How Python is asked to run it (a test may run it under a wrapper of its own, with `-c`).
    python_args: tuple[str, ...] = ("-m", "sessiond.daemon")

    def __init__(
        self, home: Path | None = None, *, extra_args: tuple[str, ...] = (), code: Path | None = None
    ) -> None:
        # Short, under /tmp: a unix socket path must stay under 108 bytes. A home made here goes
        # when this process exits, not at stop(): a test may start another daemon on it first.
        self.home = home or scratch("sd-", until_exit=True)
        self.socket = self.home / "run" / "sessiond.sock"
        self.extra_args = extra_args
        # A folder holding another `sessiond` package (another revision's), run instead of this one.
        self.code = code
        self.stderr: list[str] = []
        self._said = threading.Condition()  # notified with each line read from its stderr
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        env = {**os.environ, "SESSIOND_HOME": str(self.home), "SESSIOND_SOCKET": str(self.socket)}
        env.update(temporary_files_in(self.home / "tmp"))  # (the agents', gone with the home)
        if self.code is not None:  # (found before the editable install, which Python asks last)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.code), env.get("PYTHONPATH")]))
        return env

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float = 30) -> Daemon:
        """Start and wait until it says it serves (its own line on stderr, not a sleep)."""
        (self.home / "tmp").mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            [sys.executable, *self.python_args, "--socket", str(self.socket), *self.extra_args],
            env=self.env,
            stderr=subprocess.PIPE,
        )
        self.process = process
        ready = threading.Event()

        def drain() -> None:
            assert process.stderr is not None
            for raw in process.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                with self._said:
                    self.stderr.append(line)
                    self._said.notify_all()
                if "serving on" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(timeout) or process.poll() is not None:
            process.kill()
            raise RuntimeError("the daemon did not start:\n" + "\n".join(self.stderr))
        return self

    def wait_for_line(self, contains: str, timeout: float = 30) -> str:
        """The first line of its stderr holding `contains`, waited for: a line the daemon wrote
        before it answered may still be on its way through the pipe when the answer is read."""
        with self._said:
            found = self._said.wait_for(
                lambda: next((line for line in self.stderr if contains in line), None), timeout
            )
        if found is None:
            raise AssertionError(f"the daemon wrote no line with {contains!r} in {timeout:g} s")
        return found

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Signal it and wait for it to exit; its exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)

    def tcp_address(self) -> tuple[str, int]:
        """Where a daemon started with --tcp listens (the address file it writes)."""
        host, _, port = (self.home / "state" / "tcp-address").read_text().strip().rpartition(":")
        return host, int(port)

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def children(self) -> list[int]:
        return children(self.pid)


@contextlib.contextmanager
def checked(daemon: Daemon) -> Iterator[Daemon]:
    """For a test: start `daemon`; at the end stop it, show its stderr with the test's report,
    require a clean exit and remove its home."""
    daemon.start()
    yield daemon
    code = daemon.stop()
    print("\n".join(["--- daemon stderr", *daemon.stderr]))
    assert code == 0, f"the daemon exited with {code}"
    shutil.rmtree(daemon.home, ignore_errors=True)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has had so far, all its threads (the scheduler's count, in ns)."""
    return scheduled(pid)[0]


def scheduled(pid: int) -> tuple[float, float]:
    """Seconds a process has run so far, and seconds it was ready to run but waited for a core
    (all its threads; the scheduler's counts, /proc/PID/task/*/schedstat)."""
    ran = waited = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            fields = (task / "schedstat").read_text().split()
            ran += int(fields[0])
            waited += int(fields[1])
    return ran / 1e9, waited / 1e9


async def settled(pid: int, *, window: float = 0.2, quiet: float = 0.02, timeout: float = 20.0) -> None:
    """Until the process takes under `quiet` of a core over `window` seconds: a fresh daemon's first
    turn sets off loads that go on after its answer (the MCP SDK with the daemon's MCP endpoint, ~1 s
    of CPU), which a figure of steady work must not count. Gives up after `timeout`, saying so."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    before = cpu_seconds(pid)
    while loop.time() < deadline:
        await asyncio.sleep(window)
        now = cpu_seconds(pid)
        if now - before < quiet * window:
            return
        before = now
    print(f"bench: process {pid} was still busy after {timeout:g} s; measuring anyway", file=sys.stderr)


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    """A process's children, theirs and so on (none for a process gone meanwhile)."""
    try:
        direct = children(pid)
    except OSError:
        return []
    return [tree_pid for child in direct for tree_pid in (child, *descendants(child))]


def tree_rss_kib(pid: int) -> int:
    """The resident memory of a process and all its descendants (those gone meanwhile count 0)."""
    total = 0
    for member in (pid, *descendants(pid)):
        with contextlib.suppress(OSError, RuntimeError):
            total += rss_kib(member)
    return total


# Memory-backed files where the machine has them: the demo agent writes a file per session at each
# save, and on this machine's disk its CPU per turn swung 0.7-1.8 ms from run to run with the
# filesystem's other work, and a ratio against it with it (0.97-2.09x for the same daemon, where
# it held at 1.29-1.43x on tmpfs). For the rows that weigh the daemon's CPU against the agent's.
IN_MEMORY = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def scratch(prefix: str, *, in_memory: bool = False, until_exit: bool = False) -> Path:
    """A fresh directory: on tmpfs with `in_memory` where there is one; removed when this
    process exits with `until_exit` (else it is the caller's to remove)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=IN_MEMORY if in_memory else "/tmp"))
    if until_exit:
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@contextlib.contextmanager
def daemon(*extra_args: str, in_memory: bool = False, code: Path | None = None) -> Iterator[Daemon]:
    """A daemon in a fresh SESSIOND_HOME (on tmpfs with `in_memory`), stopped with SIGTERM at the end;
    `code`: the folder of another `sessiond` package to run (`Daemon.code`)."""
    home = scratch("sd-", in_memory=True) if in_memory else None
    running = Daemon(home, extra_args=extra_args, code=code).start()
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(running.home, ignore_errors=True)


def table(title: str, rows: list[tuple[str, str, str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [title, "-" * len(title)]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines)
