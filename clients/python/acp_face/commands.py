"""sessiond's own powers as ACP slash commands, offered with ``available_commands_update``.

A prompt that starts with one of these names (``/side why?``) is answered by
the face itself, through the daemon, and never reaches the session's agent:
the session's transcript is left as it was. Any other prompt, slash commands
of the underlying agent included (``/compact``), goes to the agent as typed.
Each command answers with text; ``run`` calls ``say`` with each piece as it
is ready, so a long merge shows its steps as they happen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sessiond.client.aio import AsyncDaemon, AsyncSession
from sessiond.protocol.models import Event

Say = Callable[[str], Awaitable[None]]

# (name, description, input hint or None), in the order editors list them.
COMMANDS: list[tuple[str, str, str | None]] = [
    (
        "side",
        "Ask a question beside this session (a side chat): answered here, adding nothing to the session",
        "question",
    ),
    (
        "tasks",
        "The suggested-task inbox of this session's agent (accept ID, dismiss ID REASON)",
        "[accept ID | dismiss ID REASON]",
    ),
    ("threads", "This session's threads and how each is doing", None),
    (
        "merge",
        "Merge this worktree session into its base branch, after an optional gate command",
        "[gate command]",
    ),
    ("fleet", "Every session of the daemon at a glance, in one line", None),
]
NAMES = frozenset(name for name, _, _ in COMMANDS)


class CommandError(Exception):
    """A slash command used wrongly; the sentence says how to use it."""


@dataclass(frozen=True)
class Command:
    name: str
    argument: str


def parse(text: str) -> Command | None:
    """The slash command a prompt is, or None when it is a prompt for the agent."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    word, _, rest = stripped[1:].partition(" ")
    word, _, first_line_rest = word.partition("\n")
    if word not in NAMES:
        return None
    argument = (first_line_rest + "\n" + rest if first_line_rest else rest).strip()
    return Command(word, argument)


async def run(command: Command, daemon: AsyncDaemon, session_id: str, say: Say, note: Say) -> None:
    """Carry out ``command`` for the ACP session ``session_id``: ``say`` the answer, ``note`` asides."""
    session = await daemon.session(session_id)
    if command.name == "side":
        await _side(command.argument, session, say, note)
    elif command.name == "tasks":
        await _tasks(command.argument, daemon, session, say)
    elif command.name == "threads":
        await _threads(daemon, session, say)
    elif command.name == "merge":
        await _merge(command.argument, session, say)
    elif command.name == "fleet":
        await _fleet(daemon, say)
    else:  # pragma: no cover - parse() lets only known names through
        raise CommandError(f"unknown command /{command.name}")


async def _side(question: str, session: AsyncSession, say: Say, note: Say) -> None:
    if not question:
        raise CommandError("give the question after the command: /side <question>")
    side = await session.aside(question)
    try:
        reply = side.reply
        await say(reply.text if reply is not None else "")
        how = "forked from" if side.forked else "given an account of"
        stopped = (
            f"; it ended {reply.stop_reason}" if reply is not None and reply.stop_reason != "end_turn" else ""
        )
        await note(
            f"Side chat {side.id} ({how} {session.id}), closed{stopped}; nothing was added to {session.id}."
        )
    finally:
        await side.aclose()


async def _tasks(argument: str, daemon: AsyncDaemon, session: AsyncSession, say: Say) -> None:
    words = argument.split(maxsplit=2)
    if words and words[0] == "accept":
        if len(words) != 2:
            raise CommandError("say which task: /tasks accept ID")
        task = await daemon.accept_task(words[1])
        where = f"in session {task.session}" if task.session else "queued until a running task ends"
        await say(f"Accepted {task.id} ({task.status}): {task.title}; {where}.")
        return
    if words and words[0] == "dismiss":
        if len(words) != 3:
            raise CommandError("say which task and why: /tasks dismiss ID REASON")
        task = await daemon.dismiss_task(words[1], words[2])
        await say(f"Dismissed {task.id}: {task.reason}.")
        return
    if words:
        raise CommandError("/tasks takes nothing, `accept ID` or `dismiss ID REASON`")
    tasks = await daemon.tasks(agent=session.info.agent)
    if not tasks:
        await say(f"No suggested tasks in the inbox of {session.info.agent}.")
        return
    lines = [f"Tasks of {session.info.agent} (newest first):"]
    for task in tasks:
        origin = f", from {task.from_session}" if task.from_session else ""
        runs = f", in {task.session}" if task.session else ""
        lines.append(f"- {task.id} {task.status}: {task.title}{origin}{runs}")
    await say("\n".join(lines))


async def _threads(daemon: AsyncDaemon, session: AsyncSession, say: Say) -> None:
    tree = await session.atree()
    ids = [child.session.id for child in tree.children if child.session.kind == "thread"]
    if not ids:
        await say(f"{session.id} has no threads.")
        return
    lines = [f"Threads of {session.id}:"]
    for thread_id in ids:
        report = await (await daemon.session(thread_id)).areport()
        first = (report.reply or "").strip().splitlines()
        said = first[0] if first else (f"error: {report.error}" if report.error else "(no reply yet)")
        lines.append(f"- {report.session} {report.status.value}{' (done)' if report.done else ''}: {said}")
    await say("\n".join(lines))


async def _merge(gate: str, session: AsyncSession, say: Say) -> None:
    from sessiond.client.wording import merge_outcome

    info = await session.aget()
    if info.placement != "worktree":
        raise CommandError(
            f"{session.id} works in place ({info.placement}), not in a worktree of its own: there is nothing "
            "to merge; open a session with --placement worktree to merge its work"
        )

    async def step(event: Event) -> None:
        data = event.data
        detail = data.get("command") or data.get("commit") or data.get("reason") or ""
        await say(f"merge: {data.get('step')}{f' ({detail})' if detail else ''}\n")

    # The steps are told as they happen, in order, by one task.
    steps: asyncio.Queue[Event | None] = asyncio.Queue()

    async def tell() -> None:
        while (event := await steps.get()) is not None:
            await step(event)

    teller = asyncio.ensure_future(tell())
    try:
        entry = await session.amerge(gate=gate or None, on_step=steps.put_nowait)
    finally:
        steps.put_nowait(None)
        await teller
    await say("\n".join(merge_outcome(entry)))


async def _fleet(daemon: AsyncDaemon, say: Say) -> None:
    from sessiond.client.wording import fleet_line

    await say(fleet_line(await daemon.fleet()))
