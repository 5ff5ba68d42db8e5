"""Paths an agent gives are kept inside the session's root, whatever their shape."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessiond.daemon.confine import PathOutsideRoot, resolve_inside


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return tmp_path / "root"


def test_paths_inside_are_resolved(root: Path) -> None:
    assert resolve_inside(str(root), "a.txt") == str(root / "a.txt")
    assert resolve_inside(str(root), str(root / "sub" / "b.txt")) == str(root / "sub" / "b.txt")
    assert resolve_inside(str(root), "sub/../c.txt") == str(root / "c.txt")
    assert resolve_inside(str(root), str(root)) == str(root)


@pytest.mark.parametrize(
    "path",
    ["../outside/x", "/etc/passwd", "sub/../../outside/y", "/", ".."],
)
def test_escapes_are_refused(root: Path, path: str) -> None:
    with pytest.raises(PathOutsideRoot, match="outside the session's root"):
        resolve_inside(str(root), path)


def test_a_sibling_with_the_root_as_prefix_is_outside(root: Path) -> None:
    (root.parent / "root-evil").mkdir()
    with pytest.raises(PathOutsideRoot):
        resolve_inside(str(root), str(root.parent / "root-evil" / "x"))


def test_symlinks_pointing_out_are_refused(root: Path) -> None:
    os.symlink(root.parent / "outside", root / "link-dir")
    os.symlink(root.parent / "outside" / "f", root / "link-file")
    with pytest.raises(PathOutsideRoot):
        resolve_inside(str(root), "link-dir/new.txt")
    with pytest.raises(PathOutsideRoot):
        resolve_inside(str(root), "link-file")


def test_symlinks_inside_are_followed(root: Path) -> None:
    os.symlink(root / "sub", root / "alias")
    assert resolve_inside(str(root), "alias/x") == str(root / "sub" / "x")
