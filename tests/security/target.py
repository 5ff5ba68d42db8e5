"""The daemon under fuzz, and what each generated input must leave true.

`Target` owns a real daemon process (unix socket and loopback TCP with a token),
restarts it if an input killed it (the crash is reported, and the next input
gets a daemon), and runs inputs on a private event loop. Each `run_*` returns an
`Outcome`: the properties broken (empty when all held) and what was seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import Daemon
from sessiond.protocol.errors import ErrorCode
from tests.security.strategies import Framing, Message, Notice
from tests.security.wire import BadFrame, Wire, dump, frame, same_id

ALLOWED_CODES = frozenset(int(code) for code in ErrorCode)
# Generous: a request the daemon answers in milliseconds, on two busy cores.
ANSWER_TIMEOUT = float(os.environ.get("SESSIOND_FUZZ_TIMEOUT", "5"))
CLOSE_TIMEOUT = float(os.environ.get("SESSIOND_FUZZ_CLOSE_TIMEOUT", "2"))
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")
_ids = itertools.count(1)


@dataclass
class Outcome:
    problems: list[str] = field(default_factory=list)
    codes: Counter[int] = field(default_factory=Counter)  # error codes answered to the fuzzed input
    results: int = 0
    hung: int = 0
    crashed: int = 0
    closed: bool = False

    def fail(self, problem: str) -> None:
        self.problems.append(problem)


class Target:
    """A real daemon to fuzz, restarted if an input kills it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.root = Path(tempfile.mkdtemp(prefix="sdfz-", dir="/tmp"))
        self.daemon: Daemon | None = None
        self.restarts = 0
        self.victims: dict[str, str] = {}
        self.start()

    # ------------------------------------------------------------ process

    def start(self) -> None:
        daemon = Daemon(extra_args=("--tcp", "127.0.0.1:0")).start()
        self.daemon = daemon
        state = daemon.home / "state"
        self.token = (state / "tcp-token").read_text().strip()
        host, _, port = (state / "tcp-address").read_text().strip().rpartition(":")
        self.tcp = (host, int(port))
        self.victims = {}

    @property
    def pid(self) -> int:
        assert self.daemon is not None
        return self.daemon.pid

    def alive(self) -> bool:
        return (
            self.daemon is not None and self.daemon.process is not None and self.daemon.process.poll() is None
        )

    def stderr_tail(self, lines: int = 15) -> str:
        assert self.daemon is not None
        return "\n".join(self.daemon.stderr[-lines:])

    def close(self) -> None:
        if self.daemon is not None:
            with contextlib.suppress(Exception):
                self.daemon.stop(timeout=30)
            shutil.rmtree(self.daemon.home, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)
        self.loop.close()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    # ------------------------------------------------------------ connections

    async def connect(self, mode: str) -> Wire:
        assert self.daemon is not None
        if mode.startswith("unix"):
            wire = await Wire.unix(str(self.daemon.socket))
        else:
            wire = await Wire.tcp(*self.tcp)
        if mode == "unix":
            answer = await wire.initialize({"clientName": "fuzz"})
        elif mode == "tcp":
            answer = await wire.initialize({"token": self.token})
        elif mode == "tcp-notoken":
            answer = await wire.initialize({"token": "not-the-token"})
            if "error" not in answer:
                raise AssertionError(f"a TCP initialize with a wrong token was accepted: {answer}")
            return wire
        else:
            return wire
        if "result" not in answer:
            raise AssertionError(f"initialize failed: {answer}")
        return wire

    async def status_on_fresh_connection(self) -> dict[str, Any]:
        wire = await self.connect("unix")
        try:
            return await wire.request("daemon/status", {}, "fresh", ANSWER_TIMEOUT)
        finally:
            await wire.close()

    def check_daemon(self, outcome: Outcome, after: str) -> None:
        """The daemon is alive and answers a fresh connection; else say so and bring it back."""
        if not self.alive():
            assert self.daemon is not None
            assert self.daemon.process is not None
            outcome.crashed += 1
            outcome.fail(
                f"crash: the daemon exited with code {self.daemon.process.returncode} after {after}\n"
                + self.stderr_tail()
            )
            self.restart()
            return
        try:
            answer = self.run(self.status_on_fresh_connection())
            if "result" not in answer:
                outcome.fail(f"fresh connection: daemon/status answered {answer} after {after}")
        except (TimeoutError, ConnectionError, OSError, BadFrame, AssertionError) as exc:
            # Stopping, perhaps (a daemon/stop that got through): give it time to exit.
            assert self.daemon is not None
            assert self.daemon.process is not None
            with contextlib.suppress(Exception):
                self.daemon.process.wait(10)
            if not self.alive():
                self.check_daemon(outcome, after)
                return
            outcome.fail(f"fresh connection: no daemon/status answer after {after}: {exc!r}")
            self.restart()

    def restart(self) -> None:
        self.restarts += 1
        if self.daemon is not None:
            with contextlib.suppress(Exception):
                self.daemon.stop(timeout=10)
            shutil.rmtree(self.daemon.home, ignore_errors=True)
        self.start()

    def rss_kib(self) -> int:
        assert self.daemon is not None
        return self.daemon.rss_kib()

    # ------------------------------------------------------------ what notifications must not change

    async def snapshot(self, wire: Wire) -> dict[str, Any]:
        async def ask(method: str, params: dict[str, Any]) -> Any:
            answer = await wire.request(method, params, f"snap-{next(_ids)}", ANSWER_TIMEOUT)
            if "result" not in answer:
                raise AssertionError(f"{method} failed: {answer}")
            return answer["result"]

        agents = await ask("agent/list", {})
        sessions = await ask("session/list", {"includeClosed": True, "limit": 10000, "brief": True})
        tasks = await ask("task/list", {})
        runs = await ask("run/list", {})
        merges = await ask("merge/list", {})
        return {
            "agents": sorted(
                (a["name"], json.dumps(a["command"]), json.dumps(a["options"], sort_keys=True))
                for a in agents["agents"]
            ),
            "sessions": sorted(
                (s["id"], s["status"], s.get("turns", 0), s.get("queuedTurns", 0))
                for s in sessions["sessions"]
            ),
            "tasks": sorted((t["id"], t["status"]) for t in tasks["tasks"]),
            "runs": sorted((r["id"], r.get("outcome")) for r in runs["runs"]),
            "merges": len(merges["entries"]),
        }

    async def quiet(self, wire: Wire) -> None:
        """Wait until the observer is the only client (earlier connections' ends are processed)."""
        for _ in range(200):
            answer = await wire.request("daemon/status", {}, f"quiet-{next(_ids)}", ANSWER_TIMEOUT)
            if answer.get("result", {}).get("clients") == 1:
                return
            await asyncio.sleep(0.01)

    async def ensure_victims(self, wire: Wire, snap: dict[str, Any]) -> bool:
        """Live objects for notifications to (wrongly) act on; True when any had to be made anew."""
        made = False

        async def ask(method: str, params: dict[str, Any]) -> Any:
            answer = await wire.request(method, params, f"victim-{next(_ids)}", ANSWER_TIMEOUT)
            if "result" not in answer:
                raise AssertionError(f"{method} failed: {answer}")
            return answer["result"]

        sessions = {s[0]: s[1] for s in snap["sessions"]}
        if sessions.get(self.victims.get("SESSION", ""), "closed") == "closed":
            opened = await ask("session/open", {"root": str(self.root), "title": "fz-victim"})
            self.victims["SESSION"] = opened["sessions"][0]["id"]
            made = True
        tasks = dict(snap["tasks"])
        if tasks.get(self.victims.get("TASK", "")) != "suggested":
            task = await ask(
                "task/suggest", {"agent": "demo", "title": "fz victim", "prompt": "x", "root": str(self.root)}
            )
            self.victims["TASK"] = task["id"]
            made = True
        agents = {a[0] for a in snap["agents"]}
        if self.victims.get("AGENT") not in agents:
            name = f"fz-victim-{next(_ids)}"
            await ask("agent/create", {"name": name, "command": ["true"]})
            self.victims["AGENT"] = name
            made = True
        self.victims["ROOT"] = str(self.root)
        return made

    def fill(self, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("$"):
            if value.startswith("fz-made-$N") or value == "$N":
                return value.replace("$N", str(next(_ids)))
            return self.victims.get(value[1:], value)
        if isinstance(value, str) and "$N" in value:
            return value.replace("$N", str(next(_ids)))
        if isinstance(value, dict):
            return {k: self.fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        return value


# ------------------------------------------------------------------ checks


def check_shape(message: dict[str, Any], outcome: Outcome, what: str) -> None:
    """A response: JSON-RPC 2.0, a result or an error (integer code in range, a sentence, no traceback)."""
    if message.get("jsonrpc") != "2.0":
        outcome.fail(f"shape: a response without jsonrpc 2.0 to {what}: {_short(message)}")
    if ("result" in message) == ("error" in message):
        outcome.fail(
            f"shape: {'both' if 'result' in message else 'neither'} result and error in a response to {what}"
        )
        return
    if "error" not in message:
        return
    error = message["error"]
    if not isinstance(error, dict):
        outcome.fail(f"shape: error is not an object to {what}: {_short(message)}")
        return
    code = error.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or code not in ALLOWED_CODES:
        outcome.fail(
            f"code: error code {code!r} is not JSON-RPC's or the daemon's, to {what}: {_short(message)}"
        )
    if not isinstance(error.get("message"), str) or not error["message"]:
        outcome.fail(f"shape: error without a message to {what}")
    text = f"{error.get('message')} {dump(error.get('data'))}"
    if TRACEBACK.search(text):
        outcome.fail(f"traceback: an error carries Python traceback text, to {what}: {_short(message)}")


def _short(message: Any, limit: int = 300) -> str:
    text = dump(message) if isinstance(message, dict) else repr(message)
    return text if len(text) <= limit else text[:limit] + f"...({len(text)} chars)"


def _responses(wire: Wire) -> list[dict[str, Any]]:
    return [m for m in wire.seen if "method" not in m]


async def _drain_to(wire: Wire, msg_id: str, outcome: Outcome, what: str, *, may_close: bool) -> bool:
    """Send a valid request and read until it is answered; False when the connection closed or hung."""
    try:
        await wire.send(frame({"jsonrpc": "2.0", "id": msg_id, "method": "daemon/status", "params": {}}))
    except (ConnectionError, OSError):
        outcome.closed = True
        if not may_close and not _said_why(wire):
            outcome.fail(f"closed: the daemon closed the connection after {what}")
        return False
    try:
        answer = await wire.wait_for_id(msg_id, ANSWER_TIMEOUT)
    except TimeoutError:
        outcome.hung += 1
        outcome.fail(
            f"hang: a valid request after {what} was not answered within {ANSWER_TIMEOUT}s, "
            "and the connection stayed open"
        )
        return False
    except BadFrame as exc:
        outcome.fail(f"frame: {exc} (after {what})")
        return False
    if answer is None:
        outcome.closed = True
        if not may_close and not _said_why(wire):
            outcome.fail(f"closed: the daemon closed the connection after {what}, with no framing error")
        return False
    return True


def _said_why(wire: Wire) -> bool:
    """Whether the daemon answered a framing or size error (id null) before closing: a deliberate close."""
    last = [m for m in wire.seen if "method" not in m][-1:]
    return bool(last) and last[0].get("id") is None and _code(last[0]) in (-32700, -32600)


def _code(message: dict[str, Any]) -> Any:
    error = message.get("error")
    return error.get("code") if isinstance(error, dict) else None


def _is_ours(message: dict[str, Any]) -> bool:
    msg_id = message.get("id")
    return isinstance(msg_id, str) and msg_id.startswith(("fz-follow-", "init", "fz-inner"))


async def _message(target: Target, msg: Message) -> Outcome:
    outcome = Outcome()
    wire = await target.connect(msg.mode)
    what = repr(msg)
    try:
        await wire.send(frame(msg.encoded()))
        ok = await _drain_to(wire, f"fz-follow-{next(_ids)}", outcome, "a valid frame", may_close=False)
        if ok:
            # The fuzzed request may take longer than daemon/status: wait for its answer too.
            seen = _responses(wire)
            unread = any(m.get("id") is None and _code(m) in (-32700, -32600) for m in seen)  # id unknown
            if msg.id.usable and not unread and not any(same_id(m.get("id"), msg.id.value) for m in seen):
                try:
                    await wire.wait_for_id(msg.id.value, ANSWER_TIMEOUT)
                except TimeoutError:
                    pass
                except BadFrame as exc:
                    outcome.fail(f"frame: {exc}")
            # One more round trip: a second answer to the same id would show up before it.
            await _drain_to(wire, f"fz-follow-{next(_ids)}", outcome, "a valid frame", may_close=False)
    except BadFrame as exc:
        outcome.fail(f"frame: {exc} (after {what})")
    finally:
        await wire.close()
    answers = [m for m in _responses(wire) if not _is_ours(m)]
    for answer in answers:
        check_shape(answer, outcome, msg.note)
        if "error" in answer and isinstance(answer["error"], dict):
            outcome.codes[answer["error"].get("code")] += 1
        elif "result" in answer:
            outcome.results += 1
    mine = [m for m in answers if same_id(m.get("id"), msg.id.value)]
    nulls = [m for m in answers if m.get("id") is None and msg.id.value is not None]
    stray = [m for m in answers if m not in mine and m not in nulls]
    if stray:
        outcome.fail(f"stray: a response with an id never sent: {_short(stray[0])}")
    if outcome.closed and _said_why(wire) and not mine and len(nulls) == 1:
        mine_or_null = nulls  # refused unread (too large before initialize, say), then closed
    elif msg.id.usable and not msg.extreme:
        if len(mine) != 1 or nulls:
            outcome.fail(
                f"answers: {len(mine)} responses with the request's id and {len(nulls)} with id null "
                f"(want exactly one with its id) to {msg.note}"
            )
        mine_or_null = mine
    else:
        mine_or_null = mine + nulls
        limit_low = 0 if msg.id.value is None else 1
        if not limit_low <= len(mine_or_null) <= 1:
            outcome.fail(
                f"answers: {len(mine)} responses with the request's id and {len(nulls)} with id null "
                f"(want exactly one, with its id or null) to {msg.note}, id {msg.id!r}"
            )
        for answer in nulls:
            if "error" not in answer:
                outcome.fail(f"answers: a result with id null to {msg.note}")
    if msg.expect_code is not None:
        # Python cannot read an extreme body (5,000-digit numbers, deep nesting): a parse error will do.
        # An id that is no JSON-RPC id (object, array, bool, null) makes it an Invalid Request first.
        # So does a message refused unread for its size, the connection then closed on purpose.
        lenient = msg.extreme or not msg.id.usable or (outcome.closed and _said_why(wire))
        allowed = msg.expect_code | {-32700, -32600} if lenient else msg.expect_code
        for answer in mine_or_null:
            code = answer.get("error", {}).get("code") if isinstance(answer.get("error"), dict) else None
            if code not in allowed:
                got = f"error {code}" if code is not None else "a result"
                outcome.fail(f"code: {msg.note} in mode {msg.mode} got {got}, want one of {sorted(allowed)}")
    return outcome


def run_message(target: Target, msg: Message) -> Outcome:
    outcome = target.run(_message(target, msg))
    target.check_daemon(outcome, repr(msg))
    return outcome


# Faults after which the framing itself is intact: the daemon must answer, not close.
FRAMING_INTACT = frozenset({"zero-length", "bad-body"})


async def _framing(target: Target, case: Framing) -> Outcome:
    outcome = Outcome()
    wire = await target.connect(case.mode)
    try:
        try:
            await wire.send(case.data)
            if case.eof:
                await wire.send_eof()
        except (ConnectionError, OSError):
            outcome.closed = True
        if case.eof or outcome.closed:
            try:
                while await wire.read(CLOSE_TIMEOUT) is not None:
                    pass
                outcome.closed = True
            except TimeoutError:
                outcome.hung += 1
                outcome.fail(
                    f"hang: the daemon kept the connection open {CLOSE_TIMEOUT}s after {case.note} and EOF"
                )
            except BadFrame as exc:
                outcome.fail(f"frame: {exc} (after {case.note})")
        else:
            await _drain_to(
                wire,
                f"fz-follow-{next(_ids)}",
                outcome,
                f"framing fault {case.note}",
                may_close=case.note not in FRAMING_INTACT,
            )
    except BadFrame as exc:
        outcome.fail(f"frame: {exc} (after {case.note})")
    finally:
        await wire.close()
    for answer in _responses(wire):
        if isinstance(answer.get("id"), str) and answer["id"].startswith(("fz-follow-", "init")):
            continue
        check_shape(answer, outcome, case.note)
        if isinstance(answer.get("error"), dict):
            outcome.codes[answer["error"].get("code")] += 1
        else:
            outcome.results += 1
    return outcome


def run_framing(target: Target, case: Framing) -> Outcome:
    outcome = target.run(_framing(target, case))
    target.check_daemon(outcome, repr(case))
    return outcome


async def _notice(target: Target, notice: Notice) -> tuple[Outcome, Any]:
    outcome = Outcome()
    observer = await target.connect("unix")
    sent: Any = None
    try:
        await target.quiet(observer)
        before = await target.snapshot(observer)
        if await target.ensure_victims(observer, before):
            before = await target.snapshot(observer)
        params = target.fill(notice.params)
        sent = {"jsonrpc": "2.0", "method": notice.method}
        if params is not ...:
            sent["params"] = params
        wire = await target.connect(notice.mode)
        try:
            await wire.send(frame(sent))
            what = f"the notification {notice.note}"
            if await _drain_to(wire, f"fz-follow-{next(_ids)}", outcome, what, may_close=False):
                await _drain_to(wire, f"fz-follow-{next(_ids)}", outcome, what, may_close=False)
        except BadFrame as exc:
            outcome.fail(f"frame: {exc} (after {notice.note})")
        finally:
            await wire.close()
        answers = [m for m in _responses(wire) if not _is_ours(m)]
        if outcome.closed and _said_why(wire):
            answers = answers[:-1]  # a size or framing error before a deliberate close: not a reply
        # A body the daemon cannot parse is a Parse error whatever it was meant to be.
        answers = [m for m in answers if not (m.get("id") is None and _code(m) == -32700)]
        if not isinstance(params, dict | list) and params is not ...:
            # Params that are neither object nor array: not a Request object, so Invalid Request, id null.
            answers = [m for m in answers if not (m.get("id") is None and _code(m) == -32600)]
        if answers:
            outcome.fail(
                f"answered: the daemon replied to the notification {notice.note}: {_short(answers[0])}"
            )
        await asyncio.sleep(0.02)  # let a handler that was (wrongly) started reach the core
        await target.quiet(observer)
        after = await target.snapshot(observer)
        if after != before:
            changed = {
                key: {"before": _diff(before[key], after[key]), "after": _diff(after[key], before[key])}
                for key in before
                if before[key] != after[key]
            }
            outcome.fail(f"notification changed state: {notice.note} in mode {notice.mode}: {changed}")
    except (TimeoutError, ConnectionError, OSError, AssertionError) as exc:
        if target.alive():
            outcome.fail(f"observer: {exc!r} around the notification {notice.note}")
    finally:
        await observer.close()
    return outcome, sent


def _diff(a: Any, b: Any) -> Any:
    if isinstance(a, list) and isinstance(b, list):
        return [x for x in a if x not in b][:5]
    return a


def run_notice(target: Target, notice: Notice) -> Outcome:
    outcome, sent = target.run(_notice(target, notice))
    target.check_daemon(outcome, f"the notification {_short(sent or {})} in mode {notice.mode}")
    return outcome
