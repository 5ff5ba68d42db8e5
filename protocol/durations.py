"""Ages as people write them on a command line or in the environment: `30d`, `12h`, `2w`, `90m`,
`45s` (`sessiond prune 30d`, `--keep-closed 30d`). Pure, and loads nothing."""

from __future__ import annotations

import re

_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
EXAMPLES = "30d, 12h or 2w"


def age_seconds(text: str) -> float | None:
    """The seconds an age stands for; None if `text` is not one."""
    match = _AGE.fullmatch(text.strip())
    if match is None:
        return None
    return float(match.group(1)) * _SECONDS[match.group(2).lower()]


def age_text(seconds: float) -> str:
    """An age in its largest whole unit: `30d`, `12h`, `90m`, `45s`."""
    for unit in ("w", "d", "h", "m"):
        if seconds >= _SECONDS[unit] and seconds % _SECONDS[unit] == 0:
            return f"{int(seconds // _SECONDS[unit])}{unit}"
    return f"{seconds:g}s"
