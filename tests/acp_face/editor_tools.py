"""An editor's own MCP server, as Zed's context servers are: stdio, one tool. The ACP face test
gives it to `sessiond acp` in session/new; the demo agent behind the daemon starts it and calls it.

python tests/acp_face/editor_tools.py
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("editor-tools", log_level="WARNING")


@server.tool()
def shout(text: str) -> str:
    """The text in capitals, with the EDITOR_TOOLS_MARK of this server's environment."""
    return f"{text.upper()} ({os.environ.get('EDITOR_TOOLS_MARK', 'no mark')})"


if __name__ == "__main__":
    server.run("stdio")
