"""Where a daemon keeps its socket, token, state and config, and how to find them.

Every location can be moved by one environment variable, so tests and
several users on one machine never share a daemon by accident:

=====================  ====================================================
SESSIOND_HOME          one folder for all of the below (tests use this)
SESSIOND_SOCKET        the unix socket
SESSIOND_STATE_DIR     the store, agent logs, the TCP token
SESSIOND_CONFIG_DIR    agents.toml
=====================  ====================================================
"""

from __future__ import annotations

import os
from pathlib import Path

# platformdirs and tempfile load when a location is not given by SESSIOND_*: a command told
# where its daemon is (tests, editors with SESSIOND_SOCKET) is spared them.

APP = "sessiond"
SOCKET_NAME = "sessiond.sock"
# sun_path holds 108 bytes with its terminating NUL on Linux.
MAX_SOCKET_PATH = 107


def _home() -> Path | None:
    home = os.environ.get("SESSIOND_HOME")
    return Path(home) if home else None


def runtime_dir() -> Path:
    if home := _home():
        return home / "run"
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        import platformdirs

        return Path(platformdirs.user_runtime_dir(APP))
    # No per-user runtime dir (a root shell, a container): a private folder in /tmp.
    import tempfile

    return Path(tempfile.gettempdir()) / f"{APP}-{os.getuid()}"


def socket_path() -> Path:
    if explicit := os.environ.get("SESSIOND_SOCKET"):
        return Path(explicit)
    return runtime_dir() / SOCKET_NAME


def state_dir() -> Path:
    if explicit := os.environ.get("SESSIOND_STATE_DIR"):
        return Path(explicit)
    if home := _home():
        return home / "state"
    import platformdirs

    return Path(platformdirs.user_state_dir(APP))


def config_dir() -> Path:
    if explicit := os.environ.get("SESSIOND_CONFIG_DIR"):
        return Path(explicit)
    if home := _home():
        return home / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP))


def token_path() -> Path:
    """The secret a TCP client presents; readable by the user alone."""
    return state_dir() / "tcp-token"


def tcp_address_path() -> Path:
    """Where a daemon serving TCP writes the host:port it listens on."""
    return state_dir() / "tcp-address"


def check_socket_path(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ValueError(
            f"socket path {str(path)!r} is {len(os.fsencode(path))} bytes; unix sockets allow "
            f"{MAX_SOCKET_PATH}. Choose a shorter --socket or SESSIOND_HOME."
        )
