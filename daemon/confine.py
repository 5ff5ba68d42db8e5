"""Keeping an agent's paths inside its session's root.

Pure functions over the file system's view of paths: no I/O beyond
resolving symlinks, so they can be tested on their own.
"""

from __future__ import annotations

import os


class PathOutsideRoot(Exception):
    pass


def resolve_inside(root: str, path: str) -> str:
    """The real path of `path` (relative paths are taken against `root`), if it stays inside `root`.

    Symlinks are followed, including a link at the last component and links
    in parents that do not exist yet, so a link pointing out is refused as
    surely as `..` is.
    """
    real_root = os.path.realpath(root)
    candidate = path if os.path.isabs(path) else os.path.join(root, path)
    real = os.path.realpath(candidate)
    if real != real_root and not real.startswith(real_root + os.sep):
        raise PathOutsideRoot(
            f"path {path!r} is outside the session's root {root!r}; "
            f"only files under the root can be read or written"
        )
    return real
