"""`fast_json` reads what `json` reads, as `json` reads it, and refuses what it refuses with the
same error; what it writes `json` reads back as the value written. Hypothesis draws the values
(integers past 64 bits and lone surrogates among them); chosen texts and values cover the rest
of where orjson and `json` part ways (NaN, a byte order mark, UTF-16, deep nesting, 1e400, keys
that are no strings)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiond.protocol import fast_json

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)  # (past 64 bits, both ways)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # (lone surrogates included)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 and 1.0 and True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))


@settings(max_examples=400)
@given(values, st.booleans())
def test_what_json_writes_is_read_as_json_reads_it(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    for data in (text, text.encode("utf-8", "surrogatepass")):
        try:
            expected = json.loads(data)
        except ValueError as refused:
            with pytest.raises(type(refused)):
                fast_json.loads(data)
            continue
        assert _same(fast_json.loads(data), expected)


@settings(max_examples=400)
@given(values)
def test_what_it_writes_is_read_back_as_the_value(value: Any) -> None:
    written = fast_json.dumps(value)
    assert isinstance(written, bytes)
    assert _same(json.loads(written), value)


def _outcome(read: Any, text: bytes) -> tuple[str, Any]:
    try:
        return "read", read(text)
    except (ValueError, RecursionError) as refused:
        return type(refused).__name__, str(refused)


@pytest.mark.parametrize(
    "text",
    [
        b'{"id": 123456789012345678901234567890}',  # exact, not a float
        b'{"a": "\\ud800"}',  # a lone surrogate escape
        b"\xef\xbb\xbf{}",  # a byte order mark
        '{"a": 1}'.encode("utf-16"),
        b"[" * 1500 + b"]" * 1500,  # deeper than either reads
        b'{"a": 1e400}',
        b'{"a": NaN}',
        b'{"a": "12345678901234567890"}',  # a long number in a string: read by json, the same
        # Refused by both: json's error.
        b'{"a": 1',
        b"\xff",
        b'{"a": 1}}',
        b"",
    ],
)
def test_texts_orjson_reads_otherwise_or_not_at_all_are_read_or_refused_as_json_does(text: bytes) -> None:
    got, expected = _outcome(fast_json.loads, text), _outcome(json.loads, text)
    assert got[0] == expected[0]
    assert _same(got[1], expected[1])


def test_a_callers_hooks_decide_what_orjson_would_not_read_exactly() -> None:
    def strict(data: bytes) -> Any:
        return json.loads(data, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} refused")))

    with pytest.raises(ValueError, match="NaN refused"):
        fast_json.loads(b'{"a": NaN}', strict)
    assert fast_json.loads(b'{"a": 1}', strict) == {"a": 1}


def test_what_orjson_cannot_write_json_writes() -> None:
    assert json.loads(fast_json.dumps({1: [2**80]})) == {"1": [2**80]}
    assert json.loads(fast_json.dumps("\ud800")) == "\ud800"
    assert fast_json.dumps({"a": "é"}) == '{"a":"é"}'.encode()  # UTF-8, compact
