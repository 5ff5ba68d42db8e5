"""`python -m sessiond.daemon`: the same as `sessiond serve`."""

from __future__ import annotations

import argparse
from pathlib import Path

from sessiond.daemon.serve import run


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m sessiond.daemon", description="Run the sessiond daemon.")
    parser.add_argument("--socket", type=Path, help="unix socket to listen on")
    parser.add_argument("--tcp", help="also listen on loopback TCP, HOST:PORT (clients present a token)")
    parser.add_argument(
        "--state-rate",
        type=float,
        default=10.0,
        help="how many times a second one session's state (plan, usage, changes) may be sent (default 10)",
    )
    parser.add_argument("--store", type=Path, help="the SQLite store (default: sessiond.db in the state dir)")
    parser.add_argument(
        "--max-message",
        metavar="SIZE",
        help="the largest message a client may send once initialized, e.g. 16M (the default)",
    )
    parser.add_argument(
        "--keep-closed",
        metavar="AGE",
        help="remove the sessions closed longer ago than this (30d), now and every hour "
        "(default: $SESSIOND_KEEP_CLOSED, else keep them)",
    )
    args = parser.parse_args()
    return run(args.socket, args.tcp, args.state_rate, args.store, args.max_message, args.keep_closed)


if __name__ == "__main__":
    raise SystemExit(main())
