"""Side chats, suggested tasks, threads and budgets, through a real daemon and the demo agent."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from events import kind, next_matching

from sessiond.client import AsyncDaemon, SessiondError
from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode


async def call(client: AsyncDaemon, method: str, result: type[Any], **params: Any) -> Any:
    return await client._call(method, result, **params)


async def record_of(client: AsyncDaemon, session: str) -> tuple[Any, ...]:
    info = await call(client, "session/get", m.SessionInfo, session=session)
    transcript = await call(client, "session/transcript", m.Transcript, session=session, offset=0, limit=1000)
    return (info.turns, info.plan, info.usage, info.changes, [ln.model_dump() for ln in transcript.lines])


async def test_a_side_chat_forks_and_leaves_the_main_session_untouched(
    client: AsyncDaemon, work: Path
) -> None:
    main = await (await client.agent("demo")).session(work)
    await main.asend("plan Read | Write\nprogress 1 completed\nsay the main work")
    before = await record_of(client, main.id)
    side = await call(client, "session/side", m.SideResult, session=main.id, question="history")
    assert side.forked
    assert side.session.kind == "side"
    assert side.session.parent == main.id
    assert side.reply is not None
    assert "the main work" in side.reply.text or "plan Read" in side.reply.text  # the fork has main's history
    assert await record_of(client, main.id) == before  # byte for byte
    listed = await call(client, "session/list", m.SessionPage, kind=["side"])
    assert [s.id for s in listed.sessions] == [side.session.id]
    # It goes with its session: a side chat is about that session alone.
    async with client.events(sessions=[side.session.id], kinds=["session.closed"]) as closed:
        await main.aclose()
        assert (await next_matching(closed, lambda e: True)).session == side.session.id
    assert (await (await client.session(side.session.id)).aget()).status == "closed"


async def test_without_fork_a_side_chat_gets_an_account_and_cannot_write(
    client: AsyncDaemon, work: Path
) -> None:
    demo = (await client.agent("demo")).info
    agent = await client.agent("nofork", command=[*demo.command, "--no-fork"])
    main = await agent.session(work)
    await main.asend("plan Investigate the crash\nsay looked at it")
    side = await call(
        client, "session/side", m.SideResult, session=main.id, question="What is going on here?"
    )
    assert not side.forked
    assert side.reply is not None
    assert f"side chat beside session {main.id}" in side.reply.text
    assert "Investigate the crash" in side.reply.text
    reply = await (await client.session(side.session.id)).asend("write sneaky.txt no")
    assert "side chat" in reply.text
    assert not (work / "sneaky.txt").exists()


def _git_repo(root: Path) -> Path:
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "t@e"], ["config", "user.name", "t"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / "README").write_text("hi\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    return root


async def test_suggested_tasks_wait_in_the_inbox_and_run_in_their_own_worktree(
    client: AsyncDaemon, work: Path
) -> None:
    repo = _git_repo(work)
    agent = await client.agent("demo", max_running_tasks=1)
    source = await agent.session(repo)
    await source.asend("say working on the main thing")
    first = await call(
        client,
        "task/suggest",
        m.TaskInfo,
        title="Ask first",
        prompt="ask may I?\nwrite first.txt 1",
        from_session=source.id,
    )
    second = await call(
        client, "task/suggest", m.TaskInfo, title="Then this", prompt="say second", from_session=source.id
    )
    dropped = await call(
        client, "task/suggest", m.TaskInfo, title="Not now", prompt="say no", from_session=source.id
    )
    assert first.status == "suggested"
    assert first.agent == "demo"
    dismissed = await call(client, "task/dismiss", m.TaskInfo, task=dropped.id, reason="out of scope")
    assert (dismissed.status, dismissed.reason) == ("dismissed", "out of scope")
    async with client.events(kinds=["permission.asked", "task.changed"]) as events:
        running = await call(client, "task/accept", m.TaskInfo, task=first.id)
        assert running.status == "running"
        queued = await call(client, "task/accept", m.TaskInfo, task=second.id)
        assert queued.status == "queued"  # max_running_tasks=1
        asked = await next_matching(events, kind("permission.asked"))
        allow = next(o["optionId"] for o in asked.data["options"] if o["kind"] == "allow_once")
        await client.answer_permission(asked.data["permission"], allow)
        await next_matching(
            events,
            lambda e: (
                e.kind == "task.changed"
                and e.data["task"]["id"] == second.id
                and e.data["task"]["status"] == "done"
            ),
        )
    tasks = {t.id: t for t in (await call(client, "task/list", m.TaskList)).tasks}
    assert tasks[first.id].status == "done"
    task_session = await call(client, "session/get", m.SessionInfo, session=tasks[first.id].session)
    assert task_session.kind == "task"
    assert task_session.parent == source.id
    assert task_session.where is not None
    assert task_session.where.worktree is not None
    assert (Path(task_session.where.worktree) / "first.txt").exists()
    assert not (repo / "first.txt").exists()


async def test_a_coordinator_starts_threads_waits_and_reads_their_reports(
    client: AsyncDaemon, work: Path
) -> None:
    coordinator = await (await client.agent("demo")).session(work)
    threads = [
        await call(
            client,
            "thread/start",
            m.SessionInfo,
            parent=coordinator.id,
            prompt=f"tokens 100 50\nsay part {n}",
        )
        for n in range(3)
    ]
    assert {t.kind for t in threads} == {"thread"}
    reports = await call(client, "thread/wait", m.ThreadReports, threads=[t.id for t in threads], timeout=120)
    assert [r.done for r in reports.reports] == [True, True, True]
    assert [r.reply for r in reports.reports] == ["part 0", "part 1", "part 2"]
    tree = await call(client, "session/tree", m.TreeNode, session=coordinator.id)
    assert {c.session.id for c in tree.children} == {t.id for t in threads}
    assert tree.tokens == 3 * 150  # usage rolls up to the root
    queued = await call(
        client, "session/broadcast", m.BroadcastResult, prompt="say new cutoff", threads_of=coordinator.id
    )
    assert set(queued.sessions) == {t.id for t in threads}
    reports = await call(client, "thread/wait", m.ThreadReports, threads=queued.sessions, timeout=120)
    assert [r.reply for r in reports.reports] == ["new cutoff"] * 3


async def test_max_threads_zero_means_no_helpers(client: AsyncDaemon, work: Path) -> None:
    coordinator = await (await client.agent("demo", max_threads=0)).session(work)
    with pytest.raises(SessiondError, match=r"allows no helpers \(max_threads=0\)") as caught:
        await call(client, "thread/start", m.SessionInfo, parent=coordinator.id, prompt="say hi")
    assert caught.value.code == ErrorCode.LIMIT_REACHED


async def test_a_budget_stops_a_runaway_tree(client: AsyncDaemon, work: Path) -> None:
    coordinator = await (await client.agent("demo", cost_budget=1.0)).session(work)
    thread = await call(
        client, "thread/start", m.SessionInfo, parent=coordinator.id, prompt="usage 1000 200000 2.5\nhang"
    )
    report = await asyncio.wait_for(
        call(client, "thread/wait", m.ThreadReports, threads=[thread.id], timeout=120), 180
    )
    (only,) = report.reports
    assert only.done
    assert only.error is not None
    assert "cost_budget" in only.error
    with pytest.raises(SessiondError, match="cost_budget") as caught:
        await coordinator.asend("say more")
    assert caught.value.code == ErrorCode.LIMIT_REACHED


async def test_a_session_token_acts_for_that_session_alone(
    client: AsyncDaemon, daemon: Any, work: Path
) -> None:
    import hashlib
    import hmac
    import json
    import socket

    agent = await client.agent("demo")
    mine, other = await agent.sessions(2, work)
    foreign = await call(client, "thread/start", m.SessionInfo, parent=other.id, prompt="say theirs")
    secret = (daemon.home / "state" / "session-secret").read_bytes()
    digest = hmac.new(secret, mine.id.encode(), hashlib.sha256).hexdigest()
    token = f"{mine.id}.{digest}"  # the session it names, then its proof

    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(daemon.socket))
    sock.settimeout(60)
    reader = sock.makefile("rb")

    def ask(msg_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
        sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        while True:
            length = 0
            while (line := reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length"):
                    length = int(line.split(b":")[1])
            message = json.loads(reader.read(length))
            if message.get("id") == msg_id:
                return message  # type: ignore[no-any-return]

    forged = {"sessionToken": f"{other.id}.{digest}"}  # another session's name on this one's proof
    refused = ask(0, "initialize", {"capabilities": {}, "initializationOptions": forged})
    assert refused["error"]["code"] == ErrorCode.UNAUTHORIZED
    options = {"sessionToken": token}
    assert "result" in ask(1, "initialize", {"capabilities": {}, "initializationOptions": options})
    refused = ask(2, "agent/create", {"name": "evil", "command": ["true"]})
    assert refused["error"]["code"] == ErrorCode.UNAUTHORIZED
    assert f"acts for session {mine.id}" in refused["error"]["message"]
    suggested = ask(3, "task/suggest", {"title": "mine", "prompt": "say x"})
    assert suggested["result"]["fromSession"] == mine.id
    spoofed = ask(4, "thread/start", {"parent": other.id, "prompt": "say y"})
    assert spoofed["error"]["code"] == ErrorCode.UNAUTHORIZED
    peek = ask(5, "thread/status", {"thread": foreign.id})
    assert peek["error"]["code"] == ErrorCode.UNAUTHORIZED
    assert ask(6, "daemon/stop", {})["error"]["code"] == ErrorCode.UNAUTHORIZED  # the daemon runs on
    assert (await client.status()).pid == daemon.pid
    sock.close()


async def test_a_side_chat_uses_the_cheaper_model_and_ask_policy_gates_threads(
    client: AsyncDaemon, work: Path
) -> None:
    agent = await client.agent("demo", side_model="demo-large", helper_policy="ask")
    main = await agent.session(work)
    await main.asend("model")
    side = await call(client, "session/side", m.SideResult, session=main.id, question="model")
    assert side.reply is not None
    assert "demo-large" in side.reply.text
    assert "demo-large" not in (await main.asend("model")).text
    # Starting a thread asks the person first; a "no" refuses it with a reason.
    async with client.events(sessions=[main.id], kinds=["permission.asked"]) as events:
        asking = asyncio.create_task(
            call(client, "thread/start", m.SessionInfo, parent=main.id, prompt="say helper")
        )
        asked = await next_matching(events, kind("permission.asked"))
        assert "start a thread" in asked.data["toolCall"]["title"]
        await client.answer_permission(asked.data["permission"], "reject")
        with pytest.raises(SessiondError, match="declined") as caught:
            await asking
    assert caught.value.code == ErrorCode.LIMIT_REACHED
