"""The protocol's enumerations: plain Python, without pydantic.

What a command needs to parse its own command line (`sessiond ls --status`, `sessiond trace
--kind`) and read the daemon's JSON, without the models; `models.py` uses them in its fields.
"""

from __future__ import annotations

from enum import StrEnum


class AgentProcessState(StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    CRASHED = "crashed"


class SessionStatus(StrEnum):
    IDLE = "idle"
    QUEUED = "queued"
    WORKING = "working"
    NEEDS_YOU = "needs_you"
    FAILED = "failed"
    STOPPED = "stopped"
    CLOSED = "closed"


class Attention(StrEnum):
    NEEDS_YOU = "needs_you"
    PLAN_STALLED = "plan_stalled"
    CONTEXT_HIGH = "context_high"
    TURN_LONG = "turn_long"
    AGENT_SILENT = "agent_silent"


class EventKind(StrEnum):
    AGENT_CREATED = "agent.created"
    AGENT_UPDATED = "agent.updated"
    AGENT_REMOVED = "agent.removed"
    AGENT_PROCESS = "agent.process"
    SESSION_OPENED = "session.opened"
    SESSION_STATUS = "session.status"
    SESSION_CLOSED = "session.closed"
    SESSION_REOPENED = "session.reopened"
    SESSIONS_PRUNED = "sessions.pruned"
    TURN_QUEUED = "turn.queued"
    TURN_STARTED = "turn.started"
    TURN_CHUNK = "turn.chunk"
    TURN_ENDED = "turn.ended"
    TURN_THOUGHT = "turn.thought"
    TURN_TOOL = "turn.tool"
    SESSION_PLAN = "session.plan"
    SESSION_USAGE = "session.usage"
    SESSION_CHANGES = "session.changes"
    SESSION_ATTENTION = "session.attention"
    SESSION_CONTROLS = "session.controls"
    SESSION_TITLED = "session.titled"
    FLEET = "fleet.summary"
    MERGE_STEP = "merge.step"
    TASK = "task.changed"
    SESSION_COLLISION = "session.collision"
    PERMISSION_ASKED = "permission.asked"
    PERMISSION_ANSWERED = "permission.answered"


class TurnOutcome(StrEnum):
    """How a turn ended: `turn.ended`'s `outcome`, where it is given. A turn ended by its agent
    tells it by `stopReason` (completed or cancelled) or `error` (failed)."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    """The daemon stopped (killed, crashed) while the turn ran or waited; told once, when it starts
    again, with `error` saying so. The session's status is then `failed`."""
