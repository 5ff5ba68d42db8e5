"""The VS Code extension in a real VS Code (code-server in headless chromium), as a person uses it.

One workbench for the module; the tests run in order, each asserting on what is on the screen
(the status bar item, the Sessions view's rows, notifications, editors) and taking a screenshot
into build/vscode-ui/. The daemon starts with three demo sessions before VS Code opens:

- "Fix greet() typo": a plan, an edit of src/app.py, context 60%, a reply; then idle;
- "Add a CLI": a permission request, waiting before VS Code connects;
- "Long refactor": a turn that sleeps (working).
"""

from __future__ import annotations

import re
import time

import pytest

from tests.vscode_real.workbench import STATUS, Workbench

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def ids(workbench: Workbench) -> dict[str, str]:
    wb = workbench
    ws = str(wb.ws)
    fix = wb.cli("new", "--root", ws, "--title", "Fix greet() typo")
    cli = wb.cli("new", "--root", ws, "--title", "Add a CLI")
    long = wb.cli("new", "--root", ws, "--title", "Long refactor")
    wb.send(
        fix,
        "plan Read | Fix | Test\nprogress 1 completed\nedit src/app.py retrun => return\n"
        "progress 2 completed\nusage 120000 200000 0.9\nsay Fixed.",
    )
    wb.send(cli, "plan Write cli.py | Ask | Done\nask Add click to requirements.txt?\nsay done")
    wb.send(long, "plan Split | Move\nprogress 1 in_progress\nsleep 300")
    wb.wait_status(fix, "idle")
    wb.wait_status(cli, "needs_you")
    wb.wait_status(long, "working")
    return {"fix": fix, "cli": cli, "long": long}


def test_activates_at_startup_and_a_waiting_permission_pops_up(
    workbench: Workbench, ids: dict[str, str]
) -> None:
    """Without opening the view or running a command: the status bar item shows the fleet, and the
    permission request that was waiting before VS Code connected arrives as a notification (it was
    lost when the handler was set after connecting)."""
    wb = workbench
    started = time.monotonic()
    wb.page.goto(wb.url)  # type: ignore[attr-defined]
    wb.page.wait_for_selector(".monaco-workbench .part.statusbar", timeout=120_000)
    text = wb.wait_status_text(r"1 working · 1 needs you · 3 open", timeout=60)
    print(f"workbench up, extension connected in {time.monotonic() - started:.1f} s: {text!r}")
    toast = wb.toast("asks permission")
    toast.wait_for(timeout=30_000)
    assert "Add click to requirements.txt?" in toast.inner_text()
    assert "Add a CLI" in toast.inner_text()
    # the view was never opened: activation came from onStartupFinished
    assert not wb.page.locator(".pane-header", has_text="Sessions").count()
    wb.shot("startup-status-bar-and-permission")


def test_permission_answered_from_the_notification(workbench: Workbench, ids: dict[str, str]) -> None:
    wb = workbench
    wb.toast("asks permission").locator(".monaco-button", has_text="Allow").click()
    wb.wait_status_text(r"^(?!.*needs you).*1 working · 3 open", timeout=30)
    wb.wait_status(ids["cli"], "idle")
    wb.shot("permission-answered")


def test_sessions_view_rows_and_descriptions(workbench: Workbench, ids: dict[str, str]) -> None:
    wb = workbench
    page = wb.page
    page.locator(".activitybar .action-item:has(a.action-label[aria-label=sessiond])").click()
    wb.row("demo").wait_for()
    # widen the side bar so descriptions are readable in the screenshots
    sashes = [s.bounding_box() for s in page.locator(".monaco-sash.vertical").all()]
    sash = next((b for b in sashes if b and 150 < b["x"] < 600 and b["height"] > 400), None)
    if sash:
        page.mouse.move(sash["x"] + 2, 400)
        page.mouse.down()
        page.mouse.move(820, 400, steps=8)
        page.mouse.up()
    assert wb.wait_description("demo", r"^3 open · 1 working")
    fix = wb.wait_description("Fix greet() typo", rf"^{ids['fix']} · idle · plan 2/3 · 60% · 1 file$")
    assert "files" not in fix
    wb.wait_description("Add a CLI", rf"^{ids['cli']} · idle · plan")
    wb.wait_description("Long refactor", rf"^{ids['long']} · working · plan 0/2")
    wb.row("Fix greet() typo").hover()
    time.sleep(1.5)
    hover = page.locator(".monaco-hover, .custom-hover, .workbench-hover").last.inner_text()
    assert re.search(r"idle since (just now|\d+ s ago|\d+ min ago)", hover), hover
    assert "T" not in re.findall(r"since (\S+)", hover)[0]  # no raw ISO timestamp
    wb.shot("sessions-view")


