"""Start-up and scale: spawn → first answer, and what grows with the number of sessions.

Spawn → first answer for the daemon (`initialize` over its socket), the editor's relay
(`sessiond stdio` with and without a daemon running) and the CLI (`ls`, `status`, `send`), each
against `python -c pass` (and the daemon also against `python -c "import pygls.lsp.server"`, its
floor) measured in the same rounds, alternating, medians. Then a page of `session/list`, turns,
and a restart's first answer beside 1,000 / 10,000 / 100,000 idle sessions: the store is seeded
directly (one session opened through the API, copied in SQL), every figure is measured through a
real daemon over raw JSON-RPC, and each size is reported against the smallest.

python -m bench.startup [--rounds 5] [--sizes 1000,10000,100000] [--turns 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.harness import Daemon, table

Row = tuple[str, str, str]


def env_for(home: Path) -> dict[str, str]:
    # As installed: bytecode written on the first run and read after (the warm-up writes it).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "SESSIOND_HOME": str(home), "SESSIOND_SOCKET": str(home / "run" / "sessiond.sock")}


def _home() -> Path:
    return Path(tempfile.mkdtemp(prefix="sd-st-", dir="/tmp"))


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}


def _read_message(read: Callable[[int], bytes]) -> dict[str, Any]:
    header = b""
    while b"\r\n\r\n" not in header:
        chunk = read(1)
        if not chunk:
            raise EOFError("closed before an answer")
        header += chunk
    length = next(
        int(line.split(b":")[1])
        for line in header.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    body = b""
    while len(body) < length:
        chunk = read(length - len(body))
        if not chunk:
            raise EOFError("closed mid-answer")
        body += chunk
    return json.loads(body)  # type: ignore[no-any-return]


def wall_of(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _stop_pid_of(socket_path: Path) -> None:
    """Stop the daemon holding `socket_path` (its pid is in the lock file), and wait until it has."""
    lock = Path(f"{socket_path}.lock")
    with contextlib.suppress(OSError, ValueError):
        pid = int(lock.read_text().strip())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)


def daemon_first_answer(home: Path) -> tuple[float, float]:
    """Spawn a daemon; the time until its `initialize` answer (connecting as soon as it can),
    and until its answer to the request after it (`daemon/status`: the daemon built)."""
    sock_path = home / "run" / "sessiond.sock"
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "sessiond.daemon", "--socket", str(sock_path)],
        env=env_for(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(str(sock_path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                conn.close()
                if process.poll() is not None:
                    raise RuntimeError(f"the daemon exited with {process.returncode}") from None
                time.sleep(0.002)
        with conn:
            conn.sendall(_frame(INITIALIZE))
            answer = _read_message(conn.recv)
            elapsed = time.perf_counter() - started
            assert "result" in answer, answer
            conn.sendall(_frame({"jsonrpc": "2.0", "id": 2, "method": "daemon/status", "params": {}}))
            while "id" not in (status := _read_message(conn.recv)) or status.get("method"):
                pass
            built = time.perf_counter() - started
            assert "result" in status, status
        return elapsed, built
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def relay_first_answer(home: Path) -> float:
    """Spawn `sessiond stdio` as an editor does; the time until its `initialize` answer."""
    sock_path = home / "run" / "sessiond.sock"
    started = time.perf_counter()
    relay = subprocess.Popen(
        [sys.executable, "-m", "sessiond.client", "--socket", str(sock_path), "stdio"],
        env=env_for(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert relay.stdin is not None
    assert relay.stdout is not None
    relay.stdin.write(_frame(INITIALIZE))
    relay.stdin.flush()
    answer = _read_message(relay.stdout.read)
    elapsed = time.perf_counter() - started
    relay.stdin.close()
    relay.wait(60)
    assert "result" in answer, answer
    return elapsed


def daemon_first_turn(home: Path) -> tuple[float, float]:
    """A fresh daemon, serving: its first demo turn, from the prompt to the answer (the agent's
    process started, the ACP SDK and the MCP endpoint brought up on the way); and the longest
    another client waited meanwhile for `fleet/summary`, asked again 10 ms after each answer."""
    from sessiond.client import aconnect

    running = Daemon(home=home).start()

    async def turn() -> tuple[float, float]:
        async with (
            aconnect(running.socket, start=False) as client,
            aconnect(running.socket, start=False) as other,
        ):
            session = await (await client.agent("demo")).session(home)
            await other.fleet()
            waits: list[float] = []
            answered = asyncio.Event()

            async def ask_on() -> None:
                while not answered.is_set():
                    asked = time.perf_counter()
                    await other.fleet()
                    waits.append(time.perf_counter() - asked)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(answered.wait(), 0.01)

            asking = asyncio.ensure_future(ask_on())
            started = time.perf_counter()
            await session.asend("say hello")
            took = time.perf_counter() - started
            answered.set()
            await asking
            return took, max(waits)

    try:
        return asyncio.run(turn())
    finally:
        running.stop()


def agent_first_turn(home: Path) -> float:
    """The demo agent alone, spoken to straight over ACP: spawn, initialize, one session's turn."""
    from bench.direct_acp import direct_agent

    async def turn() -> float:
        started = time.perf_counter()
        async with direct_agent("say hello", home, home / "agent-state"):  # its first turn, then yields
            return time.perf_counter() - started

    return asyncio.run(turn())


