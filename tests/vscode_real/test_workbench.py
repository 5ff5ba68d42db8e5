"""The VS Code extension in a real VS Code (code-server in headless chromium), as a person uses it.

One workbench for the module; the tests run in order, each asserting on what is on the screen
(the status bar item, the Sessions view's rows, notifications, editors) and taking a screenshot
into build/vscode-ui/. The daemon starts with three demo sessions before VS Code opens:

- "Fix greet() typo": a plan, an edit of src/app.py, context 60%, a reply; then idle;
- "Add a CLI": a permission request, waiting before VS Code connects;
- "Long refactor": a turn that sleeps (working).

Then driving sessions from VS Code: a new session with a placement chosen, a multi-line prompt
composed and sent to a picked session, merging a worktree session (a failing gate, a place in the
queue, merged), the disconnected view, and a turn interrupted by a killed daemon.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.vscode_real.workbench import SESSIOND, STATUS, Workbench

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
    wb.wait_status(fix, "idle", timeout=120)
    wb.wait_status(cli, "needs_you", timeout=120)
    wb.wait_status(long, "working", timeout=120)
    return {"fix": fix, "cli": cli, "long": long}


def test_activates_at_startup_and_a_waiting_permission_pops_up(
    workbench: Workbench, ids: dict[str, str]
) -> None:
    """Without opening the view or running a command: the status bar item shows the fleet, and the
    permission request that was waiting before VS Code connected arrives as a notification (it was
    lost when the handler was set after connecting)."""
    wb = workbench
    started = time.monotonic()
    wb.page.goto(wb.url, timeout=120_000)  # type: ignore[attr-defined]
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
    """The notification's options are links (a progress notification, which the extension can
    withdraw); choosing one answers, and the notification goes."""
    wb = workbench
    toast = wb.toast("asks permission")
    wb.press(
        toast.locator("a", has_text="Allow"),
        lambda timeout: wb.wait_status_text(r"^(?!.*needs you).*1 working · 3 open", timeout),
    )
    wb.wait_status(ids["cli"], "idle")
    toast.wait_for(state="detached", timeout=30_000)
    wb.shot("permission-answered")


def test_a_permission_answered_elsewhere_takes_its_notification_away(
    workbench: Workbench, ids: dict[str, str]
) -> None:
    """Answered on the command line: the notification (with its live Allow link) goes away, in
    the toasts and in the notification centre; it stayed, and a click said "already answered"."""
    wb = workbench
    asker = wb.cli("new", "--root", str(wb.ws), "--title", "Asks elsewhere")
    wb.send(asker, "ask Delete the build/ folder?\nsay done")
    toast = wb.toast("Delete the build/ folder?")
    toast.wait_for(timeout=60_000)
    assert toast.locator("a", has_text="Allow").count(), toast.inner_text()
    wb.shot("permission-notification")
    wb.cli("allow", asker)
    wb.wait_status(asker, "idle", turns=1)
    toast.wait_for(state="detached", timeout=30_000)
    wb.run_command("Notifications: Show Notifications")
    center = wb.page.locator(".notifications-center")
    center.wait_for(timeout=15_000)
    time.sleep(0.5)
    assert "Delete the build/ folder?" not in center.inner_text(), center.inner_text()
    wb.shot("permission-notification-withdrawn")
    wb.page.keyboard.press("Escape")
    wb.cli("close", asker)


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
    # A clock time, right however long after the row was drawn it is read ("17 s ago" froze).
    assert re.search(r"idle since \d\d:\d\d:\d\d", hover), hover
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
    """While another session updates every 0.1 s, its row keeps up and a click on a row opens its
    transcript. (VS Code held back a view's refreshes while they came closer together than 200 ms:
    the whole tree froze for the turn, a new session's row "idle" throughout. And the whole tree
    was redrawn on every change: a click landing then collapsed the agent node.)"""
    wb = workbench
    busy = wb.cli("new", "--root", str(wb.ws), "--title", "Chatty")
    # ~30 s of updates: long enough to be seen working on a busy machine, and to click through.
    # Step A is done 3 s in; B and C take turns being in progress until the end.
    steps = "\n".join(
        ("progress 1 completed\n" if i == 30 else "") + f"progress {2 + i % 2} in_progress\nsleep 0.1"
        for i in range(300)
    )
    wb.send(busy, f"plan A | B | C\n{steps}\nsay quiet now")
    wb.wait_description("Chatty", "working", timeout=60)
    wb.wait_description("Chatty", r"working · plan 1/3", timeout=60)
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
    wb.wait_status(busy, "idle", timeout=120)


def test_palette_cancel_and_close_ask_which_session_and_name_it(
    workbench: Workbench, ids: dict[str, str]
) -> None:
    """From the palette (no row), Cancel Turns and Close Session pick the session (the current one
    first, marked), then say which one and what goes; they acted on a hidden "current" session."""
    wb = workbench
    page = wb.page
    wb.row("Fix greet() typo").click()  # the current session
    wb.wait_status_text(r"60%")
    wb.run_command("sessiond: Cancel Turns")
    first = page.locator(".quick-input-widget .quick-input-list .monaco-list-row").first
    first.wait_for(timeout=30_000)
    deadline = time.monotonic() + 10
    while "current" not in first.inner_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "Fix greet() typo" in first.inner_text(), first.inner_text()
    assert "current" in first.inner_text(), first.inner_text()
    assert wb.quick_pick_row("Long refactor").count()
    wb.shot("palette-cancel-picks")
    wb.pick("Long refactor")
    dialog = page.locator(".monaco-dialog-box")
    dialog.wait_for(timeout=15_000)
    assert f"Cancel 1 turn of Long refactor ({ids['long']}): its running turn?" in dialog.inner_text()
    wb.shot("palette-cancel-asks")
    page.keyboard.press("Escape")  # not now: the turn goes on
    dialog.wait_for(state="detached")
    wb.wait_description("Long refactor", "working")
    wb.command_and_pick("sessiond: Close Session", "Fix greet() typo")
    dialog.wait_for(timeout=15_000)
    assert f"Close Fix greet() typo ({ids['fix']})?" in dialog.inner_text(), dialog.inner_text()
    wb.shot("palette-close-asks")
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    assert any(row["id"] == ids["fix"] for row in wb.listed() if row["status"] != "closed")


def test_a_side_chat_that_needs_you_shows_on_its_parent(workbench: Workbench, ids: dict[str, str]) -> None:
    """A side chat asks permission under a collapsed parent: the parent's row says so (and its
    tooltip), shows the bell, and comes first among the sessions."""
    wb = workbench
    parent = wb.cli("new", "--root", str(wb.ws), "--title", "Parent of a side chat")
    wb.wait_row("Parent of a side chat", "idle")
    side = subprocess.Popen(
        [str(SESSIOND), "side", "--close", parent, "ask Run rm -rf build?"],
        env=wb.daemon.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wb.senders.append(side)
    row = wb.wait_row("Parent of a side chat", r"side chat s\d+ needs you", timeout=60)
    first = wb.page.locator(".pane-body .monaco-list-row").nth(1)  # under the agent's row
    assert "Parent of a side chat" in first.inner_text(), first.inner_text()
    tip = wb.hover_text(row, "needs you")
    assert 'needs you: "Run rm -rf build?"' in tip, tip
    wb.shot("side-chat-needs-you-on-parent")
    wb.page.mouse.move(0, 0)
    child = next(s["id"] for s in wb.listed() if s.get("parent") == parent)
    wb.cli("allow", child)
    wb.wait_row("Parent of a side chat", r"^s\d+ · idle$", timeout=60)
    wb.cli("close", parent)


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
    wb.open_transcript("Long refactor")
    deadline = time.monotonic() + 20
    while "■ turn cancelled" not in wb.editor_text() and time.monotonic() < deadline:
        time.sleep(0.3)
    assert "■ turn cancelled" in wb.editor_text(), wb.editor_text()
    wb.shot("restarted-cancelled-mark")


# ------------------------------------------------------------------ driving sessions from VS Code
# Each of these also runs on its own (`-k`): wb.open() loads the workbench when no test did.

NOTES = "Notes in a worktree"


def test_new_session_with_a_placement_chosen(workbench: Workbench) -> None:
    """ "sessiond: New Session…" asks the root (the workspace folder first) and the placement; a
    placement the daemon refuses shows the daemon's sentence; the new session's compose editor
    names it and its send button sends the first prompt, which makes the worktree."""
    wb = workbench
    wb.open()
    page = wb.page
    # A placement the daemon refuses: its own sentence, as it says it.
    wb.command_and_pick("sessiond: New Session…", wb.ws.name)
    wb.pick("ssh")
    wb.answer("ssh", "")
    wb.answer("Title of the new session", "Over ssh")
    toast = wb.toast("needs a target")
    toast.wait_for()
    assert "sessiond: placement ssh needs a target (user@host[:port])" in toast.inner_text()
    wb.shot("new-session-refused")
    toast.hover()
    toast.locator(".codicon-notifications-clear").click()

    wb.run_command("sessiond: New Session…")
    wb.quick_pick_row(str(wb.ws))
    assert "Another folder" in page.locator(".quick-input-widget .quick-input-list").inner_text()
    wb.pick(wb.ws.name)
    wb.quick_pick_row("a git worktree of its own")
    labels = page.locator(".quick-input-list .monaco-list-row .label-name").all_inner_texts()
    for name in ("here", "worktree", "sandbox", "container", "ssh"):
        assert name in [label.strip() for label in labels], labels
    wb.shot("new-session-placement")
    wb.pick("worktree")
    wb.answer("Title of the new session", NOTES)
    sid = wb.session_id(NOTES)
    tab = page.locator(".tabs-container .tab.active", has_text=f"Prompt for {NOTES} ({sid}).md")
    tab.wait_for()
    page.keyboard.type("write NOTES.md notes from VS Code")
    wb.shot("compose-first-prompt")
    page.locator('.editor-actions [aria-label*="Send Prompt to Its Session"]').first.click()
    tab.wait_for(state="detached")
    wb.wait_status(sid, "idle", turns=1)
    shown = json.loads(wb.cli("show", sid, "--json"))
    assert shown["placement"] == "worktree", shown
    assert shown["where"]["placement"] == "worktree", shown
    assert "sessiond-worktrees" in shown["where"]["root"], shown
    assert [line["text"] for line in shown["transcript"]["lines"] if line["role"] == "user"] == [
        "write NOTES.md notes from VS Code"
    ]
    wb.wait_row(NOTES, rf"^{sid} · idle")


def test_a_multi_line_prompt_composed_and_sent_to_the_picked_session(workbench: Workbench) -> None:
    """ "sessiond: Send Prompt…" from the palette asks which session (with its status and its last
    prompt whole), opens a compose editor named after it, and Ctrl+Enter sends every line there."""
    wb = workbench
    wb.open()
    page = wb.page
    if not any(json.loads(r).get("title") == NOTES for r in wb.cli("ls", "--json").splitlines()):
        sid = wb.cli("new", "--root", str(wb.ws), "--placement", "worktree", "--title", NOTES)
        wb.cli("send", sid, "write NOTES.md notes from VS Code")
    sid = wb.session_id(NOTES)
    other = wb.cli("new", "--root", str(wb.ws), "--title", "Not this one")
    wb.wait_row("Not this one", "idle")
    # A last prompt far wider than the pick.
    long_prompt = "say " + " ".join(
        f"step {i}: move rule {i} of the parser into a function of its own, then test it;" for i in (1, 2, 3)
    )
    assert len(long_prompt) > 200
    wordy = wb.cli("new", "--root", str(wb.ws), "--title", "Wordy")
    wb.cli("send", wordy, long_prompt)
    wb.run_command("sessiond: Send Prompt…")
    # Its line is cut on screen; the line's hover has it whole.
    wordy_row = wb.quick_pick_row("Wordy")
    detail = wordy_row.locator(".quick-input-list-label-meta .monaco-icon-label-container")
    deadline = time.monotonic() + 15
    while "step 3" not in detail.inner_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    scroll, client = detail.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert scroll > client, f"the prompt fits its line ({scroll} <= {client} px): the test needs a longer one"
    hover = " ".join(wb.hover_text(detail, "then test it;").split())
    assert f"\u203a {long_prompt}" in hover, hover
    wb.shot("send-prompt-pick-long-prompt-hovered")
    wb.page.mouse.move(0, 0)
    row = wb.quick_pick_row(NOTES)
    deadline = time.monotonic() + 15
    last_prompt = "\u203a write NOTES.md notes from VS Code"  # its detail line: the prompt whole
    while last_prompt not in row.inner_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    text = row.inner_text()
    assert last_prompt in text, text
    assert "idle" in text, text
    assert wb.quick_pick_row("Not this one").count()
    wb.shot("send-prompt-pick")
    before = wb.turns(sid)
    wb.pick(NOTES)
    tab = page.locator(".tabs-container .tab.active", has_text=f"Prompt for {NOTES} ({sid}).md")
    tab.wait_for()
    lines = ["plan Compose | Send", "progress 1 completed", "say composed in VS Code"]
    wb.type_lines(lines)
    wb.shot("compose-multi-line")
    page.keyboard.press("Control+Enter")
    tab.wait_for(state="detached")
    wb.wait_status(sid, "idle", turns=before + 1)
    shown = json.loads(wb.cli("show", sid, "--json", "--lines", "50"))
    turns: dict[str, list[str]] = {}
    for line in shown["transcript"]["lines"]:
        if line["role"] == "user":
            turns.setdefault(line["turn"], []).append(line["text"])
    assert list(turns.values())[-1] == lines, turns
    assert shown["recap"] == "composed in VS Code", shown["recap"]
    untouched = json.loads(wb.cli("show", other, "--json"))
    assert untouched["turns"] == 0, untouched
    assert not untouched["transcript"]["lines"], untouched
    wb.wait_row(NOTES, "plan 1/2")


def test_a_turn_s_progress_says_needs_you_while_it_waits(workbench: Workbench) -> None:
    """A turn sent from VS Code shows its progress in a notification; while its session waits for
    a permission the notification says "needs you: …" (not "working"); once answered, it says what
    the turn does again."""
    wb = workbench
    wb.open()
    page = wb.page
    title = "Asks from VS Code"
    sid = wb.cli("new", "--root", str(wb.ws), "--title", title)
    wb.wait_row(title, "idle")
    wb.command_and_pick("sessiond: Send Prompt…", title)
    tab = page.locator(".tabs-container .tab.active", has_text=f"Prompt for {title} ({sid}).md")
    tab.wait_for()
    wb.type_lines(["say looking at the cache", "ask Delete the build cache?", "hang"])
    page.keyboard.press("Control+Enter")
    tab.wait_for(state="detached")
    # Titled by the one label rule (the daemon's title says "sessiond s8").
    # (The permission's notification names the session too: the progress one has Cancel.)
    progress = page.locator(".notification-toast", has_text=f"sessiond {title} ({sid})").filter(
        has=page.locator(".monaco-button", has_text="Cancel")
    )
    progress.filter(has_text="needs you: Delete the build cache?").wait_for(timeout=60_000)
    assert "working" not in progress.inner_text(), progress.inner_text()
    wb.shot("progress-needs-you")
    # The daemon's word for what the turn does now: the agent's line after the answer.
    answered = progress.filter(has_text='Asked "Delete the build cache?": Allow')
    wb.press(
        wb.toast("asks permission").locator("a", has_text="Allow"),
        lambda timeout: answered.wait_for(timeout=timeout * 1000),
        timeout=60,
    )
    assert "needs you" not in progress.inner_text(), progress.inner_text()
    wb.wait_status(sid, "working")
    wb.shot("progress-after-the-answer")
    wb.cli("cancel", sid)
    progress.wait_for(state="detached", timeout=60_000)
    wb.wait_status(sid, "stopped")


def test_a_failed_turn_is_marked_in_its_open_transcript(workbench: Workbench) -> None:
    wb = workbench
    wb.open()
    title = "Fails on purpose"
    sid = wb.cli("new", "--root", str(wb.ws), "--title", title)
    wb.open_transcript(title, row=wb.wait_row(title, "idle"))
    wb.send(sid, "say trying once\nfail the demo agent gives up")
    text = wb.wait_editor_text("■ turn failed", timeout=60)
    mark = next(line for line in text.splitlines() if line.startswith("■ turn failed"))
    assert "the demo agent gives up" in mark, text
    assert text.index("trying once") < text.index(mark), text
    wb.wait_row(title, rf"^{sid} · failed")
    wb.shot("failed-turn-mark")


def test_merge_a_worktree_session_from_its_row(workbench: Workbench) -> None:
    """ "Merge Session…" on a worktree session's row: a failing gate (strategy merge, the failure
    handed back) is an error notification whose button shows the gate's output (main untouched)
    and the session's next prompt; asked again behind another merge (rebase, keep the worktree)
    it says its place in the queue, the "Merge queue" node shows both, then it is merged into
    main as a straight line on the other's merge commit, its worktree kept."""
    wb = workbench
    wb.open()
    page = wb.page
    if not any(json.loads(r).get("title") == NOTES for r in wb.cli("ls", "--json").splitlines()):
        sid = wb.cli("new", "--root", str(wb.ws), "--placement", "worktree", "--title", NOTES)
        wb.cli("send", sid, "write NOTES.md notes from VS Code")
    sid = wb.session_id(NOTES)
    ahead = wb.cli("new", "--root", str(wb.ws), "--placement", "worktree", "--title", "Ahead in line")
    wb.cli("send", ahead, "write OTHER.md ahead")
    wb.wait_row("Ahead in line", rf"^{ahead} · idle")  # the tree settled: no row added under the mouse
    wb.context_menu(
        NOTES, "Merge Session…", described=rf"^{sid} · idle", then=wb.quick_pick_locator("a merge commit")
    )
    wb.pick("merge")
    wb.answer("gate", "echo the gate says no; exit 3")
    wb.check_option("Hand a failure back to the session")
    page.keyboard.press("Enter")
    toast = wb.toast("failed")
    toast.wait_for(timeout=60_000)
    message = toast.inner_text()
    gate = "the gate `echo the gate says no; exit 3` failed (exit code 3)"
    assert f"merging {NOTES} ({sid}) failed: {gate}" in message, message
    assert "main and the working copy are as they were" in message
    wb.wait_row(NOTES, rf"^{sid} · idle · .*merge failed: gate")  # its row under demo
    wb.wait_row(NOTES, rf"^{sid} · merge failed: gate · sessiond/.* → main$")  # under "Merge queue"
    wb.wait_description("Merge queue", "^1 failed$")
    wb.shot("merge-gate-failed")
    wb.press(
        toast.locator(".monaco-button", has_text="Show Gate Output"),
        lambda timeout: wb.wait_editor_text("the gate says no", timeout),
    )
    assert subprocess.run(["git", "cat-file", "-e", "main:NOTES.md"], cwd=wb.ws).returncode != 0
    # Handed back: the failure is the session's next prompt.
    deadline = time.monotonic() + 60
    prompts: list[str] = []
    while time.monotonic() < deadline:
        shown = json.loads(wb.cli("show", sid, "--json", "--lines", "50"))
        prompts = [line["text"] for line in shown["transcript"]["lines"] if line["role"] == "user"]
        if shown["status"] == "idle" and any("was stopped by the gate" in text for text in prompts):
            break
        time.sleep(0.5)
    handed = next((text for text in prompts if "was stopped by the gate" in text), "")
    assert handed.startswith("Merging your branch sessiond/"), prompts
    assert "`echo the gate says no; exit 3`" in handed, handed

    # Another merge goes first and holds the line (its gate waits for the test's word): ours waits.
    go = wb.base / "let-the-merge-ahead-go"
    go.unlink(missing_ok=True)
    hold = f"while [ ! -e {go} ]; do sleep 0.1; done"
    blocker = subprocess.Popen(
        [str(SESSIOND), "merge", ahead, "--gate", hold],
        env=wb.daemon.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wb.senders.append(blocker)
    wb.wait_row("Ahead in line", "merging")
    wb.run_command("sessiond: Merge Session…")
    wb.quick_pick_row(NOTES)
    assert "Not this one" not in page.locator(".quick-input-widget .quick-input-list").inner_text()
    wb.pick(NOTES)
    wb.pick("rebase")
    wb.answer("gate", "test -f NOTES.md")
    wb.check_option("Keep the worktree and branch")
    page.keyboard.press("Enter")
    wb.toast("next in the merge queue").wait_for(timeout=30_000)
    wb.wait_description("Merge queue", "1 merging · 1 waiting")
    wb.wait_row(NOTES, "next in the merge queue")
    wb.shot("merge-queued")
    go.touch()
    merged = wb.toast(f"merged {NOTES} ({sid}) into main")
    merged.wait_for(timeout=90_000)
    assert blocker.wait(30) == 0
    show = subprocess.run(["git", "show", "main:NOTES.md"], cwd=wb.ws, capture_output=True, text=True)
    assert show.stdout.startswith("notes from VS Code"), show

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=wb.ws, capture_output=True, text=True, check=True).stdout

    # The history: "Ahead in line" went in with a merge commit (the command line's default);
    # ours, rebased, is a straight line on top of it, with no merge commit of its own.
    tip = git("rev-list", "--parents", "-n", "1", "main").split()
    assert len(tip) == 2, f"the rebased commit has one parent: {tip}"
    assert git("log", "-1", "--format=%s", "main").startswith(f"sessiond: work of session {sid}-")
    merges = git("rev-list", "--merges", "main").split()
    assert len(merges) == 1, git("log", "--graph", "--oneline", "main")
    assert tip[1] == merges[0], "rebased onto the merge of the session ahead"
    assert "OTHER.md" in git("show", "--format=", "--name-only", f"{merges[0]}^2")
    # Kept as asked: the worktree and its branch are still there.
    where = json.loads(wb.cli("show", sid, "--json"))["where"]
    assert where["branch"], where
    assert Path(where["root"]).is_dir(), where
    assert f"branch refs/heads/{where['branch']}" in git("worktree", "list", "--porcelain")
    wb.wait_row(NOTES, rf"^{sid} · idle · .*merged")
    wb.wait_row(NOTES, rf"^{sid} · merged [0-9a-f]{{7}} · sessiond/.* → main$")
    wb.wait_description("Merge queue", "^2 merged$")
    wb.shot("merged")


