"""Error codes the daemon answers with, beside JSON-RPC's own."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ErrorCode(IntEnum):
    # JSON-RPC 2.0 and LSP
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_NOT_INITIALIZED = -32002
    REQUEST_CANCELLED = -32800

    # sessiond's own; each says what was not found or not allowed.
    SESSION_NOT_FOUND = -33001
    AGENT_NOT_FOUND = -33002
    AGENT_EXISTS = -33003
    SESSION_CLOSED = -33004
    AGENT_ERROR = -33005
    AGENT_UNAVAILABLE = -33006
    TURN_TIMEOUT = -33007
    CONFLICT = -33008
    SUBSCRIPTION_NOT_FOUND = -33009
    UNAUTHORIZED = -33010
    DAEMON_STOPPING = -33011
    RUN_NOT_FOUND = -33012
    PLACEMENT_FAILED = -33013
    TASK_NOT_FOUND = -33014
    LIMIT_REACHED = -33015


class RpcError(Exception):
    """An error answer to a request: a code, a sentence for people, and data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.message!r})"

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": int(self.code), "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error
