"""The editor's MCP servers (``mcpServers`` of ACP ``session/new``) as the daemon keeps them. Pure.

They are the editor's tools (Zed's context servers, say): the daemon session
keeps them and offers them to its agent beside the daemon's own ``sessiond``
server each time the session opens there, and to its side chats (a fork).
The agent starts a stdio one itself, where it runs; an http one it reaches,
if it takes http servers at all (``mcpCapabilities.http``, which the face
says as the agent's process last said, and false before it ever ran). An sse
one, or an http one the agent cannot take, is refused with a sentence saying
so, not dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessiond.client.acp_face.prompt import Refused
from sessiond.protocol.models import McpServerSpec, NameValue


def _pairs(items: Sequence[Any] | None) -> list[NameValue]:
    return [NameValue(name=item.name, value=item.value) for item in items or []]


def daemon_mcp_servers(
    servers: Sequence[Any] | None, *, http: bool, agent: str
) -> list[McpServerSpec] | None:
    """The servers for ``session/open``; ``Refused`` for one the agent cannot be given."""
    out: list[McpServerSpec] = []
    for server in servers or []:
        kind = getattr(server, "type", None) or "stdio"  # ACP's stdio servers carry no type
        if kind == "stdio":
            out.append(
                McpServerSpec(
                    name=server.name, command=server.command, args=list(server.args), env=_pairs(server.env)
                )
            )
        elif kind == "http" and http:
            out.append(
                McpServerSpec(type="http", name=server.name, url=server.url, headers=_pairs(server.headers))
            )
        else:
            takes = "stdio and http ones" if http else "stdio ones (it has not said it takes http)"
            raise Refused(
                f"the MCP server {server.name!r} is an {kind} one, and the agent {agent!r} behind "
                f"sessiond is given only {takes}: configure it as a stdio server, or leave it out"
            )
    return out or None