def test_the_timeline_opens_in_a_tab(workbench: Workbench, ids: dict[str, str]) -> None:
    """The run's timeline from the palette: these sessions are in no run, so it draws the last
    hour, drawn by the `sessiond` command line and shown in a tab of its own (a webview); the
    page is kept in the extension's folder, one file however often it opens."""
    wb = workbench
    wb.open()
    page = wb.page
    wb.run_command("sessiond: Open the Run's Timeline")
    page.locator(".tabs-container .tab.active", has_text="sessiond timeline · last hour").wait_for(
        timeout=60_000
    )
    # The page inside the webview (two frames deep) drew its header: the sessions of the hour.
    inner = page.frame_locator("iframe.webview").frame_locator("iframe")
    header = inner.locator("body")
    deadline = time.monotonic() + 30
    while not re.search(r"[1-9]\d*\s*sessions", header.inner_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert re.search(r"[1-9]\d*\s*sessions", header.inner_text()), header.inner_text()[:500]
    wb.shot("timeline")
    page.keyboard.press("Control+W")
    # The page is a file in the extension's own folder, written afresh when it opens again: no
    # temporary folder left behind per opening.
    folder = wb.base / "user-data" / "User" / "globalStorage" / "sessiond.sessiond-vscode" / "timelines"
    assert f"written to {folder / 'last-hour.html'}" in wb.extension_log()
    drawn = (folder / "last-hour.html").stat().st_mtime_ns
    wb.run_command("sessiond: Open the Run's Timeline")
    page.locator(".tabs-container .tab.active", has_text="sessiond timeline · last hour").wait_for(
        timeout=60_000
    )
    assert wb.extension_log().count(f"written to {folder / 'last-hour.html'}") == 2
    assert [p.name for p in folder.iterdir()] == ["last-hour.html"]
    assert (folder / "last-hour.html").stat().st_mtime_ns > drawn
    page.keyboard.press("Control+W")


def test_the_disconnected_view(workbench: Workbench) -> None:
    """The daemon stops (and the extension may not start one): the rows stay, marked stale, the
    status bar says it is not connected, and its tooltip names a command that is in the palette
    and that connects at once when run; connected, no tooltip keeps the old error."""
    wb = workbench
    page = wb.page
    wb.cli("new", "--root", str(wb.ws), "--title", "Open before the stop")  # a row to go stale
    # The window loaded again reads the setting at once (its file watcher would bring it late).
    wb.set_setting("sessiond.startDaemon", False)
    wb.reload()
    try:
        wb.open()
        wb.wait_status_text(r"open", timeout=60)
        # Killed (a stop on purpose is another state: test_a_stopped_daemon_stays_stopped).
        os.kill(json.loads(wb.cli("status", "--json"))["pid"], signal.SIGKILL)
        wb.wait_status_text(r"^sessiond: not connected$", timeout=60)
        wb.wait_description("demo", r"^not connected · last known: \d+ open")  # as the status bar says
        stale = page.locator(
            ".pane-body .monaco-list-row .label-description", has_text=re.compile(r" · stale$")
        )
        stale.first.wait_for()
        tip = wb.hover_text(page.locator(STATUS), "Not connected", timeout=60)
        assert re.search(r"Not connected to sessiond since (just now|\d+ s ago)", tip), tip
        assert "marked stale" in tip, tip
        named = re.search(r'run "(sessiond: [^"]+)"', tip)
        assert named, tip
        # Why it is not connected, as the tooltip says it: gone once connected again.
        error = re.search(r"since (?:just now|\d+ s ago): (.+?)\. The Sessions view", tip)
        assert error, tip
        row_tip = wb.hover_text(stale.first, "not connected to sessiond")
        assert f'run "{named.group(1)}"' in row_tip, row_tip
        wb.shot("disconnected")
        page.keyboard.press("Escape")
        # A daemon started by hand again: the command the tooltip names connects to it now, and
        # says so (the extension's own retries, every few seconds, say nothing of the kind).
        wb.daemon.start()
        log_before = len(wb.extension_log())
        wb.run_command(named.group(1))
        connected = wb.toast("sessiond: connected through socket")
        connected.wait_for(timeout=60_000)
        assert str(wb.daemon.socket) in connected.inner_text(), connected.inner_text()
        log = wb.extension_log()[log_before:]
        asked = log.find(f"reconnecting now, as asked ({named.group(1)})")
        made = log.find(f"connected through socket {wb.daemon.socket} ({named.group(1)})")
        assert 0 <= asked < made, f"the command's log lines, in order:\n{log}"
        wb.shot("reconnected-by-the-command")
        wb.wait_status_text(r"open", timeout=60)
        wb.wait_description("demo", r"^\d+ open")
        # Each row loses its stale mark as it is redrawn (the rows inside a moment after their agent).
        stale.first.wait_for(state="detached", timeout=30_000)
        # The tooltips, connected: no old error, no "not connected".
        tip = wb.hover_text(page.locator(STATUS), "Click to pick a session")
        assert "Not connected" not in tip, tip
        assert error.group(1) not in tip, tip
        row_tip = wb.hover_text(wb.row("Open before the stop"), "Open before the stop")
        assert "not connected" not in row_tip, row_tip
    finally:
        wb.set_setting("sessiond.startDaemon", True)
        wb.reload()


def test_an_interrupted_turn(workbench: Workbench) -> None:
    """The daemon is killed mid-turn; VS Code starts it again (through `sessiond stdio`), and the
    open transcript and the row show the turn interrupted."""
    wb = workbench
    wb.open()
    killed = wb.cli("new", "--root", str(wb.ws), "--title", "Killed mid-turn")
    wb.send(killed, "plan Wait | Never\nprogress 1 in_progress\nsleep 300")
    wb.wait_row("Killed mid-turn", "working")
    wb.open_transcript("Killed mid-turn")
    wb.wait_editor_text("> sleep 300")
    pid = json.loads(wb.cli("status", "--json"))["pid"]
    os.kill(pid, signal.SIGKILL)
    mark = "■ turn interrupted: the daemon stopped while this turn was running"
    text = wb.wait_editor_text(mark, timeout=90)
    assert "send it again" in text, text
    # The cut-off turn ended it as failed (not "working", not stale: connected to the new daemon).
    wb.wait_row("Killed mid-turn", rf"^{killed} · failed( · plan \d+/\d+)?$")  # its plan, if stored
    assert json.loads(wb.cli("status", "--json"))["pid"] != pid
    # Said once, naming the turn: the row's tooltip was the only place before.
    lost = wb.toast("the daemon stopped unexpectedly")
    lost.wait_for(timeout=30_000)
    assert f"1 turn was interrupted: Killed mid-turn ({killed})" in lost.inner_text(), lost.inner_text()
    wb.shot("interrupted")


def test_an_open_transcript_says_it_is_not_live_while_not_connected(workbench: Workbench) -> None:
    """A transcript open while the daemon is stopped says it is not connected (not "following
    live", which it said with nothing to follow); started again, it follows live again."""
    wb = workbench
    title = "Read across a stop"
    sid = wb.cli("new", "--root", str(wb.ws), "--title", title)
    wb.open()  # (a row to show: the view has one when this test runs on its own)
    assert wb.send(sid, "say before the stop").wait(timeout=60) == 0
    wb.wait_row(title, rf"^{sid} · idle")
    wb.open_transcript(title)
    wb.wait_editor_text("# following live")
    wb.cli("stop")
    wb.wait_status_text(r"^sessiond: stopped$", timeout=60)
    text = wb.wait_editor_text("# not connected: shown as it was", timeout=60)
    assert "following live" not in text, text
    assert "before the stop" in text, text
    wb.shot("transcript-not-connected")
    wb.daemon.start()
    wb.wait_status_text(r"open", timeout=60)
    text = wb.wait_editor_text("# following live", timeout=60)
    assert "not connected" not in text, text
    wb.page.keyboard.press("Control+W")


# The notice of a stop (a command run while stopped says "the daemon was stopped, so …" too).
STOP_NOTICE = "does not start it again by itself"


def test_a_stopped_daemon_stays_stopped(workbench: Workbench) -> None:
    """`sessiond stop` (sessiond.startDaemon on): the extension starts no daemon again by itself;
    the status bar and a notification say it was stopped; New Session says so before asking
    anything; a click on the status bar offers to start it, which connects."""
    wb = workbench
    wb.cli("new", "--root", str(wb.ws), "--title", "Open across a stop")
    wb.open()  # (a row to show: the view has one when this test runs on its own)
    page = wb.page
    wb.wait_status_text(r"open", timeout=60)
    wb.cli("stop")
    wb.wait_status_text(r"^sessiond: stopped$", timeout=60)
    stopped = wb.toast(STOP_NOTICE)
    stopped.wait_for(timeout=30_000)
    # The agent's row in the status bar's words ("disconnected" beside "stopped" before).
    wb.wait_description("demo", r"^stopped · last known: \d+ open")
    time.sleep(4)  # several reconnect attempts
    status = subprocess.run([str(SESSIOND), "status"], env=wb.daemon.env, capture_output=True, timeout=60)
    assert status.returncode != 0, status.stdout
    wb.shot("daemon-stopped-stays-stopped")
    wb.run_command("sessiond: New Session…")
    wb.toast("no session can be opened").wait_for(timeout=15_000)
    time.sleep(1)
    assert not wb.quick_pick_locator("Another folder").is_visible()  # said first, no folder asked
    wb.shot("new-session-while-stopped")
    page.locator(STATUS).click()
    wb.quick_pick_row("Start the Daemon")
    assert wb.quick_pick_row("Reconnect").count()
    wb.shot("status-click-while-stopped")
    wb.pick("Start the Daemon")
    wb.toast("sessiond: connected through").wait_for(timeout=60_000)
    # Asked to start the daemon while New Session waited on it: New Session goes on.
    wb.quick_pick_row("Another folder")
    wb.shot("new-session-goes-on-once-started")
    wb.dismiss()
    wb.wait_status_text(r"open", timeout=60)
    assert json.loads(wb.cli("status", "--json"))["pid"]
    # Started again: "the daemon was stopped" is withdrawn (it stayed, with its Start button).
    stopped.wait_for(state="detached", timeout=30_000)
    wb.assert_no_notification(STOP_NOTICE)
    # So is New Session's "no session can be opened".
    wb.assert_no_notification("no session can be opened")


def test_a_daemon_started_elsewhere_withdraws_the_stop_notice(workbench: Workbench) -> None:
    """Stopped, then started from outside VS Code (`sessiond serve`): the extension connects to it
    and the notice that the daemon was stopped goes, from the toasts and the notification centre."""
    wb = workbench
    wb.cli("new", "--root", str(wb.ws), "--title", "Open across a stop")
    wb.open()  # (a row to show: the view has one when this test runs on its own)
    wb.wait_status_text(r"open", timeout=60)
    wb.cli("stop")
    stopped = wb.toast(STOP_NOTICE)
    stopped.wait_for(timeout=30_000)
    assert "Start the Daemon" in stopped.inner_text(), stopped.inner_text()
    wb.wait_status_text(r"^sessiond: stopped$", timeout=60)
    wb.wait_description("demo", r"^stopped · last known: \d+ open")
    wb.shot("stop-notice")
    wb.daemon.start()
    wb.wait_status_text(r"open", timeout=60)
    stopped.wait_for(state="detached", timeout=30_000)
    wb.assert_no_notification(STOP_NOTICE)
    wb.wait_description("demo", r"^\d+ open")
    wb.shot("stop-notice-withdrawn")


def test_files_two_sessions_commands_may_both_have_made_say_so(workbench: Workbench) -> None:
    """Two sessions in the workspace whose agents' own commands wait for each other: under one
    of them, each file it lists says whom it is shared with."""
    wb = workbench
    wb.open()
    ws = str(wb.ws)
    one = wb.cli("new", "--root", ws, "--title", "Shared one")
    two = wb.cli("new", "--root", ws, "--title", "Shared two")
    wait_for = "while [ ! -f {0} ]; do sleep 0.02; done"
    sends = [
        wb.send(one, f"shell sh -c 'touch one-up; {wait_for.format('two-up')}; echo 1 > one.txt'"),
        wb.send(two, f"shell sh -c 'touch two-up; {wait_for.format('one-up')}; echo 2 > two.txt'"),
    ]
    assert [send.wait(timeout=120) for send in sends] == [0, 0]
    wb.wait_row("Shared one", rf"^{one} · idle\b.* · 4 files$", timeout=60)
    wb.wait_row("Shared two", rf"^{two} · idle\b.* · 4 files$", timeout=60)
    row = wb.row("Shared one")
    if row.get_attribute("aria-expanded") != "true":
        row.locator(".monaco-tl-twistie").click()  # its "Changed files" comes expanded
    for name in ("one.txt", "two.txt"):
        wb.wait_description(name, rf"^A · \+1 \u22120 · shared with {two}$")  # (a minus sign)
    wb.shot("shared-files")


def test_a_session_named_by_its_first_prompt_renamed_from_its_row(workbench: Workbench) -> None:
    """Opened with no title, a session's row takes its first prompt's words; Rename Session… on the
    row names it, and the agent's own name for it after that is not taken."""
    wb = workbench
    wb.open()
    sid = wb.cli("new", "--root", str(wb.ws))
    first = "say named by the first prompt"
    assert wb.send(sid, f"{first}\nsay done").wait(timeout=60) == 0
    wb.wait_row(first, rf"^{sid} · idle")
    prompt = wb.page.locator(".quick-input-widget", has_text=f"Rename {sid}")
    wb.context_menu(first, "Rename Session…", then=prompt)
    assert prompt.locator("input").first.input_value() == first  # the title, to edit
    wb.answer(f"Rename {sid}", "Renamed in VS Code")
    wb.wait_row("Renamed in VS Code", rf"^{sid} · idle")
    wb.shot("renamed")
    assert wb.send(sid, "title The agent's own name\nsay ok").wait(timeout=60) == 0  # (its turn ended)
    assert json.loads(wb.cli("show", sid, "--json"))["title"] == "Renamed in VS Code"
    wb.wait_row("Renamed in VS Code", rf"^{sid} · idle")


def test_a_closed_session_reopened_from_the_palette(workbench: Workbench) -> None:
    """A session closed elsewhere leaves the view; Reopen Session… offers those closed last, and the
    one picked comes back as it was (its title, its turns) and goes on with its agent."""
    wb = workbench
    wb.open()
    sid = wb.cli("new", "--root", str(wb.ws), "--title", "Closed by mistake")
    assert wb.send(sid, "say before the close").wait(timeout=60) == 0
    wb.wait_row("Closed by mistake", rf"^{sid} · idle")
    wb.cli("close", sid)
    wb.row("Closed by mistake").wait_for(state="detached", timeout=30_000)  # it leaves the view
    wb.command_and_pick("sessiond: Reopen Session…", "Closed by mistake")
    wb.wait_row("Closed by mistake", rf"^{sid} · idle")
    wb.shot("reopened")
    assert json.loads(wb.cli("show", sid, "--json"))["turns"] == 1  # as it was
    assert wb.send(sid, "history").wait(timeout=60) == 0  # its agent goes on with the conversation
    assert "1. say before the close" in wb.cli("show", sid)


def test_a_reopened_session_s_open_transcript_follows_its_status(workbench: Workbench) -> None:
    """A session's transcript open as it is closed elsewhere and reopened: its header says
    "closed", then "idle" again, as its row does (it kept "closed" until a turn came)."""
    wb = workbench
    title = "Reopened under its transcript"
    sid = wb.cli("new", "--root", str(wb.ws), "--title", title)
    wb.open()  # (a row to show: the view has one when this test runs on its own)
    assert wb.send(sid, "say before the close").wait(timeout=60) == 0
    wb.wait_row(title, rf"^{sid} · idle")
    wb.open_transcript(title)
    wb.wait_editor_text(f"# {title}")
    wb.wait_editor_text(" · idle")
    wb.cli("close", sid)
    wb.row(title).wait_for(state="detached", timeout=30_000)
    wb.wait_editor_text(" · closed", timeout=60)
    wb.command_and_pick("sessiond: Reopen Session…", title)
    wb.wait_row(title, rf"^{sid} · idle")
    text = wb.wait_editor_text(" · idle", timeout=60)
    assert " · closed" not in text, text
    wb.shot("reopened-transcript-header")
    wb.page.keyboard.press("Control+W")
    wb.cli("close", sid)


def test_side_chats_of_one_session_read_apart_under_it(workbench: Workbench) -> None:
    """Open Side Chat… on a session's row, twice: each side chat comes under the session, named by
    its question (both read "side of s1" before)."""
    wb = workbench
    wb.open()
    sid = wb.cli("new", "--root", str(wb.ws), "--title", "Asked aside")
    assert wb.send(sid, "say the main work").wait(timeout=60) == 0
    wb.wait_row("Asked aside", rf"^{sid} · idle")
    questions = ("why is the build slow?", "what does greet() touch?")
    for question in questions:
        prompt = wb.page.locator(".quick-input-widget", has_text="Side chat beside Asked aside")
        wb.context_menu("Asked aside", "Open Side Chat…", then=prompt)
        wb.answer("Side chat beside Asked aside", question)
        wb.page.locator(".tabs-container .tab.active", has_text=question).wait_for(timeout=60_000)
        # The progress of asking goes once it is answered.
        wb.toast(f"side chat beside {sid}").wait_for(state="hidden", timeout=30_000)
    row = wb.row("Asked aside")
    if row.get_attribute("aria-expanded") != "true":
        row.locator(".monaco-tl-twistie").click()
    for question in questions:
        wb.wait_row(question, r"^s\d+ · side chat · idle\b", timeout=60)
    wb.shot("side-chats")
    sides = [s for s in wb.listed() if s.get("parent") == sid]
    assert sorted(s["title"] for s in sides) == sorted(questions)


def test_a_draft_closed_unsent_is_discarded_without_a_question(workbench: Workbench) -> None:
    """A compose editor closed without sending: no "Do you want to save?" dialog, nothing sent, and
    the next compose editor for that session starts empty (the draft went with its editor)."""
    wb = workbench
    page = wb.page
    title = "Draft thrown away"
    sid = wb.cli("new", "--root", str(wb.ws), "--title", title)
    wb.open()  # (a row to show: the view has one when this test runs on its own)
    wb.wait_row(title, "idle")
    wb.command_and_pick("sessiond: Send Prompt…", title)
    tab = page.locator(".tabs-container .tab.active", has_text=f"Prompt for {title} ({sid}).md")
    tab.wait_for()
    wb.type_lines(["say not this after all"])
    # Kept as typed: the tab shows no unsaved mark, as a person sees it before closing.
    page.locator(".tabs-container .tab.active.dirty").wait_for(state="detached", timeout=15_000)
    wb.shot("draft-before-close")
    page.keyboard.press("Control+W")
    tab.wait_for(state="detached", timeout=15_000)
    time.sleep(1)
    assert not page.locator(".monaco-dialog-box").count(), wb.seen()
    assert wb.turns(sid) == 0
    wb.shot("draft-closed")
    wb.command_and_pick("sessiond: Send Prompt…", title)
    tab.wait_for()
    time.sleep(0.5)
    assert "not this after all" not in wb.editor_text(), wb.editor_text()
    page.keyboard.press("Control+W")
    tab.wait_for(state="detached", timeout=15_000)
    wb.cli("close", sid)


def test_closing_the_selected_session_says_no_error(workbench: Workbench) -> None:
    """A session selected in the view (gone to with "Go to Session…", which reveals it), whose side
    chat asks permission as it opens, closed from the palette, then reopened (which selects it again):
    its row goes and comes back, and nothing fails on the way, neither an error notification nor
    the extension host's "Cannot resolve tree item" (a reveal right after a change looked among
    the rows drawn before it: the reopened session was not among its agent's)."""
    wb = workbench
    page = wb.page
    title = "Closed while selected"
    sid = wb.cli("new", "--root", str(wb.ws), "--title", title)
    wb.open()  # (a row to show: the view has one when this test runs on its own)
    wb.cli("send", sid, "say here")
    wb.wait_row(title, rf"^{sid} · idle")
    wb.command_and_pick("sessiond: Go to Session…", title)
    page.locator(".pane-body .monaco-list-row.selected", has_text=title).wait_for(timeout=15_000)
    failures = ("Cannot resolve tree item", "Failed to resolve tree node")
    before = [wb.host_log().count(failure) for failure in failures]
    side = subprocess.Popen(
        [str(SESSIOND), "side", sid, "ask Delete the cache?"],
        env=wb.daemon.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wb.senders.append(side)
    wb.wait_row(title, r"side chat s\d+ needs you", timeout=60)
    wb.command_and_pick("sessiond: Close Session", title)
    dialog = page.locator(".monaco-dialog-box")
    dialog.wait_for(timeout=15_000)  # asked first: from the palette, which session is said
    dialog.locator(".monaco-button", has_text="Close").first.click()
    wb.row(title).wait_for(state="detached", timeout=30_000)
    time.sleep(1)
    wb.command_and_pick("sessiond: Reopen Session…", title)
    page.locator(".pane-body .monaco-list-row.selected", has_text=title).wait_for(timeout=30_000)
    time.sleep(3)  # what comes after: the view redrawn, reveals, the status bar
    errors = page.locator(".notification-toast").filter(has=page.locator(".codicon-error"))
    assert not errors.count(), wb.seen()
    log = wb.host_log()
    assert [log.count(failure) for failure in failures] == before, log[-3000:]
    wb.shot("closed-while-selected")
    for child in (s["id"] for s in wb.listed() if s.get("parent") == sid and s["status"] != "closed"):
        wb.cli("close", child)
    wb.cli("close", sid)


def test_a_side_chat_closes_with_its_parent(workbench: Workbench) -> None:
    """A side chat asked from a session's row, its transcript open; the session closed from its row:
    the side chat is closed too and its transcript's tab goes (it stayed open, the side chat at the
    top of the view, ready for prompts about a session that was gone)."""
    wb = workbench
    page = wb.page
    title = "Parent closed with its side chat"
    question = "what does app.py do?"
    sid = wb.cli("new", "--root", str(wb.ws), "--title", title)
    wb.open()
    assert wb.send(sid, "say the main work").wait(timeout=60) == 0
    wb.wait_row(title, rf"^{sid} · idle")
    prompt = page.locator(".quick-input-widget", has_text=f"Side chat beside {title}")
    wb.context_menu(title, "Open Side Chat…", then=prompt)
    wb.answer(f"Side chat beside {title}", question)
    tab = page.locator(".tabs-container .tab", has_text=question)
    tab.wait_for(timeout=60_000)
    side = next(s["id"] for s in wb.listed() if s.get("parent") == sid)
    wb.wait_status(side, "idle", turns=1, timeout=60)
    wb.shot("side-chat-before-its-parent-closes")
    wb.context_menu(title, "Close Session")  # idle, from its row: closed without a question
    wb.row(title).wait_for(state="detached", timeout=30_000)
    tab.wait_for(state="detached", timeout=30_000)
    statuses = {s["id"]: s["status"] for s in wb.listed()}
    assert statuses[sid] == "closed", statuses
    deadline = time.monotonic() + 30
    while statuses[side] != "closed" and time.monotonic() < deadline:
        time.sleep(0.3)
        statuses = {s["id"]: s["status"] for s in wb.listed()}
    assert statuses[side] == "closed", statuses
    assert not wb.rows(question).count(), wb.seen()  # not left at the top of the view
    wb.shot("side-chat-closed-with-its-parent")


NOT_CONNECTED_NOTICE = "no session can be opened"


def test_the_not_connected_notice_goes_once_a_daemon_is_back(workbench: Workbench) -> None:
    """New Session while the daemon is stopped says "… so no session can be opened"; a daemon
    started elsewhere connects, and the notice goes, from the toasts and the notification centre
    (it stayed, with its Start button, beside a connected status bar). Nobody asked for that
    connection here, so New Session does not go on by itself."""
    wb = workbench
    wb.cli("new", "--root", str(wb.ws), "--title", "Open across the notice")
    wb.open()  # (a row to show: the view has one when this test runs on its own)
    wb.wait_status_text(r"open", timeout=60)
    wb.cli("stop")
    wb.wait_status_text(r"^sessiond: stopped$", timeout=60)
    wb.run_command("sessiond: New Session…")
    notice = wb.toast(NOT_CONNECTED_NOTICE)
    notice.wait_for(timeout=30_000)
    wb.shot("not-connected-notice")
    wb.daemon.start()
    wb.wait_status_text(r"open", timeout=60)
    notice.wait_for(state="detached", timeout=30_000)
    time.sleep(1)
    # (before the notification centre is looked at: opening it dismisses a quick pick)
    assert not wb.page.locator(".quick-input-widget").is_visible(), wb.seen()
    wb.shot("not-connected-notice-withdrawn")
    wb.assert_no_notification(NOT_CONNECTED_NOTICE)


def test_a_rows_close_whose_row_went_says_so_and_asks_nothing(workbench: Workbench) -> None:
    """Close Session chosen in a row's context menu after the row went (its session closed
    elsewhere as the menu was open): VS Code hands the command no session. It says so, and asks
    nothing: it asked "Close which session?", as if run from the palette."""
    wb = workbench
    page = wb.page
    title = "Closed under its menu"
    sid = wb.cli("new", "--root", str(wb.ws), "--title", title)
    wb.open()
    wb.wait_row(title, rf"^{sid} · idle")
    wb.dismiss()
    wb.row(title).click(button="right")
    entry = page.locator(".monaco-menu .action-item", has_text="Close Session").first
    entry.wait_for(timeout=15_000)
    wb.cli("close", sid)
    wb.row(title).wait_for(state="detached", timeout=30_000)
    time.sleep(1)  # VS Code has read the agent's rows again (the closed one's handle is gone)
    assert entry.is_visible(), "the menu closed as the row went"
    entry.click()
    said = wb.toast("is no longer in the Sessions view")
    said.wait_for(timeout=30_000)
    assert "Close Session" in said.inner_text(), said.inner_text()
    assert not page.locator(".quick-input-widget").is_visible(), wb.seen()  # no "Close which session?"
    assert not page.locator(".monaco-dialog-box").count(), wb.seen()
    wb.shot("row-close-after-the-row-went")
