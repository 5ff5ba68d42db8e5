"""A session's own MCP servers: those its client gave when opening it (an editor's tools, through
`sessiond acp`). Checked at `session/open`, kept with the session as JSON (so an eviction, a
restart of the agent or of the daemon gives them again), and offered to its agent in ACP's shapes
beside the daemon's own `sessiond` server each time the session opens there."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError

log = logging.getLogger(__name__)

SERVER_NAME = "sessiond"  # the daemon's own server's, as every session is offered it (around.py)


def own_http_server(url: str, token: str) -> dict[str, Any]:
    """The daemon's own server as an agent that takes http MCP servers is offered it (ACP's shape):
    its endpoint, and the session's token as a bearer."""
    return {
        "type": "http",
        "name": SERVER_NAME,
        "url": url,
        "headers": [{"name": "Authorization", "value": f"Bearer {token}"}],
    }


def stored_mcp_servers(servers: Sequence[m.McpServerSpec] | None) -> str | None:
    """The servers as the session keeps them; refused when two share a name, or one takes the
    daemon's own."""
    if not servers:
        return None
    seen: set[str] = set()
    for server in servers:
        if server.name == SERVER_NAME:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"mcpServers: {SERVER_NAME!r} is the name of the daemon's own MCP server, which every "
                "session is given; name yours otherwise",
                {"field": "mcpServers"},
            )
        if server.name in seen:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"mcpServers: two servers are named {server.name!r}; an agent tells them apart by name",
                {"field": "mcpServers"},
            )
        seen.add(server.name)
    return json.dumps([s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in servers])


def stored_specs(stored: str | None) -> list[m.McpServerSpec] | None:
    """The servers a session keeps, as given (for a side chat of it)."""
    return [m.McpServerSpec.model_validate(raw) for raw in json.loads(stored)] if stored else None


def offered_mcp_servers(stored: str | None, *, http: bool, session: str = "") -> list[dict[str, Any]]:
    """The session's servers in ACP's `McpServer` shapes; an http one only to an agent that takes
    them (it said `mcpCapabilities.http`), else left out and said in the log."""
    out: list[dict[str, Any]] = []
    for server in stored_specs(stored) or []:
        pairs = server.headers if server.type == "http" else server.env
        named = [{"name": pair.name, "value": pair.value} for pair in pairs]
        if server.type == "stdio":
            out.append({"name": server.name, "command": server.command, "args": server.args, "env": named})
        elif http:
            out.append({"type": "http", "name": server.name, "url": server.url, "headers": named})
        else:
            log.warning("session %s: MCP server %r left out: its agent takes no http", session, server.name)
    return out
