"""Bytes as people read them, said alike by the command line and the daemon's own lines
(`sessiond status`, a prune's space given back). Pure, and loads nothing."""

from __future__ import annotations

# The free bytes an older store keeps (it does not give space back) before a prune's words
# mention `sessiond compact`.
KEPT_WORTH_TELLING = 1024 * 1024


def size(n: int) -> str:
    """Bytes as a person reads them: `512 B`, `48 KiB`, `148 MiB`, `2.1 GiB`."""
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.0f} KiB"
    if n < 1024**3:
        return f"{n / 1024**2:.0f} MiB"
    return f"{n / 1024**3:.1f} GiB"
