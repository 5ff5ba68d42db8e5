"""The wire contract between sessiond and its clients.

Everything a client needs to speak to the daemon lives here: the models of
every method's params and result, the method and notification names, and the
error codes. This package imports nothing from ``sessiond.daemon`` or
``sessiond.client``; both of those import it.
"""

from sessiond.protocol.errors import ErrorCode, RpcError
from sessiond.protocol.methods import METHODS, NOTIFICATIONS, Method

__all__ = ["METHODS", "NOTIFICATIONS", "ErrorCode", "Method", "RpcError"]
