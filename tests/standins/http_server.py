"""The stand-ins' HTTP server: one thread per connection, and an agent that hangs up (cancelled,
killed, stopped with the daemon) is what they are for, not an error to print."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class StandInServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the agent went away mid-request
        super().handle_error(request, client_address)