def _ratio_row(
    what: str, times: list[float], base: list[float], note: str = "", base_name: str = "python -c pass"
) -> Row:
    median, floor = statistics.median(times), statistics.median(base)
    return (what, f"{median * 1000:.0f} ms", f"{median / floor:.2f}x {base_name}{note}")


def spawn_rows(rounds: int) -> list[Row]:
    pass_cmd = [sys.executable, "-c", "pass"]
    pygls_cmd = [sys.executable, "-c", "import pygls.lsp.server"]
    cli = [sys.executable, "-m", "sessiond.client"]
    baseline_home = _home()  # python -c pass and the floor run with the same environment
    env0 = env_for(baseline_home)
    running = Daemon(home=_home())
    running.start()
    try:
        env = env_for(running.home)
        socket_args = ["--socket", str(running.socket)]
        opened = subprocess.run(
            [*cli, *socket_args, "new", "--root", str(running.home)], env=env, capture_output=True, check=True
        )
        session = opened.stdout.decode().split()[0]
        # Warm-up: bytecode written, the agent process up (`send` then measures a turn, not a spawn).
        wall_of(pass_cmd, env0)
        wall_of(pygls_cmd, env0)
        wall_of([*cli, *socket_args, "send", session, "say warm"], env)
        cold = _home()
        daemon_first_answer(cold)
        shutil.rmtree(cold, ignore_errors=True)
        kinds = (
            "pass",
            "pygls",
            "daemon",
            "built",
            "relay-cold",
            "relay",
            "ls",
            "status",
            "send",
            "agent",
            "turn",
            "held",
        )
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(rounds):
            times["pass"].append(wall_of(pass_cmd, env0))
            times["pygls"].append(wall_of(pygls_cmd, env0))
            fresh = _home()
            first, built = daemon_first_answer(fresh)
            times["daemon"].append(first)
            times["built"].append(built)
            shutil.rmtree(fresh, ignore_errors=True)
            fresh = _home()
            times["relay-cold"].append(relay_first_answer(fresh))
            _stop_pid_of(fresh / "run" / "sessiond.sock")
            shutil.rmtree(fresh, ignore_errors=True)
            times["relay"].append(relay_first_answer(running.home))
            times["ls"].append(wall_of([*cli, *socket_args, "ls"], env))
            times["status"].append(wall_of([*cli, *socket_args, "status"], env))
            times["send"].append(wall_of([*cli, *socket_args, "send", session, "say done"], env))
            fresh = _home()
            times["agent"].append(agent_first_turn(fresh))
            shutil.rmtree(fresh, ignore_errors=True)
            fresh = _home()
            took, longest = daemon_first_turn(fresh)
            times["turn"].append(took)
            times["held"].append(longest)
            shutil.rmtree(fresh, ignore_errors=True)
    finally:
        running.stop()
        shutil.rmtree(running.home, ignore_errors=True)
        shutil.rmtree(baseline_home, ignore_errors=True)
    floor = statistics.median(times["pygls"])
    daemon = statistics.median(times["daemon"])
    return [
        _ratio_row("python -c pass (the baseline)", times["pass"], times["pass"]),
        _ratio_row('python -c "import pygls.lsp.server" (the floor)', times["pygls"], times["pass"]),
        _ratio_row(
            "daemon: spawn → initialize answered",
            times["daemon"],
            times["pass"],
            f"; {daemon / floor:.2f}x the floor",
        ),
        _ratio_row(
            "daemon: spawn → the request after initialize answered (the daemon built)",
            times["built"],
            times["pass"],
            f"; {statistics.median(times['built']) / floor:.2f}x the floor",
        ),
        _ratio_row(
            "sessiond stdio, no daemon: spawn → initialize answered", times["relay-cold"], times["pass"]
        ),
        _ratio_row(
            "sessiond stdio, daemon running: spawn → initialize answered", times["relay"], times["pass"]
        ),
        _ratio_row("sessiond ls (daemon running)", times["ls"], times["pass"]),
        _ratio_row("sessiond status (daemon running)", times["status"], times["pass"]),
        _ratio_row("sessiond send, a demo turn (daemon and agent running)", times["send"], times["pass"]),
        _ratio_row(
            "the demo agent alone over ACP: spawn → its first turn answered (the baseline)",
            times["agent"],
            times["agent"],
            base_name="the agent alone",
        ),
        _ratio_row(
            "a fresh daemon's first demo turn: prompt → answer",
            times["turn"],
            times["agent"],
            base_name="the agent alone",
        ),
        _ratio_row(
            "another client's longest wait for fleet/summary during that first turn",
            times["held"],
            times["turn"],
            base_name="the first turn",
        ),
    ]


