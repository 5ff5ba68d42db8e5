"""Placements: where a session's file reads, writes and commands land.

The core makes one placement per session (`make_placement`), checks it when
the session is opened (`validate_placement`), prepares it before a turn,
routes the agent's fs and terminal calls to it, and closes it with the
session. See base.py for the interface. Each kind but `here` is imported when
a session first asks for it: a daemon whose sessions work here loads none.
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
from sessiond.daemon.placements.local import LocalPlacement

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
    if kind == "here":
        return LocalPlacement(root=root, session_id=session_id, options=options)
    if kind == "worktree":
        from sessiond.daemon.placements.worktree import WorktreePlacement

        return WorktreePlacement(root=root, session_id=session_id, options=options)
    if kind == "ssh":
        # asyncssh (and its cryptography) costs ~0.2 s at daemon start.
        from sessiond.daemon.placements.ssh import SshPlacement

        return SshPlacement(root=root, session_id=session_id, options=options)
    if kind == "sandbox":
        from sessiond.daemon.placements.sandbox import SandboxPlacement

        return SandboxPlacement(root=root, session_id=session_id, options=options, daemon_dirs=daemon_dirs)
    if kind == "container":
        from sessiond.daemon.placements.container import ContainerPlacement

        return ContainerPlacement(root=root, session_id=session_id, options=options, daemon_dirs=daemon_dirs)
    raise PlacementError(f"unknown placement {kind!r}; one of {', '.join(KINDS)}")


async def validate_placement(kind: str, *, root: str, options: PlacementOptions) -> None:
    """What can be told at session open without bringing anything up (PlacementError if not).

    The settings must fit the kind (an image for container, a target for ssh), and a
    worktree's root must be in a git working copy (one git call per root, remembered).
    """
    make_placement(kind, root=root, session_id="validate", options=options)
    if kind == "worktree":
        from sessiond.daemon.placements.worktree import validate as validate_worktree

        await validate_worktree(root, options)
