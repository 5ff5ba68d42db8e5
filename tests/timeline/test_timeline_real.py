"""The run's timeline (issue 20) from a real run of 200 demo sessions.

One daemon, one batch of 200 prompts in a declared run, on an agent limited
to 25 turns at once (the rest wait for an agent slot) and 10 live sessions:
some prompts fail, some hang until this test cancels them once started, some
ask permission, which this test answers. Then, through the real CLI:
`sessiond runs R --html` opened in Debian's headless chromium (playwright's API,
`executable_path`, never `playwright install`), `sessiond trace --format
perfetto` checked as trace-event JSON, the page of the latest run, the same page
after a daemon restart, and `:Sessiond timeline` in headless Neovim.
Screenshots go to build/timeline/ for a person to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench.harness import Daemon
from sessiond.client import aconnect, timeline
from sessiond.client.cli import main
from sessiond.protocol.models import EventKind
from tests import toolchain

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "timeline"
CHROMIUM = Path("/usr/bin/chromium")
SESSIONS = 200
MAX_ACTIVE = 25
MAX_LIVE = 10


def prompt_of(i: int) -> str:
    """The batch's prompt i: which ones fail, hang (cancelled), ask, or plan and work."""
    if i % 10 == 3:
        return f"plan Try | Fail\nprogress 1 completed\nfail broken on purpose {i}"
    if i % 25 == 7:
        return "say waiting\nhang"
    if i % 10 == 5:
        return f"ask may I touch f{i}.txt?\nsay asked"
    if i % 20 == 0:
        return f"plan Write | Check\nwrite f{i}.txt hello\nprogress 1 completed\nsay wrote"
    return "plan Read | Think | Answer\nprogress 1 completed\nprogress 2 completed\nsleep 0.2\nsay done"


FAILED = sum(1 for i in range(SESSIONS) if i % 10 == 3)
CANCELLED = sum(1 for i in range(SESSIONS) if i % 10 != 3 and i % 25 == 7)
ASKED = sum(1 for i in range(SESSIONS) if i % 10 != 3 and i % 25 != 7 and i % 10 == 5)


@dataclass
class Scene:
    daemon: Daemon
    root: Path
    out: Path
    run: str = ""
    cancelled: set[str] = field(default_factory=set)
    asked: int = 0
    answered: int = 0

    def cli(self, *argv: str, check: bool = True) -> Done:
        """The `sessiond` command, run in this process (its code, without an interpreter's start-up)."""
        out, err = io.StringIO(), io.StringIO()

        def run() -> int:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                return main(["--socket", str(self.daemon.socket), *argv])

        # In a thread of its own: playwright's sync API keeps an event loop running in this one.
        with ThreadPoolExecutor(1) as pool:
            code = pool.submit(run).result(timeout=120)
        done = Done(code, out.getvalue(), err.getvalue())
        if check and code != 0:
            raise AssertionError(f"sessiond {' '.join(argv)} exited {code}: {done.stderr}")
        return done


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


