"""An LSP client (pytest-lsp) spawning `sessiond stdio`, as an editor does.

`sessiond stdio` finds no daemon in this module's SESSIOND_HOME and starts
one; the module's finaliser stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from bench.harness import scratch

HOME = scratch("sd-lsp-", until_exit=True)
SOCKET = HOME / "run" / "sessiond.sock"


@pytest.fixture(scope="module", autouse=True)
def _stop_the_daemon_it_started() -> Iterator[None]:
    yield
    lock = Path(f"{SOCKET}.lock")
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int(lock.read_text().strip()), signal.SIGTERM)
    shutil.rmtree(HOME, ignore_errors=True)


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "sessiond.client", "stdio", "--socket", str(SOCKET)],
        server_env={**os.environ, "SESSIOND_HOME": str(HOME)},
    ),
)
async def client(lsp_client: LanguageClient) -> Any:
    result = await lsp_client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("visual-studio-code"))
    )
    lsp_client.initialize_result = result  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def request(
    client: LanguageClient, method: str, params: dict[str, Any], msg_id: str | None = None
) -> Any:
    return await client.protocol.send_request_async(method, params, msg_id=msg_id)


async def test_initialize_names_the_daemon_and_its_methods(client: LanguageClient) -> None:
    result = client.initialize_result  # type: ignore[attr-defined]
    assert result.server_info.name == "sessiond"
    methods = result.capabilities.experimental["sessiond"]["methods"]
    assert "session/prompt" in methods
    assert "events/subscribe" in methods


async def test_a_turn_reports_work_done_progress(client: LanguageClient, tmp_path: Path) -> None:
    opened = await request(client, "session/open", {"root": str(tmp_path)})
    session = opened.sessions[0].id
    result = await request(client, "session/prompt", {"session": session, "prompt": "say one\nsay two"})
    assert result.text == "one\ntwo"
    assert result.stopReason == "end_turn"
    (reports,) = [r for token, r in client.progress_reports.items() if str(token).endswith(result.turnId)]
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert reports[-1].message == "end_turn"


async def test_cancel_request_on_a_prompt_ends_the_turn_as_cancelled(
    client: LanguageClient, tmp_path: Path
) -> None:
    opened = await request(client, "session/open", {"root": str(tmp_path)})
    session = opened.sessions[0].id
    filters = {"sessions": [session], "kinds": ["turn.started"]}
    subscription = await request(client, "events/subscribe", filters)
    started = client.protocol.wait_for_notification_async("events/notify")
    prompt = asyncio.ensure_future(
        request(client, "session/prompt", {"session": session, "prompt": "hang"}, msg_id="hang-1")
    )
    notify = await asyncio.wait_for(started, 60)
    assert notify.subscription == subscription.subscription
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="hang-1"))
    result = await asyncio.wait_for(prompt, 60)
    assert result.stopReason == "cancelled"


async def test_cancelling_a_turns_progress_ends_the_turn_as_cancelled(
    client: LanguageClient, tmp_path: Path
) -> None:
    """`window/workDoneProgress/cancel` on the token its progress began with (what VS Code sends
    when its progress notification is cancelled) cancels the turn."""
    opened = await request(client, "session/open", {"root": str(tmp_path)})
    session = opened.sessions[0].id
    began = client.protocol.wait_for_notification_async(types.PROGRESS)
    prompt = asyncio.ensure_future(request(client, "session/prompt", {"session": session, "prompt": "hang"}))
    progress = await asyncio.wait_for(began, 60)
    assert progress.value["kind"] == "begin"
    client.protocol.notify(
        types.WINDOW_WORK_DONE_PROGRESS_CANCEL, types.WorkDoneProgressCancelParams(progress.token)
    )
    result = await asyncio.wait_for(prompt, 60)
    assert result.stopReason == "cancelled"
    assert str(progress.token).endswith(result.turnId)


async def test_invalid_params_name_the_field(client: LanguageClient) -> None:
    with pytest.raises(JsonRpcException) as caught:
        await request(client, "session/prompt", {"session": "s1"})
    assert caught.value.code == -32602
    assert "prompt" in caught.value.message


async def test_an_answering_client_gets_permission_requests_and_its_answer_wins(
    client: LanguageClient, tmp_path: Path
) -> None:
    """A second LSP connection that said answersPermissions is asked; its answer ends the wait."""
    answering = await ClientServerConfig(
        server_command=[sys.executable, "-m", "sessiond.client", "stdio", "--socket", str(SOCKET)],
        server_env={**os.environ, "SESSIOND_HOME": str(HOME)},
    ).start()
    asked: list[Any] = []

    @answering.feature("session/requestPermission")
    def answer(params: Any) -> dict[str, Any]:
        asked.append(params)
        allow = next(o for o in params.options if o.kind == "allow_once")
        return {"optionId": allow.optionId}

    await answering.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options={"answersPermissions": True}
        )
    )
    try:
        opened = await request(client, "session/open", {"root": str(tmp_path)})
        session = opened.sessions[0].id
        result = await asyncio.wait_for(
            request(client, "session/prompt", {"session": session, "prompt": "ask may I?"}), 60
        )
        assert len(asked) == 1
        assert asked[0].session == session
        assert asked[0].toolCall.title == "may I?"
        assert "Allow" in result.text
    finally:
        await answering.shutdown_session()
        await answering.stop()