def test_status_bar_tooltip_of_the_current_session(workbench: Workbench, ids: dict[str, str]) -> None:
    wb = workbench
    wb.row("Fix greet() typo").click()
    wb.wait_status_text(r"3 open · 60%")
    wb.page.locator(STATUS).hover()
    hover = wb.page.locator(".monaco-hover, .workbench-hover").last
    hover.wait_for()
    time.sleep(0.5)
    text = hover.inner_text()
    assert "Context 60%: 120k of 200k tokens" in text, text
    assert "Changed files (1 file" in text, text
    wb.shot("status-bar-tooltip")


def test_transcript_document(workbench: Workbench, ids: dict[str, str]) -> None:
    wb = workbench
    wb.page.keyboard.press("Escape")
    wb.row("Fix greet() typo").click()
    wb.page.locator(".tabs-container .tab", has_text="Fix greet() typo.transcript").wait_for()
    deadline = time.monotonic() + 20
    while "Fixed." not in wb.editor_text() and time.monotonic() < deadline:
        time.sleep(0.3)
    text = wb.editor_text()
    assert f"# Fix greet() typo ({ids['fix']}) · demo · idle" in text, text
    assert "> plan Read | Fix | Test" in text, text
    assert "Fixed." in text, text
    wb.shot("transcript")


def test_changed_file_opens_the_diff_editor(workbench: Workbench, ids: dict[str, str]) -> None:
    wb = workbench
    row = wb.row("Fix greet() typo")
    if row.get_attribute("aria-expanded") != "true":
        row.locator(".monaco-tl-twistie").click()
    wb.row("app.py").click()
    diff = wb.page.locator(".monaco-diff-editor").first
    diff.wait_for()
    wb.page.locator(".tabs-container .tab", has_text="app.py (Fix greet() typo").wait_for()
    time.sleep(1)
    # side by side or inline (a narrow editor): the base's line and the session's line are both there
    text = diff.inner_text().replace("\xa0", " ")
    assert 'retrun f"Hello' in text, text
    assert 'return f"Hello' in text, text
    wb.shot("diff")


def test_a_click_right_after_an_update_opens_the_transcript(
    workbench: Workbench, ids: dict[str, str]
) -> None:
    """While another session updates every 0.1 s, a click on a row opens its transcript (the
    whole tree was redrawn on every change, and a click landing then collapsed the agent node)."""
    wb = workbench
    busy = wb.cli("new", "--root", str(wb.ws), "--title", "Chatty")
    steps = "\n".join(f"progress {1 + i % 3} in_progress\nsleep 0.1" for i in range(60))
    wb.send(busy, f"plan A | B | C\n{steps}\nsay quiet now")
    wb.wait_description("Chatty", "working")
    for attempt in range(5):
        wb.row("Add a CLI").click()
        wb.page.locator(".tabs-container .tab.active", has_text="Add a CLI.transcript").wait_for(timeout=5000)
        assert wb.row("demo").get_attribute("aria-expanded") == "true", (
            f"click {attempt + 1} collapsed the agent"
        )
        wb.row("Fix greet() typo").click()
        wb.page.locator(".tabs-container .tab.active", has_text="Fix greet() typo.transcript").wait_for(
            timeout=5000
        )
        assert wb.row("demo").get_attribute("aria-expanded") == "true", (
            f"click {attempt + 1} collapsed the agent"
        )
    wb.shot("click-during-updates")
    wb.wait_status(busy, "idle", timeout=60)


def test_restart_command(workbench: Workbench, ids: dict[str, str]) -> None:
    """ "sessiond: Restart the Daemon": asks first (a turn is working), stops the daemon, a new one
    starts (through `sessiond stdio`), and the cancelled turn leaves a mark in its transcript."""
    wb = workbench
    old_pid = wb.daemon.pid
    wb.run_command("sessiond: Restart the Daemon")
    dialog = wb.page.locator(".monaco-dialog-box")
    dialog.wait_for()
    assert "restarting the daemon cancels their turns" in dialog.inner_text()
    wb.shot("restart-asks-first")
    dialog.locator(".monaco-button", has_text="Restart").click()
    toast = wb.toast("restarted the daemon")
    toast.wait_for(timeout=90_000)
    message = toast.inner_text()
    match = re.search(r"pid (\d+) → (\d+)", message)
    assert match, message
    assert int(match.group(1)) == old_pid, message
    assert int(match.group(2)) != old_pid, message
    assert "1 running or queued turn was cancelled" in message, message
    wb.wait_status_text(r"^(?!.*working).*4 open", timeout=30)
    wb.wait_description("Long refactor", r"· stopped · plan")
    wb.row("Long refactor").click()
    wb.page.locator(".tabs-container .tab.active", has_text="Long refactor.transcript").wait_for()
    deadline = time.monotonic() + 20
    while "■ turn cancelled" not in wb.editor_text() and time.monotonic() < deadline:
        time.sleep(0.3)
    assert "■ turn cancelled" in wb.editor_text(), wb.editor_text()
    wb.shot("restarted-cancelled-mark")
