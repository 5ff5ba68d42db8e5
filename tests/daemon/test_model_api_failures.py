"""What a turn failed by the agent's model API says: the agent's words, a line of its log that adds
to them, and what to do. Pure: the log lines are those the real agents wrote here (codex-acp 0.16.0
colours its log; opencode prints the failed request as an object); the whole failures, through the
daemon, are in the interop tests of each agent."""

from __future__ import annotations

from pathlib import Path

from sessiond.daemon.acp_backend import _last_relevant_line, model_api_hint

CODEX_401 = (
    "\x1b[2m2026-12-01T22:06:31.972939Z\x1b[0m \x1b[31mERROR\x1b[0m \x1b[2mcodex_acp::thread\x1b[0m\x1b[2m:"
    "\x1b[0m Unhandled error during turn: unexpected status 401 Unauthorized: the stand-in answers 401, "
    "url: http://127.0.0.1:35641/v1/responses Some(Other)"
)
CODEX_500 = (
    "\x1b[2m2026-12-01T22:06:58.856320Z\x1b[0m \x1b[31mERROR\x1b[0m \x1b[2mcodex_acp::thread\x1b[0m\x1b[2m:"
    "\x1b[0m Unhandled error during turn: We're currently experiencing high demand, which may cause "
    "temporary errors. Some(InternalServerError)"
)


def _log(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "agent.log"
    path.write_text("--- starting\n" + "".join(f"{line}\n" for line in lines))
    return path


def test_a_log_line_that_only_repeats_the_error_is_left_out(tmp_path: Path) -> None:
    known = (
        "Internal error: unexpected status 401 Unauthorized: the stand-in answers 401, "
        "url: http://127.0.0.1:35641/v1/responses"
    )
    assert _last_relevant_line(_log(tmp_path, CODEX_401), 0, known) is None


def test_a_log_line_that_adds_to_the_error_comes_without_terminal_colours(tmp_path: Path) -> None:
    said = _last_relevant_line(_log(tmp_path, CODEX_500), 0, "Internal error: stream ended")
    assert said is not None
    assert "\x1b" not in said
    assert said.startswith("2026-12-01T22:06:58.856320Z ERROR codex_acp::thread: Unhandled error")


def test_pieces_of_a_printed_object_are_not_taken_for_the_agent_s_words(tmp_path: Path) -> None:
    # opencode 1.18.33 on a failed prompt: nothing here adds to "the stand-in answers 500".
    log = _log(
        tmp_path,
        "Error handling request {",
        '  message: "Internal error: the stand-in answers 500",',
        '    errorName: "APIError",',
        "}",
    )
    assert _last_relevant_line(log, 0, "Internal error: the stand-in answers 500") is None


def test_each_agent_s_words_for_a_failing_api_get_what_to_do() -> None:
    # codex-acp words a 5xx as high demand, the error's kind only in its log.
    assert "failing on its side" in model_api_hint(
        "Internal error: We're currently experiencing high demand, which may cause temporary errors.", "codex"
    )
    assert "failing on its side" in model_api_hint("Some(InternalServerError)", "codex")
    unreachable = (
        "Internal error: stream disconnected before completion: error sending request for url "
        "(http://127.0.0.1:43029/v1/responses)"
    )
    assert "could not reach its model API" in model_api_hint(unreachable, "codex")
    # opencode, with no network.
    assert "could not reach its model API" in model_api_hint(
        "Internal error: Cannot connect to API: Unable to connect. Is the computer able to access the url?",
        "opencode",
    )
    # gemini-cli passes the API's own JSON on.
    assert "refused the agent's credentials" in model_api_hint(
        '{"error":{"code":401,"message":"the stand-in answers 401","status":"UNAUTHENTICATED"}}', "gemini"
    )
    assert model_api_hint("Internal error: the file is not there", "any") == ""
