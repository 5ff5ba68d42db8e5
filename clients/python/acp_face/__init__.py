"""``sessiond acp``: sessiond as an ACP agent, so every ACP editor drives its sessions.

Modules: ``agent`` (the ACP agent side, a client of the daemon), ``translate``
(the daemon's events as ACP ``session/update``s, pure), ``prompt`` (an ACP prompt
as the daemon's text prompt, pure), ``commands`` (sessiond's own powers as slash
commands). The ACP SDK is imported only here, when
``sessiond acp`` runs: other commands never pay for it. See docs/acp.md.
"""

from __future__ import annotations

import asyncio
import logging
import os

__all__ = ["serve"]


def serve(
    *,
    agent: str = "demo",
    placement: str | None = None,
    root: str | None = None,
    socket: str | None = None,
) -> int:
    """Speak ACP as an agent on stdin/stdout until the editor closes them; the exit status."""
    # stdout carries the protocol: whatever is logged goes to stderr.
    level = os.environ.get("SESSIOND_LOG", "warning").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        format="sessiond acp %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(_serve(agent=agent, placement=placement, root=root, socket=socket))
    except KeyboardInterrupt:
        return 130
    return 0


async def _serve(*, agent: str, placement: str | None, root: str | None, socket: str | None) -> None:
    from acp import run_agent

    from sessiond.client.acp_face.agent import FaceAgent, FaceOptions

    face = FaceAgent(
        FaceOptions(
            agent=agent,
            placement=placement,
            root=os.path.abspath(root) if root else None,
            socket=socket,
        )
    )
    try:
        # session/fork and session/resume are unstable in ACP 0.12: the SDK routes them only on request.
        await run_agent(face, use_unstable_protocol=True, observers=[face.requests.observe])
    finally:
        await face.aclose()
