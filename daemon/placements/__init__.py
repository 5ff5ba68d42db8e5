"""Placements: where a session's file reads, writes and commands land.

The core makes one placement per session (`make_placement`), checks it when
the session is opened (`validate_placement`), prepares it before a turn,
routes the agent's fs and terminal calls to it, and closes it with the
session. See base.py for the interface.
"""

from __future__ import annotations

from sessiond.daemon.placements.base import (
    KINDS,
    PathOutsideRoot,
    Placement,
    PlacementError,
    PlacementOptions,
    UnknownTerminal,
)
from sessiond.daemon.placements.container import ContainerPlacement
from sessiond.daemon.placements.local import LocalPlacement
from sessiond.daemon.placements.repository import RepositoryPlacement
from sessiond.daemon.placements.repository_url import check_checkout_dir, check_repository
from sessiond.daemon.placements.sandbox import SandboxPlacement
from sessiond.daemon.placements.worktree import WorktreePlacement
from sessiond.daemon.placements.worktree import validate as validate_worktree

__all__ = [
    "KINDS",
    "PathOutsideRoot",
    "Placement",
    "PlacementError",
    "PlacementOptions",
    "UnknownTerminal",
    "make_placement",
    "validate_placement",
]

_LOCAL: dict[str, type[LocalPlacement]] = {
    "here": LocalPlacement,
    "worktree": WorktreePlacement,
}


def make_placement(
    kind: str,
    *,
    root: str,
    session_id: str,
    options: PlacementOptions,
    daemon_dirs: tuple[str, ...] = (),
) -> Placement:
    """A placement of `kind` for one session. Cheap and synchronous: no I/O until prepare().

    `daemon_dirs` are the daemon's own folders (its socket's, its state, its config):
    the placements that confine commands (sandbox, container) keep them out of reach.
    """
    if kind == "ssh":
        # Imported on first use: asyncssh (and its cryptography) costs ~0.2 s at daemon start.
        from sessiond.daemon.placements.ssh import SshPlacement

        return SshPlacement(root=root, session_id=session_id, options=options)
    if kind == "sandbox":
        return SandboxPlacement(root=root, session_id=session_id, options=options, daemon_dirs=daemon_dirs)
    if kind == "container":
        return ContainerPlacement(root=root, session_id=session_id, options=options, daemon_dirs=daemon_dirs)
    if kind == "worktree" and options.repository is not None:
        return RepositoryPlacement(root=root, session_id=session_id, options=options)
    cls = _LOCAL.get(kind)
    if cls is None:
        raise PlacementError(f"unknown placement {kind!r}; one of {', '.join(KINDS)}")
    return cls(root=root, session_id=session_id, options=options)


async def validate_placement(kind: str, *, root: str, options: PlacementOptions) -> None:
    """What can be told at session open without bringing anything up (PlacementError if not).

    The settings must fit the kind (an image for container, a target for ssh), and a
    worktree's root must be in a git working copy (one git call per root, remembered); a
    worktree's repository, cloned where the agent runs, must be a URL git takes as it is.
    """
    if options.repository is not None:
        if kind != "worktree":
            raise PlacementError(
                f"repository is a setting of placement worktree (a worktree made from it where the agent "
                f"runs), not of {kind}; open the session with placement worktree, or leave repository out"
            )
        check_repository(options.repository)
        if options.checkout_dir is not None:
            check_checkout_dir(options.checkout_dir)
        return
    make_placement(kind, root=root, session_id="validate", options=options)
    if kind == "worktree":
        await validate_worktree(root, options)