# ---------------------------------------------------------------- at scale


class Raw:
    """A raw JSON-RPC connection to a daemon (no client library in the way)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.next_id = reader, writer, 1

    @classmethod
    async def open(cls, path: Path) -> Raw:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=64 * 1024 * 1024)
        raw = cls(reader, writer)
        await raw.call("initialize", {"capabilities": {}})
        return raw

    async def _read(self) -> dict[str, Any]:
        header = await self.reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in header.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        return json.loads(await self.reader.readexactly(length))  # type: ignore[no-any-return]

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        wanted = self.next_id
        self.writer.write(_frame({"jsonrpc": "2.0", "id": wanted, "method": method, "params": params}))
        while True:
            message = await self._read()
            if message.get("id") == wanted and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


def seed(home: Path, count: int) -> None:
    """A store holding `count` idle sessions of the demo agent: one opened through a real daemon,
    the rest copies of its row made in SQL (opening 100,000 through the API is the slow part)."""
    daemon = Daemon(home=home).start()
    try:

        async def open_one() -> None:
            raw = await Raw.open(daemon.socket)
            await raw.call("session/open", {"agent": "demo", "root": str(home)})
            await raw.close()

        asyncio.run(open_one())
    finally:
        assert daemon.stop() == 0
    copy_sessions(home / "state" / "sessiond.db", "s1", count - 1)


def copy_sessions(db: Path, session: str, count: int) -> None:
    """`count` copies of a stored session's row, numbered on after the last session (idle or
    closed as it is, no events): what a store holds after many sessions were opened and left."""
    with sqlite3.connect(db) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(sessions)")]
        (last,) = conn.execute("SELECT MAX(ordinal) FROM sessions").fetchone()
        copied = ", ".join(
            "'s' || n"
            if c == "id"
            else "n"
            if c == "ordinal"
            else "created_at + n * 0.001"
            if c == "created_at"
            else c
            for c in columns
        )
        conn.execute(
            f"INSERT INTO sessions ({', '.join(columns)}) "
            "WITH RECURSIVE seq(n) AS (SELECT ? UNION ALL SELECT n + 1 FROM seq WHERE n < ?) "
            f"SELECT {copied} FROM seq, (SELECT * FROM sessions WHERE id = ?)",
            (last + 1, last + count, session),
        )


@contextlib.contextmanager
def seeded(count: int) -> Iterator[Path]:
    home = _home()
    try:
        seed(home, count)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def _scale_figures(daemon: Daemon, turns: int, rounds: int) -> tuple[float, float]:
    """A page of 200 (median of 20), and `turns` turns at once on fresh sessions (median of `rounds`)."""
    raw = await Raw.open(daemon.socket)
    try:
        pages = []
        for _ in range(20):
            started = time.perf_counter()
            page = await raw.call("session/list", {"limit": 200})
            pages.append(time.perf_counter() - started)
            assert len(page["sessions"]) == 200
        opened = await raw.call("session/open", {"agent": "demo", "root": str(daemon.home)})
        warm = opened["sessions"][0]["id"]
        await raw.call("session/prompt", {"session": warm, "prompt": "say warm"})  # the agent is up
        turn_times = []
        for _ in range(rounds):
            opened = await raw.call(
                "session/open", {"agent": "demo", "root": str(daemon.home), "count": turns}
            )
            ids = [s["id"] for s in (opened["sessions"])]
            conns = [await Raw.open(daemon.socket) for _ in ids]
            started = time.perf_counter()
            await asyncio.gather(
                *(
                    c.call("session/prompt", {"session": i, "prompt": "say done"})
                    for c, i in zip(conns, ids, strict=True)
                )
            )
            turn_times.append(time.perf_counter() - started)
            for c in conns:
                await c.close()
        return statistics.median(pages), statistics.median(turn_times)
    finally:
        await raw.close()


def restart_first_answer(home: Path) -> tuple[float, float]:
    """Spawn a daemon on an existing store: its `initialize` answer, then its first page of 200."""
    sock_path = home / "run" / "sessiond.sock"
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "sessiond.daemon", "--socket", str(sock_path)],
        env=env_for(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(str(sock_path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                conn.close()
                if process.poll() is not None:
                    raise RuntimeError(f"the daemon exited with {process.returncode}") from None
                time.sleep(0.002)
        with conn:
            conn.sendall(_frame(INITIALIZE))
            _read_message(conn.recv)
            first = time.perf_counter() - started
            conn.sendall(
                _frame({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {"limit": 200}})
            )
            while "id" not in (answer := _read_message(conn.recv)) or answer.get("method"):
                pass
            listed = time.perf_counter() - started
            assert len(answer["result"]["sessions"]) == 200, answer
        return first, listed
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(120)


def scale_rows(sizes: list[int], turns: int, rounds: int) -> list[Row]:
    results: dict[int, dict[str, float]] = {}
    for size in sizes:
        with seeded(size) as home:
            firsts, lists = [], []
            for _ in range(rounds):
                first, listed = restart_first_answer(home)
                firsts.append(first)
                lists.append(listed)
            daemon = Daemon(home=home).start()
            try:
                page, turn = asyncio.run(_scale_figures(daemon, turns, rounds))
            finally:
                daemon.stop()
            results[size] = {
                "page": page,
                "turns": turn,
                "restart": statistics.median(firsts),
                "restart-list": statistics.median(lists),
            }
    base = results[sizes[0]]
    rows: list[Row] = []
    for key, what, unit in [
        ("page", "session/list, a page of 200 (median of 20)", 1000),
        ("turns", f"{turns} demo turns at once (median of {rounds})", 1),
        ("restart", f"restart: spawn → initialize answered (median of {rounds})", 1),
        ("restart-list", "restart: spawn → first page of 200 answered", 1),
    ]:
        for size in sizes:
            value = results[size][key]
            shown = f"{value * 1000:.1f} ms" if unit == 1000 else f"{value:.3f} s"
            rows.append((f"{what}, {size:,} sessions", shown, f"{value / base[key]:.2f}x at {sizes[0]:,}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--only", choices=["spawn", "scale"])
    args = parser.parse_args()
    if args.only != "scale":
        print(table("Spawn → first answer (medians, same-run baselines)", spawn_rows(args.rounds)))
        print()
    if args.only != "spawn":
        sizes = [int(s) for s in args.sizes.split(",")]
        print(table("Beside idle sessions", scale_rows(sizes, args.turns, max(3, args.rounds // 2 + 1))))


if __name__ == "__main__":
    main()
