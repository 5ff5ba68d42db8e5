"""sessiond's own scripted ACP agent: no model, the prompt is a small script it carries out.

It is the daemon's default agent, so the whole product runs and is tested
offline. The script language is documented in docs/demo-agent.md.
"""

from .agent import AgentOptions, DemoAgent
from .script import COMMANDS, Prose, Script, ScriptSyntaxError, parse_prompt

__all__ = ["COMMANDS", "AgentOptions", "DemoAgent", "Prose", "Script", "ScriptSyntaxError", "parse_prompt"]
