"""Command line of the demo agent: `python -m sessiond.daemon.demo_agent [flags]`, ACP over stdio."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from acp import run_agent

from sessiond.daemon import long_lived

from .agent import AgentOptions, DemoAgent
from .state import STATE_DIR_ENV, default_state_dir


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sessiond.daemon.demo_agent",
        description="sessiond's scripted ACP agent (no model): each prompt is a small script. "
        "Speaks ACP on stdin/stdout; see docs/demo-agent.md.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help=f"where session files are kept (default: ${STATE_DIR_ENV}, else the platform state directory)",
    )
    # Each flag withdraws one capability, so clients' fallbacks can be tested.
    for name, method in (
        ("load", "session/load"),
        ("resume", "session/resume"),
        ("close", "session/close"),
        ("fork", "session/fork"),
        ("list", "session/list"),
    ):
        parser.add_argument(
            f"--no-{name}",
            dest=name,
            action="store_false",
            help=f"do not offer {method} (not advertised; calls answer 'Method not found')",
        )
    parser.add_argument(
        "--no-mcp-http",
        dest="mcp_http",
        action="store_false",
        help="do not take MCP servers over HTTP (not advertised; clients offer stdio ones)",
    )
    return parser


def parse_options(argv: Sequence[str] | None = None) -> AgentOptions:
    args = build_parser().parse_args(argv)
    return AgentOptions(
        state_dir=args.state_dir if args.state_dir is not None else default_state_dir(),
        load=args.load,
        resume=args.resume,
        close=args.close,
        fork=args.fork,
        list=args.list,
        mcp_http=args.mcp_http,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    # stdout carries the protocol: anything the agent logs goes to stderr.
    logging.basicConfig(level=logging.WARNING, format="demo-agent %(levelname)s %(name)s: %(message)s")
    agent = DemoAgent(options)
    # The ACP SDK's models and the modules stay as long as the agent: kept out of full collections,
    # which otherwise walked them every few hundred sessions (up to 78 ms each by 4,000 sessions).
    long_lived.settle()
    try:
        asyncio.run(_serve(agent))
    except KeyboardInterrupt:
        return 130
    return 0


async def _serve(agent: DemoAgent) -> None:
    try:
        # session/fork and session/close are unstable in ACP 0.12: the SDK routes them only on request.
        await run_agent(agent, use_unstable_protocol=True)
    finally:
        await agent.aclose()  # the MCP servers its sessions started
