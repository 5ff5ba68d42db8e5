"""The agent's answers to a turn's requests are read without the SDK's models where they are the
plain shapes: what that gives must be what the schema's models give (validated, dumped by alias
without nulls, key order included), and anything else must still go through the models, which
raise for an answer that does not fit.

Pure: `_outcome` and `_opened` against the models' reading, on answers chosen by hand and drawn
by hypothesis.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import pytest
from acp import schema as s
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from sessiond.daemon import acp_backend
from sessiond.daemon.acp_backend import _opened, _outcome, _setup


def _by_model(raw: Any) -> tuple[str, dict[str, int] | None]:
    response = s.PromptResponse.model_validate(raw)
    if response.usage is None:
        return response.stop_reason, None
    return response.stop_reason, response.usage.model_dump(mode="json", by_alias=True, exclude_none=True)


def _same_outcome(raw: Any) -> None:
    try:
        expected = _by_model(raw)
    except ValidationError:
        with pytest.raises(ValidationError):
            _outcome(raw)
        return
    got = _outcome(raw)
    assert (got.stop_reason, got.usage) == expected
    assert json.dumps(got.usage) == json.dumps(expected[1])  # key order too


ANSWERS: list[Any] = [
    {"stopReason": "end_turn"},
    {"stopReason": "cancelled", "usage": None},
    {"stopReason": "end_turn", "usage": {"totalTokens": 9, "inputTokens": 4, "outputTokens": 5}},
    {"stopReason": "max_tokens", "usage": {"outputTokens": 5, "inputTokens": 4, "totalTokens": 9}},
    {
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 4,
            "outputTokens": 5,
            "totalTokens": 9,
            "thoughtTokens": None,
            "cachedReadTokens": 2,
            "cachedWriteTokens": 0,
        },
    },
    # Not the plain shape: the models read them, or refuse them.
    {"stopReason": "end_turn", "_meta": {"x": 1}},
    {"stopReason": "end_turn", "somethingNew": True},
    {"stopReason": "end_turn", "usage": {"inputTokens": 4, "outputTokens": 5, "totalTokens": 9, "_meta": {}}},
    {"stopReason": "end_turn", "usage": {"inputTokens": 4.0, "outputTokens": 5, "totalTokens": 9}},
    {"stopReason": "end_turn", "usage": {"inputTokens": "4", "outputTokens": 5, "totalTokens": 9}},
    {"stopReason": "end_turn", "usage": {"inputTokens": True, "outputTokens": 5, "totalTokens": 9}},
    {"stopReason": "end_turn", "usage": {"inputTokens": 4, "outputTokens": 5}},
    {"stopReason": "end_turn", "usage": {"inputTokens": None, "outputTokens": 5, "totalTokens": 9}},
    # A count below 0 (the schema's counts are >= 0): the model reads such usage as none.
    {"stopReason": "end_turn", "usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": -1}},
    {
        "stopReason": "end_turn",
        "usage": {"inputTokens": 4, "outputTokens": 5, "totalTokens": 9, "cachedReadTokens": -1},
    },
    {"stopReason": "end_turn", "usage": []},
    {"stopReason": "finished"},
    {"usage": None},
    {},
    None,
    [],
]


@pytest.mark.parametrize("raw", ANSWERS)
def test_a_prompt_answer_reads_as_the_model_reads_it(raw: Any) -> None:
    _same_outcome(raw)


_counts = st.one_of(st.none(), st.integers(-5, 10**12), st.booleans(), st.floats(0, 10), st.text(max_size=3))


@settings(max_examples=300, deadline=None)
@given(
    stop=st.sampled_from(["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "other"]),
    usage=st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(
                [
                    "inputTokens",
                    "outputTokens",
                    "totalTokens",
                    "thoughtTokens",
                    "cachedReadTokens",
                    "cachedWriteTokens",
                    "_meta",
                    "other",
                ]
            ),
            _counts,
        ),
    ),
)
def test_drawn_prompt_answers_read_as_the_model_reads_them(stop: str, usage: dict[str, Any] | None) -> None:
    _same_outcome({"stopReason": stop, "usage": usage})


SETUP = {
    "modes": {
        "currentModeId": "default",
        "availableModes": [
            {"id": "default", "name": "Default", "description": None},
            {"id": "plan", "name": "Plan", "description": "p", "somethingNew": 1},
        ],
    },
    "configOptions": [
        {
            "id": "model",
            "name": "Model",
            "type": "select",
            "currentValue": "a",
            "options": [{"value": "a", "name": "A"}, {"value": "b", "name": "B", "description": None}],
        }
    ],
}


def _model_reading(raw: Any, answer: type[BaseModel]) -> tuple[str, Any]:
    response = answer.model_validate(raw if isinstance(raw, dict) else {})
    setup = _setup(response)
    return getattr(response, "session_id", ""), (setup.modes, setup.mode, setup.config)


@pytest.mark.parametrize(
    "answer", [s.NewSessionResponse, s.ForkSessionResponse, s.ResumeSessionResponse, s.LoadSessionResponse]
)
def test_a_session_answer_reads_as_the_model_reads_it_and_each_reader_has_its_own_copy(
    answer: type[BaseModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acp_backend, "_SETUPS", OrderedDict())  # (what other tests read, not here)
    names_one = "session_id" in answer.model_fields
    for n in range(3):  # the first is read by the model; the others are told what it read
        raw = {**SETUP, "sessionId": f"agent-{n}"} if names_one else json.loads(json.dumps(SETUP))
        session_id, setup = _opened(raw, answer)
        expected = _model_reading(raw, answer)
        assert (session_id, (setup.modes, setup.mode, setup.config)) == expected
        assert json.dumps(setup.config) == json.dumps(expected[1][2])  # key order too
        # Whoever gets a setup may change it (the chosen value, say): the next is as read.
        setup.config["model"]["currentValue"] = "b"
        setup.modes.clear()


def test_a_session_answer_that_differs_is_read_again() -> None:
    _opened({**SETUP, "sessionId": "one"}, s.NewSessionResponse)
    other = json.loads(json.dumps(SETUP))
    other["modes"]["currentModeId"] = "plan"
    session_id, setup = _opened({**other, "sessionId": "two"}, s.NewSessionResponse)
    assert (session_id, setup.mode) == ("two", "plan")


@pytest.mark.parametrize("session_id", [None, 7, ["x"]])
def test_a_new_session_answer_without_a_usable_session_id_is_refused_as_the_model_refuses_it(
    session_id: Any,
) -> None:
    _opened({**SETUP, "sessionId": "fine"}, s.NewSessionResponse)  # the rest is known
    raw = {**SETUP} if session_id is None else {**SETUP, "sessionId": session_id}
    with pytest.raises(ValidationError):
        s.NewSessionResponse.model_validate(raw)
    with pytest.raises(ValidationError):
        _opened(raw, s.NewSessionResponse)


def test_a_null_answer_to_load_or_resume_is_a_session_with_nothing_said() -> None:
    for answer in (s.LoadSessionResponse, s.ResumeSessionResponse):
        session_id, setup = _opened(None, answer)
        assert (session_id, setup.modes, setup.mode, setup.config) == ("", [], None, {})
