"""Two live sessions writing one file of one working copy: a collision naming both, once."""

from __future__ import annotations

from pathlib import Path

from sessiond.daemon.placements import PlacementOptions, make_placement
from sessiond.daemon.placements.collisions import Collision, Collisions


def test_a_second_session_writing_the_same_file_collides_once() -> None:
    c = Collisions()
    assert c.wrote("s1", "/p/a.py") == []
    assert c.wrote("s1", "/p/a.py") == []  # a session rewriting its own file is no collision
    assert c.wrote("s2", "/p/b.py") == []
    found = c.wrote("s2", "/p/a.py")
    assert found == [Collision("/p/a.py", None, "s1", "s2")]
    assert "sessions s1 and s2 both edited /p/a.py" in found[0].sentence()
    assert c.wrote("s2", "/p/a.py") == []
    assert c.wrote("s1", "/p/a.py") == []
    assert [x.first for x in c.wrote("s3", "/p/a.py")] == ["s1", "s2"]


def test_the_same_path_on_another_host_is_another_file() -> None:
    c = Collisions()
    c.wrote("s1", "/p/a.py", host="me@box:22")
    assert c.wrote("s2", "/p/a.py") == []
    found = c.wrote("s3", "/p/a.py", host="me@box:22")
    assert found[0].host == "me@box:22"
    assert "on me@box:22" in found[0].sentence()


def test_a_closed_session_is_forgotten() -> None:
    c = Collisions()
    c.wrote("s1", "/p/a.py")
    c.wrote("s2", "/p/a.py")
    c.forget("s1")
    assert c.files_of("s1") == []
    assert c.files_of("s2") == [(None, "/p/a.py")]
    assert c.wrote("s3", "/p/a.py") == [Collision("/p/a.py", None, "s2", "s3")]
    c.forget("s2")
    c.forget("s3")
    assert c.wrote("s4", "/p/a.py") == []


async def test_placements_give_the_real_path_so_here_sessions_collide_and_worktrees_do_not(
    repo: Path,
) -> None:
    c = Collisions()
    here = [
        make_placement("here", root=str(repo), session_id=s, options=PlacementOptions()) for s in ("h1", "h2")
    ]
    # Through a symlinked root and a relative path, it is still the same file.
    (repo.parent / "alias").symlink_to(repo)
    aliased = make_placement(
        "here", root=str(repo.parent / "alias"), session_id="h3", options=PlacementOptions()
    )
    trees = [
        make_placement("worktree", root=str(repo), session_id=s, options=PlacementOptions())
        for s in ("w1", "w2")
    ]
    for p in [*here, aliased, *trees]:
        await p.prepare()
    assert c.wrote("h1", await here[0].write_text("README", "1"), here[0].host) == []
    assert len(c.wrote("h2", await here[1].write_text(str(repo / "README"), "2"), here[1].host)) == 1
    assert len(c.wrote("h3", await aliased.write_text("src/../README", "3"), aliased.host)) == 2
    for name, t in zip(("w1", "w2"), trees, strict=True):
        assert c.wrote(name, await t.write_text("README", "w"), t.host) == []
    for p in [*here, aliased, *trees]:
        await p.close()
