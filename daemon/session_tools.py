"""What a session's own turn may ask of the daemon: suggest a task, start threads, hear from them.

These are the tools of the `sessiond` MCP server every session is offered.
The same four calls serve a client connection (`task/suggest`,
`thread/start`, `thread/status`, `thread/wait`) and the daemon's own MCP
endpoint; `acting_for` is the session a caller speaks for (the MCP bridge's
token, the endpoint's bearer token), None for a client speaking for itself.
A caller acting for a session speaks for that session alone and sees only
the threads of its own tree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sessiond.protocol import models as m
from sessiond.protocol.errors import ErrorCode, RpcError

if TYPE_CHECKING:
    from sessiond.daemon.around import Around
    from sessiond.daemon.records import SessionRecord


class SessionTools:
    """Over `Around` (tasks and threads), with the two things of the core it reads: a session by
    its id (an RpcError naming it when there is none) and how a session is described."""

    def __init__(
        self,
        around: Around,
        *,
        get_session: Callable[[str], SessionRecord],
        describe: Callable[[SessionRecord], m.SessionInfo],
    ) -> None:
        self.around = around
        self.get_session = get_session
        self.describe = describe

    def suggest(self, params: m.TaskSuggestParams, acting_for: str | None) -> m.TaskInfo:
        params = params.model_copy(update={"from_session": self._own(params.from_session, acting_for)})
        return self.around.suggest(params).info()

    async def start_thread(self, params: m.ThreadStartParams, acting_for: str | None) -> m.SessionInfo:
        parent = self._own(params.parent, acting_for)
        assert parent is not None  # ThreadStartParams requires it; _own keeps or replaces it
        thread = await self.around.start_thread(params.model_copy(update={"parent": parent}))
        return self.describe(thread)

    def status(self, params: m.ThreadRef, acting_for: str | None) -> m.ThreadReport:
        self._own_thread(params.thread, acting_for)
        return self.around.report(self.get_session(params.thread))

    async def wait(self, params: m.ThreadWaitParams, acting_for: str | None) -> m.ThreadReports:
        for thread in params.threads:
            self._own_thread(thread, acting_for)
        return await self.around.wait(params, waiter=acting_for)

    @staticmethod
    def _own(session: str | None, acting_for: str | None) -> str | None:
        if acting_for is None:
            return session
        if session not in (None, acting_for):
            raise RpcError(
                ErrorCode.UNAUTHORIZED, f"this connection acts for session {acting_for}, not {session}"
            )
        return acting_for

    def _own_thread(self, thread: str, acting_for: str | None) -> None:
        session = self.get_session(thread)
        if acting_for is None:
            return
        around = self.around
        if around.root_of(session) is not around.root_of(self.get_session(acting_for)):
            raise RpcError(
                ErrorCode.UNAUTHORIZED, f"session {thread} is not in the tree of session {acting_for}"
            )
