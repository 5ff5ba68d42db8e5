"""Answers kept for their key (`Remembered`): asked once for callers at once, kept for later ones up
to a number of keys, a failure not kept. Pure."""

from __future__ import annotations

import asyncio

import pytest

from sessiond.daemon.shared_runs import Remembered


async def test_an_answer_is_asked_once_kept_for_the_latest_keys_and_a_failure_asked_again() -> None:
    asked: list[str] = []
    fail = {"bad"}

    async def answer(key: str) -> str:
        asked.append(key)
        await asyncio.sleep(0)  # (callers at once arrive while it is asked)
        if key in fail:
            raise RuntimeError(f"no answer for {key}")
        return key.upper()

    kept: Remembered[str, str] = Remembered(most=2)
    assert await asyncio.gather(*(kept.get("a", lambda: answer("a")) for _ in range(10))) == ["A"] * 10
    assert await kept.get("b", lambda: answer("b")) == "B"
    assert await kept.get("a", lambda: answer("a")) == "A"  # kept: not asked again
    assert asked == ["a", "b"]
    assert await kept.get("c", lambda: answer("c")) == "C"  # two kept: b, the least recent, goes
    assert await kept.get("b", lambda: answer("b")) == "B"
    assert asked == ["a", "b", "c", "b"]
    for _ in range(2):
        with pytest.raises(RuntimeError, match="no answer for bad"):
            await kept.get("bad", lambda: answer("bad"))
    assert asked.count("bad") == 2  # a failure is asked again
    fail.clear()
    assert await kept.get("bad", lambda: answer("bad")) == "BAD"
