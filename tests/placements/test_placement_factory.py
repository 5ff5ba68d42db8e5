"""Making and checking placements at session open: kinds, settings, and the packaging of the subpackage."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from sessiond.daemon.placements import (
    KINDS,
    Placement,
    PlacementError,
    PlacementOptions,
    make_placement,
    validate_placement,
)
from sessiond.protocol.models import PlacementSettings


def options_for(kind: str) -> PlacementOptions:
    return PlacementOptions(container_image="busybox", ssh_target="me@host:2222")


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_made_cheaply_and_fits_the_interface(kind: str, tmp_path: Path) -> None:
    placement = make_placement(kind, root=str(tmp_path), session_id="s1", options=options_for(kind))
    assert isinstance(placement, Placement)
    assert placement.kind == kind
    assert placement.describe()
    assert (placement.host is None) == (kind != "ssh")


def test_an_unknown_kind_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(PlacementError, match="unknown placement 'cloud'; one of here, worktree, sandbox"):
        make_placement("cloud", root=str(tmp_path), session_id="s1", options=PlacementOptions())


async def test_validation_at_open(tmp_path: Path, repo: Path) -> None:
    await validate_placement("here", root=str(tmp_path), options=PlacementOptions())
    await validate_placement("worktree", root=str(repo / "src"), options=PlacementOptions())
    with pytest.raises(PlacementError, match="not in a git repository"):
        await validate_placement("worktree", root=str(tmp_path), options=PlacementOptions())
    with pytest.raises(PlacementError, match="needs an image"):
        await validate_placement("container", root=str(tmp_path), options=PlacementOptions())
    with pytest.raises(PlacementError, match="needs a target"):
        await validate_placement("ssh", root=str(tmp_path), options=PlacementOptions())
    with pytest.raises(PlacementError, match="user@host"):
        await validate_placement("ssh", root=str(tmp_path), options=PlacementOptions(ssh_target="a@b:x"))


def test_options_round_trip_through_plain_values() -> None:
    options = PlacementOptions(
        base="main", sandbox_rw_binds=("/cache",), ssh_target="me@h", ssh_verify_host_key=False
    )
    stored = options.to_mapping()
    assert stored == {
        "base": "main",
        "sandbox_rw_binds": ["/cache"],
        "ssh_target": "me@h",
        "ssh_verify_host_key": False,
    }
    assert PlacementOptions.from_mapping(stored) == options
    assert PlacementOptions.from_mapping({}) == PlacementOptions()
    with pytest.raises(PlacementError, match="unknown placement option"):
        PlacementOptions.from_mapping({"image": "x"})


def test_the_retired_sandbox_unshare_net_is_dropped_where_it_was_stored() -> None:
    """Stored sessions and agents (every saved agent carries all its settings) still load; no
    network is the sandbox's default now."""
    assert PlacementOptions.from_mapping({"sandbox_unshare_net": True}) == PlacementOptions()
    stored = PlacementSettings.model_validate({"sandbox_unshare_net": False, "sandbox_rw_binds": ["/c"]})
    assert stored == PlacementSettings(sandbox_rw_binds=["/c"])
    assert PlacementSettings.model_validate({"sandboxUnshareNet": True}) == PlacementSettings()
    assert "sandbox_unshare_net" not in PlacementSettings().model_dump()
    with pytest.raises(ValidationError):
        PlacementSettings.model_validate({"sandbox_unshare_nett": True})  # other unknown names still fail
