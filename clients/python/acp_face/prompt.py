"""An ACP prompt as the daemon's prompt, which is text: what passes, and what is refused. Pure.

What an editor sends when a person attaches a file to a prompt (in Zed, an
@-mention) is a resource: a link (``resource_link``: the file's URI) or, since
the face says ``embeddedContext``, the file's text embedded (``resource``, as
the editor holds it: unsaved changes included). Both reach the agent:

- text blocks, as they are;
- a link, in its place in the text, as a mention: ``@/path/of/the/file`` for a
  ``file:`` URI (the agent reads it with its own tools, where it works: the
  session's placement), ``@URI`` for any other;
- embedded text, as a mention in its place and the text itself after the
  prompt, between ``<resource uri="..."> ... </resource>`` lines.

Images, audio and embedded binary resources cannot be put into text: a prompt
holding one is refused (``Refused``, the sentence says what and what to do),
not passed on without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

CAN_NOT_PASS = "sessiond passes prompts to its agents as text"


class Refused(ValueError):
    """The prompt holds something the daemon cannot pass on; the message says what to do."""


def mention(uri: str) -> str:
    """How the prompt names a resource: its path for a local file, else its URI."""
    parts = urlsplit(uri)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return f"@{unquote(parts.path)}"
    return f"@{uri}"


def _attachment(uri: str, mime_type: str | None, text: str) -> str:
    kind = f' mimeType="{mime_type}"' if mime_type else ""
    return f'<resource uri="{uri}"{kind}>\n{text.rstrip(chr(10))}\n</resource>'


def prompt_text(blocks: Sequence[Any]) -> str:
    """The daemon's text prompt for an ACP prompt; ``Refused`` when it holds what text cannot carry."""
    inline: list[tuple[bool, str]] = []  # (a text block?, its text)
    attached: list[str] = []
    for number, block in enumerate(blocks, start=1):
        kind = getattr(block, "type", None)
        if kind == "text":
            inline.append((True, block.text))
        elif kind == "resource_link":
            inline.append((False, mention(block.uri)))
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is None:
                raise Refused(
                    f"part {number} of the prompt is a binary resource ({resource.uri}"
                    f"{', ' + resource.mime_type if resource.mime_type else ''}), and {CAN_NOT_PASS}: "
                    "attach a text file, or mention the file so the agent reads it itself"
                )
            inline.append((False, mention(resource.uri)))
            attached.append(_attachment(resource.uri, resource.mime_type, text))
        elif kind in ("image", "audio"):
            raise Refused(
                f"part {number} of the prompt is {'an image' if kind == 'image' else 'audio'}"
                f" ({block.mime_type}), and {CAN_NOT_PASS}: save it as a file in the session's root"
                " and mention the file, or describe it in words"
            )
        else:
            raise Refused(f"part {number} of the prompt is of a kind sessiond does not know ({kind!r})")
    text = _joined(inline)
    return "\n\n".join([text, *attached]) if attached else text


def _joined(parts: list[tuple[bool, str]]) -> str:
    """Text and mentions in their order. An editor splits "fix @a.py now" into three blocks, some
    without the spaces around the mention: a space goes between a mention and its neighbours, a
    line break between two text blocks, unless one of them has whitespace there already."""
    out = ""
    last_text = False
    for is_text, part in parts:
        if out and part and not out[-1].isspace() and not part[0].isspace():
            out += "\n" if is_text and last_text else " "
        out += part
        last_text = is_text
    return out
