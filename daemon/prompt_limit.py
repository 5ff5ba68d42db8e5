"""The one check of a prompt's size, where a prompt enters the core (a turn, a side chat,
a thread, a task, a broadcast): a prompt is held in memory, stored with its turn and its
events, and sent to the agent, so one too large costs the daemon many times its size."""

from __future__ import annotations

from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.models import AgentSpec


def check_prompt_size(prompt: str, agent: AgentSpec, field: str = "prompt") -> None:
    """Refuse (InvalidParams naming `field`) a prompt over the agent's max_prompt_bytes."""
    limit = agent.options.max_prompt_bytes
    if len(prompt) * 4 <= limit:  # a character is at most 4 bytes in UTF-8: no need to encode
        return
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return
    raise RpcError(
        ErrorCode.INVALID_PARAMS,
        f"the {field} is {size:,} bytes, over the limit of {limit:,} for agent {agent.name!r}; send a "
        f"shorter one, or raise the agent option max_prompt_bytes (agents.toml; maxPromptBytes in "
        "agent/update)",
        {"fields": [field], "bytes": size, "limit": limit},
    )
