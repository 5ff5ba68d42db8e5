"""Placements: where a session's file reads, writes and commands land.

The core makes one placement per session (`make_placement`), checks it when
the session is opened (`validate_placement`), prepares it before a turn,
routes the agent's fs and terminal calls to it, and closes it with the
session. See base.py for the interface. Each kind but `here` is imported when
a session first asks for it (on the importer's thread, `MODULES`): a daemon
whose sessions work here loads none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiond.daemon import importer
from sessiond.daemon.placements.base import (
    KINDS,
    PathOutsideRoot,
    Placement,
    PlacementError,
    PlacementOptions,
    UnknownTerminal,
)
from sessiond.daemon.placements.local import LocalPlacement
from sessiond.daemon.placements.repository_url import check_checkout_dir, check_repository

if TYPE_CHECKING:  # each loads with the first session that works in one
    from sessiond.daemon.placements.repository import RepositoryPlacement
    from sessiond.daemon.placements.worktree import WorktreePlacement

__all__ = [
    "KINDS",
    "MODULES",
    "PathOutsideRoot",
    "Placement",
    "PlacementError",
    "PlacementOptions",
    "UnknownTerminal",
    "as_repository",
    "as_worktree",
    "make_placement",
    "validate_placement",
]


# The module of each kind but `here`, imported on the importer's thread when a session is first
# opened with it, or first prompted after a restart (ssh's brings asyncssh, ~0.2 s).
MODULES = {
    "worktree": "sessiond.daemon.placements.worktree",
    "ssh": "sessiond.daemon.placements.ssh",
    "sandbox": "sessiond.daemon.placements.sandbox",
    "container": "sessiond.daemon.placements.container",
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
    if kind == "here":
        return LocalPlacement(root=root, session_id=session_id, options=options)
    if kind == "worktree" and options.repository is not None:
        from sessiond.daemon.placements.repository import RepositoryPlacement

        return RepositoryPlacement(root=root, session_id=session_id, options=options)
    if kind == "worktree":
        from sessiond.daemon.placements.worktree import WorktreePlacement

        return WorktreePlacement(root=root, session_id=session_id, options=options)
    if kind == "ssh":
        # asyncssh (and its cryptography) costs ~0.2 s to import: not at daemon start.
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
    if kind in MODULES:
        await importer.load(MODULES[kind])  # before make_placement imports it on the loop's thread
    make_placement(kind, root=root, session_id="validate", options=options)
    if kind == "worktree":
        from sessiond.daemon.placements.worktree import validate as validate_worktree

        await validate_worktree(root, options)


def as_worktree(placement: Placement) -> WorktreePlacement | RepositoryPlacement | None:
    """The placement as a worktree of the session's own (made from its root's repository here, or
    from a repository where its agent runs), else None: its working copy is not shared."""
    return placement if placement.kind == "worktree" else None  # type: ignore[return-value]


def as_repository(placement: Placement) -> RepositoryPlacement | None:
    """The placement as a worktree of a repository made where the agent runs, else None."""
    if placement.kind != "worktree":
        return None
    from sessiond.daemon.placements.repository import RepositoryPlacement

    return placement if isinstance(placement, RepositoryPlacement) else None
