"""Ages as people write them (`sessiond prune 30d`, `--keep-closed 12h`)."""

from __future__ import annotations

import pytest

from sessiond.protocol.durations import age_seconds, age_text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30d", 30 * 86400),
        (" 12h ", 12 * 3600),
        ("2W", 14 * 86400),
        ("90m", 5400),
        ("90min", 5400),
        ("0s", 0),
        ("1.5h", 5400),
    ],
)
def test_an_age_is_its_seconds(text: str, seconds: float) -> None:
    assert age_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "d", "30 days", "-1d", "last tuesday", "2026-11-01"])
def test_what_is_not_an_age_is_none(text: str) -> None:
    assert age_seconds(text) is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(30 * 86400, "30d"), (14 * 86400, "2w"), (5400, "90m"), (7200, "2h"), (0, "0s"), (1.5, "1.5s")],
)
def test_an_age_reads_in_its_largest_whole_unit(seconds: float, text: str) -> None:
    assert age_text(seconds) == text
    assert age_seconds(text) == seconds
