"""A real VS Code for the extension: code-server (VS Code in the browser; its extension host runs in
node on this machine), with the extension installed from its own .vsix, against a real daemon with
demo sessions, driven in Debian's headless chromium through playwright's API.

`./dev test` installs code-server and node 24 under .cache/vscode-real (setup_vscode_real) and
builds the .vsix (clients/vscode/ci.sh) before pytest runs. Screenshots, the extension's log and
the browser console are kept under build/vscode-ui/ for a person to look at.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bench.harness import Daemon
from tests.vscode_real.workbench import (
    CHROMIUM,
    CODE_SERVER,
    NODE24_BIN,
    SESSIOND,
    SHOTS,
    Workbench,
    _free_port,
    _need_toolchain,
    _vsix,
    git_workspace,
)

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Error


@pytest.fixture(scope="module")
def workbench() -> Iterator[Workbench]:
    _need_toolchain()
    from playwright.sync_api import sync_playwright

    vsix = _vsix()
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True)
    # Short, under /tmp: the daemon's socket path must stay under 108 bytes.
    base = Path(tempfile.mkdtemp(prefix="sdvs-", dir="/tmp"))
    for sub in ("ws", "user-data/User", "extensions", "xdg-data", "xdg-config", "logs", "tmp"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    git_workspace(base / "ws")
    daemon = Daemon(base / "home").start()
    port = _free_port()
    env = {
        **daemon.env,
        "PATH": f"{NODE24_BIN}:{os.environ['PATH']}",
        # code-server writes logs and a heartbeat under XDG_DATA_HOME, its config under XDG_CONFIG_HOME.
        "XDG_DATA_HOME": str(base / "xdg-data"),
        "XDG_CONFIG_HOME": str(base / "xdg-config"),
        # Its IPC sockets (vscode-ipc-*.sock) go with the rest at teardown, not stay in /tmp.
        "TMPDIR": str(base / "tmp"),
    }
    env.pop("SESSIOND_SOCKET", None)  # the extension finds the daemon through its settings
    (base / "user-data" / "User" / "settings.json").write_text(
        f"""{{
  "sessiond.path": "{SESSIOND}",
  "sessiond.socket": "{daemon.socket}",
  "sessiond.startDaemon": true,
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "extensions.ignoreRecommendations": true,
  "remote.autoForwardPorts": false,
  "chat.disableAIFeatures": true,
  "git.enabled": false,
  "window.restoreWindows": "none",
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "editor.quickSuggestions": {{"other": "off", "comments": "off", "strings": "off"}},
  "editor.suggestOnTriggerCharacters": false,
  "editor.autoClosingBrackets": "never",
  "editor.autoClosingQuotes": "never",
  "workbench.editor.untitled.hint": "hidden"
}}
"""
    )
    config = base / "code-server.yaml"
    config.write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
    dirs = ["--config", str(config), "--user-data-dir", str(base / "user-data")]
    dirs += ["--extensions-dir", str(base / "extensions")]
    started = time.monotonic()
    subprocess.run(
        [str(CODE_SERVER), *dirs, "--install-extension", str(vsix)],
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )
    install_seconds = time.monotonic() - started
    # Its own session (process group), so teardown ends it with its children by one id.
    server = subprocess.Popen(
        [
            str(CODE_SERVER),
            *dirs,
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
        ],
        env=env,
        stdout=(base / "logs" / "code-server.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wb: Workbench | None = None
    try:
        for _ in range(150):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            time.sleep(0.2)
        with sync_playwright() as p, (SHOTS / "browser-console.log").open("w", buffering=1) as console:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM),
                headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )
            page = browser.new_page(viewport={"width": 1600, "height": 900})
            page.set_default_timeout(30_000)

            def logged(message: ConsoleMessage) -> None:
                console.write(f"[{message.type}] {message.text}\n")

            def failed(error: Error) -> None:
                console.write(f"[pageerror] {error}\n")

            page.on("console", logged)
            page.on("pageerror", failed)
            wb = Workbench(base, daemon, page)
            wb.install_seconds = install_seconds  # type: ignore[attr-defined]
            wb.url = f"http://127.0.0.1:{port}/?folder={base / 'ws'}"  # type: ignore[attr-defined]
            yield wb
            browser.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        for log in (base / "user-data" / "logs").rglob("sessiond.log"):
            shutil.copy(log, SHOTS / "extension.log")
        # The daemon the fixture started, or the one a restart from VS Code started in its place.
        subprocess.run([str(SESSIOND), "stop"], env=daemon.env, capture_output=True, timeout=60)
        with contextlib.suppress(Exception):
            daemon.stop(timeout=30)
        for sender in wb.senders if wb else []:
            with contextlib.suppress(Exception):
                sender.kill()
                sender.wait(5)
        shutil.rmtree(base, ignore_errors=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        wb = item.funcargs.get("workbench") if hasattr(item, "funcargs") else None
        if isinstance(wb, Workbench):
            with contextlib.suppress(Exception):
                wb.shot(f"FAILED-{item.name}")
            with contextlib.suppress(Exception):
                report.sections.append(("what the workbench showed", wb.seen()))
    return report
