"""A session's title when the client that opened it gave none: its first prompt, cut short, until
its agent names it (ACP's `session_info_update`). A title the client gave stays."""

from __future__ import annotations

import re

MOST = 60  # characters: a list's column, a tree's row, a picker's line

PROMPT = "prompt"  # SessionRecord.title_from: the first prompt's words
AGENT = "agent"  # the agent's own name for it

_WORD = re.compile(r"\S")


def shortened(text: str) -> str | None:
    """The text's first line with words, its spaces collapsed, cut at a word under MOST
    characters (with "…"); None for a text of blanks."""
    # Found in place: a prompt may be a megabyte, its title is one line of it.
    word = _WORD.search(text)
    if word is None:
        return None
    end = text.find("\n", word.start())
    line = " ".join(text[word.start() : end if end >= 0 else len(text)].split())
    if len(line) <= MOST:
        return line
    cut = line[: MOST - 1]
    if " " in cut[MOST // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.-|") + "…"


def may_give(title_from: str | None, current: str | None, source: str) -> bool:
    """Whether the daemon may give a session whose title is `current` (from `title_from`) a title
    from `source`: a first prompt names only a session with no title, an agent any but one its
    client named."""
    if source == PROMPT:
        return current is None
    return current is None or title_from is not None
