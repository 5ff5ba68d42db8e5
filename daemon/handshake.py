"""The answer to `initialize`, made without pygls or pydantic: a daemon gives it as soon as its
socket is bound and its store open, before the rest of it has loaded.

`door.py` answers every connection's `initialize` with what is here, the same way whether the
server behind has been built yet or not. The result is the capabilities a pygls server of the
daemon's advertises (`lsp_outbound.py`; a test holds the two together), the daemon's methods
and notifications (`capabilities.experimental.sessiond`), and its name and version. Of the
params, only what the daemon reads is checked: `capabilities` (an object) and the few
capabilities read below; `initializationOptions` the client package's plain ones are read here
(`plain_options`), any other by the server's model. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from sessiond.protocol import names

SERVER_NAME = "sessiond"
POSITION_ENCODINGS = ("utf-8", "utf-16", "utf-32")
DEFAULT_ENCODING = "utf-16"
INCREMENTAL = 2  # TextDocumentSyncKind.Incremental, pygls's

# The client capabilities the daemon reads, where they are and what each must be.
READ: tuple[tuple[tuple[str, ...], type, str], ...] = (
    (("general", "positionEncodings"), list, "a list of strings"),
    (("window", "workDoneProgress"), bool, "true or false"),
    (("textDocument", "synchronization", "willSave"), bool, "true or false"),
    (("textDocument", "synchronization", "willSaveWaitUntil"), bool, "true or false"),
)
# initializationOptions that need no model to be read: what the editors and the Python client send.
PLAIN_OPTIONS = {"clientName": (str, type(None)), "answersPermissions": (bool,)}


def _at(capabilities: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = capabilities
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def problem(params: Any) -> str | None:
    """What makes `initialize`'s params unreadable, as a sentence; None when they can be read."""
    if not isinstance(params, dict):
        return "initialize takes an object of params, with the client's `capabilities` ({} will do)"
    capabilities = params.get("capabilities")
    if not isinstance(capabilities, dict):
        return "initialize: capabilities: must be an object (the client's capabilities; {} will do)"
    for path, kind, shown in READ:
        for depth in range(1, len(path)):
            above = _at(capabilities, path[:depth])
            if above is not None and not isinstance(above, dict):
                return f"initialize: capabilities.{'.'.join(path[:depth])}: must be an object"
        value = _at(capabilities, path)
        if value is None:
            continue
        if not isinstance(value, kind) or (
            isinstance(value, list) and not all(isinstance(v, str) for v in value)
        ):
            return f"initialize: capabilities.{'.'.join(path)}: must be {shown}"
    return None


def plain_options(options: Any) -> bool | None:
    """`answersPermissions` of initializationOptions that need no model (none, or only
    `clientName` and `answersPermissions`, of their plain types); None for any others, which
    the server reads with `ClientOptions` (a TCP token, a session token, anything unusual).
    Options that are not an object are no options, as they always were."""
    if not isinstance(options, dict):
        return False
    for key, value in options.items():
        kinds = PLAIN_OPTIONS.get(key)
        if kinds is None or not isinstance(value, kinds):
            return None
    return bool(options.get("answersPermissions", False))


def work_done_progress(params: dict[str, Any]) -> bool:
    """Whether the client takes work-done progress (`$/progress` for its turns)."""
    return _at(params["capabilities"], ("window", "workDoneProgress")) is True


def position_encoding(capabilities: dict[str, Any]) -> str:
    """The client's first position encoding that pygls supports, else UTF-16 (as pygls chooses)."""
    offered = _at(capabilities, ("general", "positionEncodings")) or ()
    return next((e for e in offered if e in POSITION_ENCODINGS), DEFAULT_ENCODING)


def result(params: dict[str, Any], version: str) -> dict[str, Any]:
    """The result of `initialize` for these (readable) params."""
    capabilities = params["capabilities"]
    sync: dict[str, Any] = {"openClose": True, "change": INCREMENTAL}
    for key in ("willSave", "willSaveWaitUntil"):
        # pygls says false to what the client offers (the daemon takes neither), nothing otherwise.
        if _at(capabilities, ("textDocument", "synchronization", key)) is not None:
            sync[key] = False
    sync["save"] = False
    return {
        "capabilities": {
            "positionEncoding": position_encoding(capabilities),
            "textDocumentSync": sync,
            "executeCommandProvider": {"commands": []},
            "workspace": {
                "workspaceFolders": {"supported": True, "changeNotifications": True},
                "fileOperations": {},
            },
            "experimental": {
                SERVER_NAME: {"methods": sorted(names.REQUESTS), "notifications": [names.EVENTS_NOTIFY]}
            },
        },
        "serverInfo": {"name": SERVER_NAME, "version": version},
    }
