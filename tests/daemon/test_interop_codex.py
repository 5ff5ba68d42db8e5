"""Interoperability with codex-acp (npm @zed-industries/codex-acp, a native binary) through ACP auth.

codex-acp advertises auth methods at initialize (`openai-api-key` for
OPENAI_API_KEY, `codex-api-key` for CODEX_API_KEY, `chatgpt` for a login) and
refuses `session/new` with "Authentication required" until the client calls
`authenticate`. The daemon does so itself when the agent's env holds what a
method needs. Codex talks to a stand-in of the OpenAI Responses API
(tests/standins/openai_responses.py) through the `openai_base_url` of a
config.toml in a CODEX_HOME of the test's own.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import Daemon
from sessiond.client import AgentError, AsyncDaemon
from tests.daemon.interop_checks import (
    allow_then_reject,
    fails_fast,
    git_repo,
    kill_mid_turn,
    leave_mid_stream,
    module_daemon,
    unreachable_url,
)
from tests.standins.openai_responses import Call, Many, OpenAIResponsesStandIn, Slow

AGENT = Path(__file__).resolve().parents[1] / "interop" / "node_modules" / ".bin" / "codex-acp"


@pytest.fixture
def codex_command() -> list[str]:
    if not AGENT.exists():
        pytest.fail(f"{AGENT} is missing: `./dev test` installs it (npm ci --prefix tests/interop)")
    return [str(AGENT)]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    yield from module_daemon()


@pytest.fixture(scope="module")
def running_standin() -> Iterator[OpenAIResponsesStandIn]:
    running = OpenAIResponsesStandIn().start()
    yield running
    running.stop()


@pytest.fixture
def standin(running_standin: OpenAIResponsesStandIn) -> OpenAIResponsesStandIn:
    """The module's stand-in with nothing scripted: what a test left unasked (Codex asks nothing
    more after a refused command, say) must not answer the next test's first prompt."""
    with running_standin.lock:
        running_standin.script.clear()
        running_standin.failing = None
    return running_standin