async def fan_out(scene: Scene) -> None:
    """The batch as a run, with a second connection cancelling the hung turns and answering asks."""
    socket = scene.daemon.socket
    async with aconnect(socket, start=False) as watcher:
        await watcher.agent("demo", max_active_turns=MAX_ACTIVE, max_live_sessions=MAX_LIVE)
        prompts: dict[str, str] = {}
        asks: list[dict[str, Any]] = []
        events = watcher.events(
            kinds=[EventKind.TURN_QUEUED, EventKind.TURN_STARTED, EventKind.PERMISSION_ASKED]
        )
        async with events:

            async def react() -> None:
                async for event in events:
                    if event.kind is EventKind.TURN_QUEUED and event.turn:
                        prompts[event.turn] = str(event.data.get("prompt", ""))
                    elif event.kind is EventKind.TURN_STARTED and "hang" in prompts.get(event.turn or "", ""):
                        assert event.session is not None
                        scene.cancelled.add(event.session)
                        session = await watcher.session(event.session)
                        await session.acancel("the timeline test stops it")
                    elif event.kind is EventKind.PERMISSION_ASKED:
                        # A person answers in threes (the last ones when all were asked), so waiting
                        # for one shows; never more than three waiting, or they would hold every
                        # live-session slot and nothing else could start.
                        asks.append(event.data)
                        scene.asked += 1
                        if len(asks) >= 3 or scene.asked == ASKED:
                            for ask in asks:
                                options = ask["options"]
                                choice = options[scene.answered % len(options)]["optionId"]  # allow, reject
                                scene.answered += 1
                                await watcher.answer_permission(ask["permission"], choice)
                            asks.clear()

            reacting = asyncio.create_task(react())
            try:
                async with asyncio.timeout(150), aconnect(socket, start=False, run="timeline-200") as runner:
                    assert runner.run is not None
                    scene.run = runner.run.id
                    agent = await runner.agent("demo")
                    replies = await agent.abatch(
                        [prompt_of(i) for i in range(SESSIONS)], scene.root, suppress=True
                    )
                    assert sum(isinstance(r, Exception) for r in replies) == FAILED
            finally:
                reacting.cancel()
                await asyncio.gather(reacting, return_exceptions=True)


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    base = Path(tempfile.mkdtemp(prefix="sdt-", dir="/tmp"))
    (base / "root").mkdir()
    (base / "out").mkdir()
    daemon = Daemon().start()
    made = Scene(daemon, base / "root", base / "out")
    try:
        asyncio.run(fan_out(made))
        yield made
    finally:
        made.daemon.stop()
        shutil.rmtree(made.daemon.home, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def run_info(scene: Scene) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(scene.cli("runs", scene.run, "--json").stdout)
    assert info["sessions"] == SESSIONS
    assert info["turns"] == SESSIONS
    assert info["outcome"] == "completed"
    return info


@pytest.fixture(scope="module")
def page_file(scene: Scene, run_info: dict[str, Any]) -> Path:
    path = scene.out / "run.html"
    done = scene.cli("runs", scene.run, "--html", str(path))
    assert done.stdout.strip() == str(path.resolve())
    assert f"{SESSIONS} sessions, {SESSIONS} turns" in done.stderr
    return path


@pytest.fixture(scope="module")
def logged(scene: Scene) -> list[dict[str, Any]]:
    """The run's events, as `sessiond trace --run R` prints them."""
    return [json.loads(line) for line in scene.cli("trace", "--run", scene.run).stdout.splitlines()]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        toolchain.missing("Debian's chromium is not installed (./dev test installs it)")
    try:
        from playwright import sync_api
    except ImportError:
        toolchain.missing("playwright is not installed; install the test extra: pip install -e '.[test]'")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        yield launched
        launched.close()


def page_data(path: Path) -> dict[str, Any]:
    """The JSON the page draws, read back out of it."""
    text = path.read_text()
    found = re.search(r"const DATA = (\{.*?\});\n", text, re.S)
    assert found, "the page holds its data"
    data: dict[str, Any] = json.loads(found.group(1).replace("<\\/", "</"))
    return data


# ---------------------------------------------------------------- the page in a browser


def test_the_run_s_page_in_headless_chromium(
    scene: Scene, run_info: dict[str, Any], page_file: Path, browser: Any
) -> None:
    text = page_file.read_text()
    assert not re.search(r"https?://", text), "self-contained: nothing fetched"
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.resolve().as_uri())
    page.wait_for_function("window.sessiondTimeline !== undefined", timeout=30_000)
    assert errors == []

    rows = page.evaluate("window.sessiondTimeline.rows()")
    assert len(rows) == SESSIONS == len(set(rows))
    assert page.evaluate("window.sessiondTimeline.bars()") == SESSIONS
    assert page.evaluate("window.sessiondTimeline.bars('failed')") == FAILED
    assert page.evaluate("window.sessiondTimeline.bars('cancelled')") == CANCELLED
    assert page.locator('[data-count="failed"]').get_attribute("data-value") == str(FAILED)
    assert page.locator('[data-count="failed"]').inner_text() == f"{FAILED} failed"

    # The figures at the top are those of `sessiond runs R --json`: the wall time the run's own (its
    # stored start and end), the serial time added up from the log's turn.started → turn.ended, which
    # the daemon counts from its own clock readings, a fraction of a millisecond off per turn and
    # stored to the millisecond per session (so `sessiond runs` moves by a few ms across a restart;
    # the page does not, see the last test).
    wall = page.locator('[data-figure="wall"]')
    serial = page.locator('[data-figure="serial"]')
    assert float(wall.get_attribute("data-value") or "nan") == run_info["wallSeconds"]
    assert float(serial.get_attribute("data-value") or "nan") == pytest.approx(
        run_info["serialSeconds"], abs=0.001 * SESSIONS
    )
    assert page.locator('[data-figure="sessions"]').get_attribute("data-value") == str(run_info["sessions"])
    assert page.locator('[data-figure="turns"]').get_attribute("data-value") == str(run_info["turns"])
    assert "turns' time, added up" in serial.inner_text()
    header = page.evaluate("window.sessiondTimeline.data.header")
    assert header["waited"]["agent"] > 0, "with 25 slots for 200 turns, some waited for one"
    assert header["waited"]["person"] > 0

    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "run-200.png"))

    # Hovering a failed bar says so, with the error; a bar that asked shows the person's wait.
    data = page_data(page_file)
    outcomes = data["outcomes"]
    failed = next(t for t in data["turns"] if outcomes[t[4]] == "failed")
    point = page.evaluate(f"window.sessiondTimeline.pointAt({json.dumps(failed[16])})")
    page.mouse.move(point["x"], point["y"])
    tip = page.locator("#tip")
    tip.wait_for(state="visible")
    assert "failed" in tip.inner_text()
    assert "broken on purpose" in tip.inner_text()
    assert "plan 1/2 done" in tip.inner_text()
    page.screenshot(path=str(SHOTS / "run-200-failed-hover.png"))
    # A turn that wrote a file: its plan's progress and the files it changed, as the daemon counts
    # them for its session (`sessiond show`); its session's row says the same.
    sessions = data["sessions"]
    wrote = next(t for t in data["turns"] if t[6].startswith("plan Write | Check"))
    sid = sessions[wrote[0]][0]
    (shown,) = [json.loads(line) for line in scene.cli("show", sid, "--json").stdout.splitlines()]
    changes = shown["changes"]
    (written,) = [f["path"] for f in changes["files"]]
    assert re.fullmatch(r"f\d+\.txt", written), written
    assert (scene.root / written).read_text() == "hello"
    counted = f"changed files 1 (+{changes['added']} \N{MINUS SIGN}{changes['removed']})"
    point = page.evaluate(f"window.sessiondTimeline.pointAt({json.dumps(wrote[16])})")
    page.mouse.move(point["x"], point["y"])
    page.wait_for_function(f"window.sessiondTimeline.hovered() === {json.dumps(wrote[16])}")
    assert "plan 1/2 done" in tip.inner_text()
    assert counted in tip.inner_text()
    page.screenshot(path=str(SHOTS / "run-200-files-hover.png"))
    left = page.locator("#canvas").bounding_box()
    assert left is not None
    page.mouse.move(left["x"] + 20, point["y"])  # over the row's label: the session's own tip
    page.wait_for_function("window.sessiondTimeline.hovered() === null")
    assert tip.inner_text().startswith(sid)
    assert "plan 1/2 done" in tip.inner_text()
    assert counted in tip.inner_text()
    asked = next(t for t in data["turns"] if any(data["waitKinds"][k] == "person" for k in t[7][::3]))
    point = page.evaluate(f"window.sessiondTimeline.pointAt({json.dumps(asked[16])})")
    page.mouse.move(point["x"], point["y"])
    page.wait_for_function(f"window.sessiondTimeline.hovered() === {json.dumps(asked[16])}")
    assert "waiting for a person (permission)" in tip.inner_text()
    assert "may I touch" in tip.inner_text()
    page.screenshot(path=str(SHOTS / "run-200-permission-hover.png"))

    # Only the failing sessions, at a click.
    page.select_option("#filter", "failed")
    assert len(page.evaluate("window.sessiondTimeline.rows()")) == FAILED
    page.close()


