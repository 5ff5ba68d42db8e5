"""JSON read and written by orjson where it gives what the standard library gives, else by the latter.

Every message between a client and the daemon, and between the daemon and its agents, is parsed
and written once at each end: orjson does either several times faster than `json`, which with 200
turns at once was about a tenth of the daemon's CPU. Where the two would differ, `json` does
it, so what is read and what is refused stay as they were:
- integers past 64 bits, which orjson reads as floats: a text holding a run of 19 or more digits
  anywhere (in a string, too) is read by `json`;
- what orjson refuses and `json` takes (a lone surrogate escape, a byte order mark, UTF-16,
  nesting past 1,024, 1e400): read again by `json`, which also gives the error for what both refuse;
- what orjson cannot write (a key that is no string, an integer past 64 bits, a lone surrogate):
  written by `json`, \\u-escaped.
Written text is compact UTF-8; a NaN is written as null, where `json` writes the non-JSON `NaN`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

# A run of 19 digits, found as a run of 19 ones once every digit is a one and all else a zero
# (several times faster than a regular expression, and a line is checked before each read).
_DIGITS_AS_ONES = bytes(0x31 if 0x30 <= byte <= 0x39 else 0x30 for byte in range(256))
_LONG_RUN = b"1" * 19
_LONG_NUMBER_TEXT = re.compile(r"[0-9]{19}")


def loads(data: bytes | str, fallback: Callable[[Any], Any] = json.loads) -> Any:
    """`fallback(data)` (`json.loads`, or it with hooks): the same values, the same errors."""
    if isinstance(data, bytes):
        exact = _LONG_RUN not in data.translate(_DIGITS_AS_ONES)
    else:
        exact = _LONG_NUMBER_TEXT.search(data) is None
    if exact:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return fallback(data)


def dumps(value: Any) -> bytes:
    """Compact JSON of `value`, as UTF-8."""
    try:
        return orjson.dumps(value)
    except TypeError:  # (orjson.JSONEncodeError is one)
        return json.dumps(value, separators=(",", ":")).encode()
