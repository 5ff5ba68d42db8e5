"""What a session may name as its repository (placement `worktree` with `repository`), checked
at `session/open` before anything is cloned: a sentence for each way it can be wrong.

A repository is cloned where the agent runs, by that machine's git: the URL must mean the same
there as here, and must not smuggle an option or a command into git.
"""

from __future__ import annotations

import re

from sessiond.daemon.placements.base import PlacementError

# Transports git runs as it is: the network ones and local paths. `ext::` (a command of one's
# choosing) and other `<transport>::<address>` helpers are refused.
SCHEMES = ("https", "http", "ssh", "git", "git+ssh", "ssh+git", "file")
_SCHEME = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*)://(.*)\Z", re.DOTALL)
_HELPER = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*)::")
# scp-like: [user@]host:path, where the host holds no slash (git's own rule for telling it from a path).
_SCP = re.compile(r"\A(?:[^@/\s]+@)?(?:\[[^\]/\s]+\]|[^:/\s\[\]]+):(?!//).*\Z", re.DOTALL)


def check_repository(url: str) -> str:
    """The repository as given, if git where the agent runs can clone it as it is; else
    PlacementError saying what is wrong with it and what to give instead."""
    if not url.strip():
        raise PlacementError("repository is empty; give the URL of a git repository (https://, ssh://, ...)")
    if helper := _HELPER.match(url):
        raise PlacementError(
            f"repository {url!r} names the transport {helper[1]!r}::, which sessiond does not run "
            f"(a transport helper runs a command of its own); give an https://, ssh:// or file:// URL"
        )
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise PlacementError(f"repository {url!r} holds whitespace or control characters; give its URL")
    if url.startswith("-"):
        raise PlacementError(f"repository {url!r} starts with '-', which git would read as an option")
    if scheme := _SCHEME.match(url):
        name, rest = scheme[1].lower(), scheme[2]
        if name not in SCHEMES:
            raise PlacementError(
                f"repository {url!r} has the scheme {scheme[1]!r}; one of {', '.join(SCHEMES)} is needed"
            )
        if name == "file" and not rest.startswith("/"):
            raise PlacementError(
                f"repository {url!r} is not a file URL of an absolute path; write file:///path/to/repo.git"
            )
        if name != "file" and not rest.split("/", 1)[0]:
            raise PlacementError(f"repository {url!r} names no host")
        return url
    if url.startswith("/"):
        return url
    if _SCP.match(url):
        return url
    raise PlacementError(
        f"repository {url!r} is a relative path, which means nothing where the agent runs; give a "
        f"URL (https://, ssh://, user@host:path, file:///...) or an absolute path"
    )


def check_checkout_dir(path: str) -> str:
    """The folder where the clone goes, where the agent runs: absolute, or under that machine's ~."""
    if not (path.startswith("/") or path == "~" or path.startswith("~/")):
        raise PlacementError(
            f"checkoutDir {path!r} is neither absolute nor under ~ (the home where the agent runs); "
            f"give /path/to/folder or ~/folder"
        )
    if any(ord(ch) < 32 for ch in path):
        raise PlacementError(f"checkoutDir {path!r} holds control characters")
    return path