def test_the_model_reads_every_turn_of_the_run(scene: Scene, logged: list[dict[str, Any]]) -> None:
    picture = timeline.build(logged)
    assert len(picture.sessions) == SESSIONS
    counts = picture.counts()
    assert counts["failed"] == FAILED
    assert counts["cancelled"] == CANCELLED
    assert counts["completed"] == SESSIONS - FAILED - CANCELLED
    assert {t.session for t in picture.turns if t.outcome == "cancelled"} == scene.cancelled
    person = [w for t in picture.turns for w in t.waits if w.kind == "person"]
    assert len(person) == ASKED
    assert all(w.end is not None for w in person)
    for turn in picture.turns:
        assert turn.started is not None
        assert turn.ended is not None
        assert turn.queued <= turn.started <= turn.ended
        for wait in turn.waits:
            assert wait.end is not None
            assert turn.queued <= wait.start <= wait.end <= turn.ended
    agent_waits = [w for t in picture.turns for w in t.waits if w.kind == "agent"]
    assert agent_waits, "the agent's 25 slots held some turns back"
    live_waits = [w for t in picture.turns for w in t.waits if w.kind == "live"]
    assert live_waits, "25 turns at once on 10 live sessions: some waited for one"
    planned = [t for t in picture.turns if t.plan_total]
    assert planned
    assert all(t.plan_done is not None for t in planned)


# ---------------------------------------------------------------- Perfetto


