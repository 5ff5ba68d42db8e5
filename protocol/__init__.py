"""The wire contract between sessiond and its clients.

Everything a client needs to speak to the daemon lives here: the models of
every method's params and result, the method and notification names, and the
error codes. This package imports nothing from ``sessiond.daemon`` or
``sessiond.client``; both of those import it.
"""

from typing import TYPE_CHECKING, Any

from sessiond.protocol.errors import ErrorCode, RpcError

if TYPE_CHECKING:
    from sessiond.protocol.methods import METHODS, NOTIFICATIONS, Method


def __getattr__(name: str) -> Any:
    # The method table (and the models under it) loads on first use: `paths` and `errors`
    # alone, what the editor's relay needs, come without pydantic.
    if name in ("METHODS", "NOTIFICATIONS", "Method"):
        from sessiond.protocol import methods

        return getattr(methods, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["METHODS", "NOTIFICATIONS", "ErrorCode", "Method", "RpcError"]
