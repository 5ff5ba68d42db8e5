"""A root outside git is snapshotted at a session's first turn: a small one whose files are held
already is read in place, any other on a thread, and sessions asking for one root at once share
reads begun after they asked. Each way must give the same texts.

Pure: `changes.read_texts` and its walk, on folders made here.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sessiond.daemon import changes
from sessiond.daemon.changes import INLINE_ENTRIES, _read_texts, _TooBig, _walk, read_texts


def _tree(root: Path) -> Path:
    (root / "src" / "deep").mkdir(parents=True)
    (root / "node_modules" / "x").mkdir(parents=True)
    (root / "a.txt").write_text("one\n")
    (root / "src" / "b.py").write_text("print('b')\n")
    (root / "src" / "deep" / "c.md").write_text("# c\n")
    (root / "node_modules" / "x" / "skip.js").write_text("skipped")
    (root / "binary.bin").write_bytes(b"\xff\xfe\x00")
    (root / "big.txt").write_text("x" * (changes.SNAPSHOT_FILE_LIMIT + 1))
    (root / "link-to-a").symlink_to(root / "a.txt")
    (root / "link-to-src").symlink_to(root / "src", target_is_directory=True)
    (root / "dangling").symlink_to(root / "nowhere")
    return root


def test_the_walk_is_os_walk(tmp_path: Path) -> None:
    root = str(_tree(tmp_path))
    assert list(_walk(root)) == list(os.walk(root))
    with pytest.raises(_TooBig):
        list(_walk(root, limit=3))


def test_a_small_root_is_read_in_place_once_its_files_are_held(tmp_path: Path) -> None:
    root = str(_tree(tmp_path / "fresh-root"))
    with pytest.raises(_TooBig):  # nothing of it read yet: that is for a thread
        _read_texts(root, inline=True)
    texts = _read_texts(root)
    assert texts == {"a.txt": "one\n", "src/b.py": "print('b')\n", "src/deep/c.md": "# c\n"}
    assert _read_texts(root, inline=True) == texts
    Path(root, "a.txt").write_text("changed, and longer\n")  # its stat changed: read again, on a thread
    with pytest.raises(_TooBig):
        _read_texts(root, inline=True)


def test_a_root_with_many_entries_is_not_read_in_place(tmp_path: Path) -> None:
    for i in range(INLINE_ENTRIES + 1):
        (tmp_path / f"f{i}.txt").write_text(str(i))
    texts = _read_texts(str(tmp_path))
    assert len(texts) == INLINE_ENTRIES + 1
    with pytest.raises(_TooBig):
        _read_texts(str(tmp_path), inline=True)


async def test_callers_at_once_share_reads_begun_after_they_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(INLINE_ENTRIES + 1):
        (tmp_path / f"f{i}.txt").write_text(str(i))
    begun: list[int] = []
    real = changes._read_texts

    def counted(root: str, *, inline: bool = False) -> dict[str, str]:
        if not inline:
            begun.append(len(asked))
        return real(root, inline=inline)

    monkeypatch.setattr(changes, "_read_texts", counted)
    asked: list[int] = []

    async def one(i: int) -> dict[str, str]:
        asked.append(i)
        return await read_texts(str(tmp_path))

    results = await asyncio.gather(*(one(i) for i in range(50)))
    assert all(r == results[0] for r in results)
    assert len(results[0]) == INLINE_ENTRIES + 1
    # Two reads for fifty callers: the first began after the first of them asked, the second
    # (which the others share) after all of them had.
    assert len(begun) == 2
    assert begun[0] >= 1
    assert begun[1] == 50
    assert await read_texts(str(tmp_path)) == results[0]  # and later callers read afresh
    assert len(begun) == 3


async def test_sessions_of_one_root_counting_changes_at_once_share_its_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(INLINE_ENTRIES + 1):
        (tmp_path / f"f{i}.txt").write_text(f"{i}\n")
    trackers = await asyncio.gather(*(changes.ChangeTracker.start(str(tmp_path)) for _ in range(20)))
    (tmp_path / "f0.txt").write_text("0\nand more\n")
    (tmp_path / "new.txt").write_text("new\n")
    read: list[str] = []
    real = changes._read_texts

    def counted(root: str, *, inline: bool = False) -> dict[str, str]:
        if not inline:
            read.append(root)
        return real(root, inline=inline)

    monkeypatch.setattr(changes, "_read_texts", counted)
    counted_now = await asyncio.gather(*(t.changes() for t in trackers))
    expected = [("f0.txt", "modified", 1, 0), ("new.txt", "added", 1, 0)]
    for found in counted_now:
        assert [(f.path, f.kind, f.added, f.removed) for f in found.files] == expected
    assert 1 <= len(read) <= 2  # twenty sessions, one or two walks of the root, not twenty