def test_perfetto_trace_is_well_formed_and_round_trips_the_run(
    scene: Scene, run_info: dict[str, Any], logged: list[dict[str, Any]]
) -> None:
    path = scene.out / "run.perfetto.json"
    scene.cli("trace", "--run", scene.run, "--format", "perfetto", "--chunks", "--output", str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for event in events:
        assert event["ph"] in ("B", "E", "i", "M"), event
        if event["ph"] != "M":
            assert isinstance(event["ts"], int | float)
            assert event["ts"] >= 0
            tracks.setdefault((event["pid"], event["tid"]), []).append(event)
    assert len(tracks) == SESSIONS, "one track per session"
    turns: dict[str, float] = {}
    running = 0.0
    chunks = 0
    for track in tracks.values():
        stack: list[dict[str, Any]] = []
        last = float("-inf")
        for event in track:
            assert event["ts"] >= last, "timestamps are monotonic per track"
            last = event["ts"]
            if event["ph"] == "B":
                stack.append(event)
            elif event["ph"] == "E":
                begun = stack.pop()
                assert begun["name"] == event["name"], "slices close in the order they opened"
                if begun["cat"] == "turn":
                    turns[begun["args"]["turn"]] = event["ts"] - begun["ts"]
                elif begun["cat"] == "running":
                    running += event["ts"] - begun["ts"]
            else:
                chunks += 1
        assert stack == [], "every slice is closed"
    assert len(turns) == run_info["turns"]
    assert running / 1e6 == pytest.approx(trace["otherData"]["serialSeconds"], abs=1e-3)
    assert running / 1e6 == pytest.approx(
        run_info["serialSeconds"], abs=0.05 + 0.005 * run_info["serialSeconds"]
    )
    assert chunks > 0
    names = {e["name"] for e in events if e["ph"] == "B"}
    assert {
        "wait: agent slot",
        "wait: permission",
        "turn failed",
        "turn cancelled",
        "turn completed",
    } <= names
    # Durations as the log has them, turn by turn.
    picture = timeline.build(logged)
    for turn in picture.turns:
        assert turn.ended is not None
        assert turns[turn.id] / 1e6 == pytest.approx(turn.ended - turn.queued, abs=1e-6)


# ---------------------------------------------------------------- the same picture, later


def test_runs_html_without_an_id_draws_the_latest_run(scene: Scene, page_file: Path) -> None:
    path = scene.out / "latest.html"
    scene.cli("runs", "--html", str(path))
    assert page_data(path)["header"]["run"]["id"] == scene.run


def test_trace_html_draws_a_selection(scene: Scene, logged: list[dict[str, Any]]) -> None:
    some = [e["session"] for e in logged if e["kind"] == "session.opened"][:3]
    path = scene.out / "some.html"
    scene.cli("trace", *[a for s in some for a in ("--session", s)], "--html", str(path))
    data = page_data(path)
    assert {s[0] for s in data["sessions"]} == set(some)
    assert data["header"]["run"] is None
    assert data["header"]["turns"] == 3
    refused = scene.cli("trace", "--html", str(path), "--follow", check=False)
    assert refused.returncode == 2
    assert "--follow" in refused.stderr


def test_nvim_sessiond_timeline_writes_the_page_and_opens_it(scene: Scene) -> None:
    """Headless Neovim has no browser to open: the script stubs vim.ui.open and checks it was called."""
    work = scene.out / "nvim"
    env = dict(scene.daemon.env)
    env.update(
        SESSIOND_REPO=str(REPO),
        SESSIOND_TEST_RUN=scene.run,
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
        XDG_CONFIG_HOME=str(work / "config"),
        XDG_DATA_HOME=str(work / "data"),
        XDG_STATE_HOME=str(work / "state"),
        XDG_CACHE_HOME=str(work / "cache"),
    )
    script = Path(__file__).with_name("test_timeline.lua")
    done = subprocess.run(
        [str(toolchain.nvim_binary()), "--clean", "-l", str(script)],
        cwd=scene.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{done.stderr}\n{done.stdout}"
    assert "ok timeline" in done.stdout
    run_page = work / "cache" / "nvim" / "sessiond" / f"timeline-{scene.run}.html"
    assert page_data(run_page)["header"]["sessions"] == SESSIONS
    hour = page_data(work / "cache" / "nvim" / "sessiond" / "timeline-last-hour.html")
    assert hour["header"]["run"] is None
    assert hour["header"]["turns"] >= SESSIONS


def test_after_a_restart_the_run_draws_the_same(scene: Scene, page_file: Path) -> None:
    """Everything drawn comes from the event log (and the run's stored record): a daemon started
    again on the same store draws the same page. The page before is drawn once the log is still
    (a state event throttled at the run's end may still be on its way when the module's page
    was drawn)."""
    quiet = scene.out / "before-restart.html"
    pages = [page_data(page_file)]
    for _ in range(30):
        scene.cli("runs", scene.run, "--html", str(quiet))
        pages.append(page_data(quiet))
        if pages[-1]["header"]["events"] == pages[-2]["header"]["events"]:
            break
    before = pages[-1]
    assert scene.daemon.stop() == 0
    scene.daemon = Daemon(scene.daemon.home).start()
    path = scene.out / "after-restart.html"
    scene.cli("runs", scene.run, "--html", str(path))
    after = page_data(path)
    before["header"].pop("generated")
    after["header"].pop("generated")
    assert after == before
