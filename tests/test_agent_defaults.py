"""Defaults the daemon takes for an agent by the name its `initialize` gives."""

from __future__ import annotations

from sessiond.daemon.acp_backend import live_by_memory

GIB = 2**30


def test_only_agents_known_for_large_sessions_keep_fewer_open_by_default() -> None:
    claude = "@zed-industries/claude-agent-acp"
    assert live_by_memory(claude, 24 * GIB) == 48  # half of 24 GiB at 256 MiB each
    assert live_by_memory("@agentclientprotocol/claude-agent-acp", 8 * GIB) == 16
    assert live_by_memory(claude, 1 * GIB) == 4  # never fewer than four
    assert live_by_memory(claude, None) is None  # the machine did not say: no cap
    assert live_by_memory("codex-acp", 24 * GIB) is None
