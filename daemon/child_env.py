"""The environment of every process the daemon starts for an agent or a session.

One function builds it (`child_environment`). By default a child gets the
daemon's environment minus the daemon's own variables (`SESSIOND_*`: where
its socket, state and TCP token are, and any secret a test or a user gave
it); what a child needs from the daemon it is given explicitly (the MCP
bridge's socket and session token, the demo agent's `--state-dir`). An
agent's options narrow this: `env_passthrough` keeps only the names listed
(a trailing `*` matches a prefix) and `env_clear` starts from a small base
alone. The base (PATH, HOME, the locale, the proxies, ...) is always kept.

The rules of an agent's session reach the terminals made for it through a
context variable (`rules_for_commands`), so a placement need not carry them.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sessiond.protocol.models import AgentOptions

# Always kept, whatever the agent's options say: what a program needs to run at all.
BASE_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "TERM",
        "TMPDIR",
        "TZ",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
    }
)
BASE_PREFIXES = ("LC_",)
# The daemon's own: never passed on unless an agent names one in env_passthrough.
DAEMON_PREFIX = "SESSIOND_"


@dataclass(frozen=True, slots=True)
class EnvRules:
    """Which of the daemon's variables a child keeps (on top of the base)."""

    passthrough: tuple[str, ...] | None = None  # None: all but the daemon's own
    clear: bool = False  # the base only (plus passthrough, if given)

    @classmethod
    def of(cls, options: AgentOptions) -> EnvRules:
        """The rules of an agent's options."""
        passthrough = options.env_passthrough
        return cls(tuple(passthrough) if passthrough is not None else None, options.env_clear)

    def keeps(self, name: str) -> bool:
        if name in BASE_NAMES or name.startswith(BASE_PREFIXES):
            return True
        if self.passthrough is not None and any(_matches(name, p) for p in self.passthrough):
            return True
        if self.clear or self.passthrough is not None:
            return False
        return not name.startswith(DAEMON_PREFIX)


def _matches(name: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


DEFAULT_RULES = EnvRules()
_current: contextvars.ContextVar[EnvRules | None] = contextvars.ContextVar("sessiond_env_rules", default=None)


@contextlib.contextmanager
def rules_for_commands(rules: EnvRules) -> Iterator[None]:
    """Commands started in this block (an agent's terminal, through its placement) follow `rules`."""
    token = _current.set(rules)
    try:
        yield
    finally:
        _current.reset(token)


def child_environment(
    extra: Mapping[str, str] | None = None,
    rules: EnvRules | None = None,
    *,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a child: `source` (the daemon's own) filtered by `rules`, then `extra`.

    Without `rules`, those of the block it runs in (`rules_for_commands`), else the default.
    """
    if rules is None:
        rules = _current.get() or DEFAULT_RULES
    environment = {k: v for k, v in (os.environ if source is None else source).items() if rules.keeps(k)}
    if extra:
        environment.update(extra)
    return environment