def agents_table(daemon: Daemon) -> dict[str, str]:
    """`sessiond agents` as a person runs it: each agent's AUTH column."""
    done = subprocess.run(
        [sys.executable, "-m", "sessiond.client", "agents"],
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    header, *rows = done.stdout.splitlines()
    start = header.index("AUTH")
    end = header.index("COMMAND")
    return {row.split()[0]: row[start:end].strip() for row in rows if not row.startswith(" ")}


async def test_codex_authenticates_with_the_key_in_its_env_and_does_a_text_turn(
    client: AsyncDaemon,
    daemon: Daemon,
    work: Path,
    tmp_path: Path,
    codex_command: list[str],
    standin: OpenAIResponsesStandIn,
) -> None:
    # /tmp is refused for its helper binaries (a warning only); keep its home short and private.
    home = standin.codex_home(tmp_path / "codex")
    env = {"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin", "CODEX_API_KEY": ""}
    codex = await client.agent("codex-key", command=codex_command, env=env)
    session = await codex.session(work)
    standin.push("Hello from codex.")
    reply = await session.asend("say hello")
    assert reply.text == "Hello from codex."
    assert reply.stop_reason == "end_turn"
    (request,) = [r for r in standin.responses() if r.method == "POST"]
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["authorization"] == "Bearer sk-standin"
    assert "say hello" in "\n".join(request.texts())
    process = (await codex.aget()).process
    methods = {m["id"]: m for m in process.auth_methods}
    assert methods["openai-api-key"]["type"] == "env_var"
    assert methods["openai-api-key"]["satisfied"] is True
    assert methods["codex-api-key"]["satisfied"] is False  # set, but empty
    assert methods["chatgpt"]["satisfied"] is False
    assert process.authenticated == "openai-api-key"
    assert agents_table(daemon)["codex-key"] == "openai-api-key"
    info = await session.aget()
    assert info.context is not None
    assert not info.context.estimated  # codex reports its context fill
    await codex.aremove()


async def test_codex_without_credentials_fails_saying_what_each_way_needs(
    client: AsyncDaemon,
    daemon: Daemon,
    work: Path,
    tmp_path: Path,
    codex_command: list[str],
    standin: OpenAIResponsesStandIn,
) -> None:
    home = standin.codex_home(tmp_path / "codex")
    env = {"CODEX_HOME": str(home), "OPENAI_API_KEY": "", "CODEX_API_KEY": ""}
    codex = await client.agent("codex-none", command=codex_command, env=env)
    session = await codex.session(work)
    with pytest.raises(AgentError, match="Authentication required") as failed:
        await session.asend("say hello")
    message = str(failed.value)
    assert "openai-api-key (set OPENAI_API_KEY" in message
    assert "codex-api-key (set CODEX_API_KEY" in message
    assert "chatgpt" in message
    process = (await codex.aget()).process
    assert process.authenticated is None
    assert not any(m["satisfied"] for m in process.auth_methods)
    assert agents_table(daemon)["codex-none"] == "-"  # (what it offers: `agents --json`, and the error)
    await codex.aremove()


async def test_codex_plans_edits_and_runs_a_command_in_its_worktree(
    client: AsyncDaemon, tmp_path: Path, codex_command: list[str], standin: OpenAIResponsesStandIn
) -> None:
    """Codex's own tools (update_plan, apply_patch, exec_command) through ACP: the plan is the
    session's, the file and the command's output land in the session's worktree, not the checkout."""
    repo = git_repo(tmp_path / "repo")
    home = standin.codex_home(tmp_path / "codex")
    codex = await client.agent(
        "codex-tools", command=codex_command, env={"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin"}
    )
    session = await codex.session(repo, placement="worktree")
    standin.push(
        Call.plan(("Write the notes", "completed"), ("Check them", "in_progress")),
        Call.add_file("notes.txt", "hello from codex"),
        Call.command("echo ran > ran.txt && cat notes.txt"),
        "Wrote and checked the notes.",
    )
    reply = await session.asend("write the notes and check them")
    assert reply.text == "Wrote and checked the notes."
    info = await session.aget()
    assert info.where is not None
    assert info.where.worktree is not None
    tree = Path(info.where.worktree)
    assert (tree / "notes.txt").read_text() == "hello from codex\n"
    assert (tree / "ran.txt").read_text() == "ran\n"  # the command ran in the worktree
    assert not (repo / "notes.txt").exists()
    assert not (repo / "ran.txt").exists()
    assert info.plan is not None
    assert [(e.content, e.status) for e in info.plan.entries] == [
        ("Write the notes", "completed"),
        ("Check them", "in_progress"),
    ]
    assert info.changes is not None
    assert {f.path for f in info.changes.files} >= {"notes.txt", "ran.txt"}  # in its own worktree
    # What codex's tools answered went back to the model: the patch applied, the command's output.
    outputs = [out for r in standin.responses() if r.method == "POST" for out in r.outputs()]
    assert any("A notes.txt" in out for out in outputs), outputs
    assert any("hello from codex" in out for out in outputs), outputs
    await codex.aremove()


async def test_codex_messages_around_a_tool_call_are_paragraphs(
    client: AsyncDaemon, work: Path, tmp_path: Path, codex_command: list[str], standin: OpenAIResponsesStandIn
) -> None:
    """The model says what it is about to do and calls a tool in one response, then answers: the
    reply reads as two paragraphs (not glued into one line), streamed as codex sent it, its
    transcript has the tool's line between them, and the recap is the last message."""
    home = standin.codex_home(tmp_path / "codex")
    codex = await client.agent(
        "codex-words", command=codex_command, env={"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin"}
    )
    session = await codex.session(work)
    standin.push(Many("Writing the notes first.", Call.add_file("notes.txt", "hi")), "The notes are written.")
    chunks: list[str] = []
    stream = session.astream("write the notes")
    async for event in stream:
        if event.kind == "turn.chunk":
            chunks.append(event.data["text"])
    reply = stream.reply
    assert reply is not None
    assert reply.text == "Writing the notes first.\n\nThe notes are written."
    assert "".join(chunks) == reply.text
    assert (work / "notes.txt").read_text() == "hi\n"
    info = await session.aget()
    assert info.recap == "The notes are written."
    roles = [(line.role, line.text) for line in (await session.atranscript(limit=20)).lines]
    assert [role for role, _ in roles] == ["user", "agent", "tool", "agent"], roles
    # Codex names the file by its whole path; under the session's root it reads relative to it.
    assert roles[2][1] == "[edit] Edit notes.txt"
    await codex.aremove()


async def test_codex_runs_its_commands_itself_so_a_sandbox_does_not_confine_them(
    client: AsyncDaemon, work: Path, tmp_path: Path, codex_command: list[str], standin: OpenAIResponsesStandIn
) -> None:
    """The daemon's sandbox (bubblewrap) wraps the commands an agent runs through ACP terminals;
    codex-acp runs `exec_command` in its own process, in the session's root, so the sandbox's
    read-only rest of the system does not hold for them: a file outside the root is written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    home = standin.codex_home(tmp_path / "codex")
    codex = await client.agent(
        "codex-sandbox", command=codex_command, env={"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin"}
    )
    session = await codex.session(work, placement="sandbox")
    standin.push(Call.command(f"pwd > where.txt && touch {outside}/escaped.txt"), "Ran it.")
    assert (await session.asend("run it")).text == "Ran it."
    assert (work / "where.txt").read_text().strip() == str(work)
    assert (outside / "escaped.txt").exists()  # not confined
    info = await session.aget()
    assert info.where is not None
    assert info.where.placement == "sandbox"
    assert info.changes is not None
    assert "where.txt" in {f.path for f in info.changes.files}  # changed while its command ran
    await codex.aremove()


async def test_codex_asks_before_a_command_and_the_answer_reaches_it(
    client: AsyncDaemon, work: Path, tmp_path: Path, codex_command: list[str], standin: OpenAIResponsesStandIn
) -> None:
    home = standin.codex_home(tmp_path / "codex", approval="untrusted")
    codex = await client.agent(
        "codex-asks", command=codex_command, env={"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin"}
    )
    session = await codex.session(work)
    standin.push(Call.command("touch allowed.txt"), "Ran it.", Call.command("touch denied.txt"), "Did not.")
    await allow_then_reject(client, session, "touch")
    assert (work / "allowed.txt").exists()
    assert not (work / "denied.txt").exists()
    await codex.aremove()


async def test_codex_cancelled_evicted_and_killed(
    client: AsyncDaemon, work: Path, tmp_path: Path, codex_command: list[str], standin: OpenAIResponsesStandIn
) -> None:
    """Leaving a streaming turn cancels it; maxLiveSessions 2 over three sessions brings each evicted
    one back with its own history; killing Codex fails only its running turn."""
    home = standin.codex_home(tmp_path / "codex")
    codex = await client.agent(
        "codex-life",
        command=codex_command,
        env={"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin"},
        max_live_sessions=2,
    )
    session = await codex.session(work)
    standin.push(Slow("word " * 400, chunks=400))  # ~20 s
    await leave_mid_stream(client, session)
    standin.push("Still here.")
    assert (await session.asend("are you there?")).text == "Still here."
    # A model and a mode chosen for the first session outlive its evictions. (Resumed, Codex answers
    # the mode set again with the resumed session's defaults, its default model among them: that is
    # not a change of its own to follow.)
    await session.aset_option("model", "gpt-5.2")
    await session.aset_mode("read-only")

    sessions = [session, *(await codex.sessions(2, work))]
    for index, each in enumerate(sessions):
        standin.push(f"Noted fruit {index}.")
        assert (await each.asend(f"remember the fruit number {index}")).text == f"Noted fruit {index}."
        assert (await codex.aget()).process.live_sessions <= 2
    for index, each in enumerate(sessions):
        standin.push(f"It was fruit {index}.")
        assert (await each.asend("which fruit was it?")).text == f"It was fruit {index}."
        assert (await codex.aget()).process.live_sessions <= 2
        texts = "\n".join(standin.responses()[-1].texts())
        assert f"remember the fruit number {index}" in texts
        assert f"Noted fruit {index}." in texts
        assert not any(f"remember the fruit number {i}" in texts for i in range(3) if i != index)
        if index == 0:
            assert (standin.responses()[-1].body or {}).get("model") == "gpt-5.2"
    controls = await session.acontrols()
    assert (controls.chosen.mode, controls.chosen.config) == ("read-only", {"model": "gpt-5.2"})
    assert controls.mode == "read-only"

    standin.push(Slow("slow " * 200, chunks=200))  # ~10 s
    await kill_mid_turn(client, codex, session)
    standin.push("Back.")
    assert (await session.asend("are you back?")).text == "Back."
    assert (await codex.aget()).process.starts == 2
    await codex.aremove()


async def test_codex_fails_fast_when_its_model_api_refuses_breaks_or_is_gone(
    client: AsyncDaemon, work: Path, tmp_path: Path, codex_command: list[str], standin: OpenAIResponsesStandIn
) -> None:
    """Codex retries a failed model call itself (the built-in provider: a 401 fails after ~8 s, a 500
    or no API after ~30 s, silently). A provider of its config's own takes `request_max_retries` and
    `stream_max_retries`; at 0 each failure ends the turn at once, in Codex's words, with what to do."""
    home = standin.codex_home(tmp_path / "codex", retries=0)
    env = {"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin"}
    codex = await client.agent("codex-fails", command=codex_command, env=env)
    session = await codex.session(work)
    standin.push("Fine.")
    assert (await session.asend("warm up")).text == "Fine."  # authenticated, through its own provider
    assert (await codex.aget()).process.authenticated == "openai-api-key"

    standin.fail_with(401)
    message = await fails_fast(session, "say hello")
    assert "unexpected status 401 Unauthorized: the stand-in answers 401" in message  # its own words
    assert "its log says" not in message  # its log only repeats them
    assert "check the API key in its env" in message

    standin.fail_with(500)
    message = await fails_fast(session, "say hello again")
    # Codex words a 5xx as high demand (its log says the same, coloured, with the error's kind).
    assert "We're currently experiencing high demand" in message
    assert "its log says" not in message
    assert "failing on its side: send the prompt again later" in message

    standin.fail_with(None)
    standin.push("Back.")
    assert (await session.asend("and now?")).text == "Back."  # the session carries on
    await codex.aremove()

    home = standin.codex_home(tmp_path / "codex-gone", retries=0, base_url=unreachable_url("/v1"))
    gone = await client.agent("codex-gone", command=codex_command, env={**env, "CODEX_HOME": str(home)})
    message = await fails_fast(await gone.session(work), "say hello")
    assert "error sending request for url" in message
    assert "could not reach its model API" in message
    await gone.aremove()


async def test_a_codex_side_chat_that_may_not_write_opens_read_only(
    client: AsyncDaemon, work: Path, tmp_path: Path, codex_command: list[str], standin: OpenAIResponsesStandIn
) -> None:
    """Codex writes files and runs commands in its own process, unasked by default, so the daemon
    cannot refuse a side chat's writes: the side chat opens in Codex's read-only mode, where Codex
    asks first, and the daemon says no. A writable one does not."""
    home = standin.codex_home(tmp_path / "codex")
    codex = await client.agent(
        "codex-side", command=codex_command, env={"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-standin"}
    )
    main = await codex.session(work)
    standin.push("Main here.")
    assert (await main.asend("hello")).text == "Main here."
    # (Codex asks before each in its read-only mode, and the daemon says no: refused a write, it
    # ends its turn, "No, and tell Codex what to do differently"; refused a command, it says so.)
    for call, made in (
        (Call.add_file("side_wrote.txt", "no"), "side_wrote.txt"),
        (Call.command("echo no > side_ran.txt"), "side_ran.txt"),
    ):
        standin.push(call)
        side = await main.aside(f"please make {made}")
        assert side.reply is not None
        assert not (work / made).exists()
        assert (await side.acontrols()).mode == "read-only"

    standin.push(Call.add_file("side_may.txt", "yes"), "Wrote it.")
    writable = await main.aside("write a file", writable=True)
    assert writable.reply is not None
    assert writable.reply.text.endswith("Wrote it.")
    assert (work / "side_may.txt").read_text() == "yes\n"
    await codex.aremove()
