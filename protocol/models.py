"""Params and results of every method, as pydantic models.

Field names are snake_case in Python and camelCase on the wire, as in LSP.
Params refuse unknown fields (a typo is an error that names the field);
results ignore them, so an older client keeps working against a newer daemon.
"""

# No `from __future__ import annotations` here: pydantic would turn each of some 400 string
# annotations back into a type when the module is imported, a quarter of its import time.
import os
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

# The enumerations live in enums.py, without pydantic; they are the models' as much.
from sessiond.protocol.enums import AgentProcessState, Attention, EventKind, SessionStatus
from sessiond.protocol.enums import TurnOutcome as TurnOutcome


# defer_build: a model's validator is built when it is first used, not on import (a daemon or a
# CLI command uses a few of these models, and building them all was a fifth of a cold start).
class Params(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class Result(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )

    def wire(self) -> dict[str, Any]:
        """The JSON-ready form sent on the wire."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"must be an absolute path, got {path!r}")
    return os.path.normpath(path)


AbsolutePath = Annotated[str, AfterValidator(_absolute)]
AgentName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
SessionId = Annotated[str, Field(min_length=1, max_length=128)]


# ---------------------------------------------------------------- agents


PermissionPolicy = Literal["ask", "allow", "allow_reads", "deny"]
Placement = Literal["here", "worktree", "sandbox", "container", "ssh"]
HelperPolicy = Literal["allow", "ask"]


class PlacementSettings(Params):
    """How a placement is set up; each field matters to one kind."""

    base: str | None = Field(
        None,
        description="worktree: the ref to branch from (default: HEAD; with repository, the repository's "
        "default branch).",
    )
    repository: str | None = Field(
        None,
        description="worktree: a git repository to clone where the agent runs (https://, ssh://, "
        "git://, file:// URL, user@host:path, or an absolute path there) instead of using the root's: the "
        "session's worktree is made there on the first turn, its files read and written and its "
        "commands run there, and merging pushes its branch back. The session then has no root here "
        "(its root is the repository).",
    )
    checkout_dir: str | None = Field(
        None,
        description="worktree with repository: the folder where the agent runs (a Ray node, or this "
        "machine) that holds the clone and the sessions' worktrees; absolute or ~/... (default: "
        "~/.cache/sessiond/checkouts there).",
    )
    sandbox_rw_binds: list[str] = Field(
        default_factory=list, description="sandbox: more paths bound read-write."
    )
    sandbox_ro_binds: list[str] = Field(
        default_factory=list, description="sandbox: more paths bound read-only."
    )
    sandbox_network: bool = Field(
        False, description="sandbox: let commands reach the network (off by default)."
    )
    container_engine: str | None = Field(
        None, description="container: docker or podman (default: the one that works)."
    )
    container_image: str | None = Field(None, description="container: the image to run.")
    container_run_args: list[str] = Field(
        default_factory=list, description="container: more `run` arguments."
    )
    container_network: bool = Field(
        False,
        description="container: let commands reach the network (off by default: `--network none`, "
        "unless containerRunArgs name a network).",
    )
    ssh_target: str | None = Field(
        None, description="ssh: user@host[:port], with the user's ssh config and keys."
    )
    ssh_dir: str | None = Field(
        None, description="ssh: the session's directory there (default: the same path)."
    )
    ssh_key_file: str | None = None
    ssh_known_hosts: str | None = None
    ssh_verify_host_key: bool = True
    ssh_connect_timeout: float = Field(15.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _drop_retired(cls, data: Any) -> Any:
        # sandbox_unshare_net is gone (no network is the default now); stored agents still carry it.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in ("sandbox_unshare_net", "sandboxUnshareNet")}
        return data


Runner = Literal["local", "ray"]


class RaySettings(Params):
    """Where a Ray-run agent's process goes (runner `ray`): an existing Ray cluster, and what the
    process asks of the node Ray picks for it."""

    address: str | None = Field(
        None,
        description="The cluster, as `ray.init(address=...)` takes it ('auto', 'ray://host:10001', "
        "host:port). None: RAY_ADDRESS, else 'auto' (the cluster this machine is part of).",
    )
    num_cpus: float = Field(1.0, ge=0, description="CPUs the agent's process takes on its node.")
    memory: int | None = Field(None, ge=0, description="Bytes of memory it takes on its node.")
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom resources it needs: a node label is one ({'gpu-box': 0.01}).",
    )
    start_timeout: float = Field(
        120.0,
        gt=0,
        description="Seconds its process may wait for a node with these resources before the turn "
        "that needs it fails.",
    )


class AgentOptions(Params):
    """Settings of an agent; every field has a default."""

    runner: Runner = Field(
        "local",
        description="Where its process runs: `local`, on this machine; `ray`, on a node of a Ray "
        "cluster (the `ray` settings; `pip install sessiond[ray]`).",
    )
    ray: RaySettings = Field(default_factory=RaySettings, description="Used with runner `ray`.")

    mode: str | None = Field(None, description="ACP session mode id set on each new session.")
    model: str | None = Field(
        None, description="Model id, set through the ACP config option of category 'model'."
    )
    config: dict[str, str | bool] = Field(
        default_factory=dict, description="Other ACP config options by id, set on each new session."
    )
    default_placement: Placement = "here"
    placement_settings: PlacementSettings = Field(
        default_factory=PlacementSettings, description="Defaults for the placements of its sessions."
    )
    default_root: AbsolutePath | None = Field(None, description="Root of sessions opened without one.")
    max_active_turns: int | None = Field(
        None, ge=1, description="Turns of this agent running at once; the rest wait. None: no cap."
    )
    max_live_sessions: int | None = Field(
        None,
        ge=1,
        description="Sessions open at the agent at once (at each of its processes); past it the least "
        "recently used idle one is closed there and resumed on its next turn. None: no cap, but "
        "claude-agent-acp keeps as many as fit in half this machine's memory, 256 MiB each, at least 4 "
        "(each of its sessions is a Claude Code process).",
    )
    processes: int = Field(
        1,
        ge=1,
        le=64,
        description="Processes of the agent its sessions are spread over: a session opens at the least "
        "loaded one (a side chat at its main session's) and stays there while it is open there. "
        "With runner `ray`, each process goes to the node Ray picks for it.",
    )
    turn_timeout: float = Field(
        1800.0,
        gt=0,
        description="Seconds the agent may work on a prompt before the turn is cancelled (starting the "
        "agent and its session are not counted).",
    )
    session_timeout: float = Field(
        120.0,
        gt=0,
        description="Seconds the agent may take to open, load, resume or fork a session before the "
        "turn that needed it fails (the session stays; its next turn asks again).",
    )
    max_opening_sessions: int | None = Field(
        None,
        ge=1,
        description="Sessions each of its processes is asked to open (new, load, resume, fork) at "
        "once; the rest wait their turn, and session_timeout counts from when one is asked. None: "
        "no cap, but gemini-cli is asked one at a time and claude-agent-acp four at a time "
        "(docs/agents.md says why).",
    )
    plan_stall_seconds: float = Field(
        600.0, gt=0, description="A plan entry in progress for longer than this flags the session."
    )
    silence_seconds: float = Field(
        20.0,
        gt=0,
        description="A turn whose agent has said nothing for this long (no tool of it running, "
        "no person asked) flags the session `agent_silent`; its statusDetail says for how long "
        "and the last error or retry line of the agent's log since the turn began.",
    )
    max_threads: int | None = Field(
        None, ge=0, description="Threads a session tree may start; 0: use no helpers. None: no cap."
    )
    helper_policy: HelperPolicy = Field(
        "allow", description="ask: starting a thread is a permission request to the user first."
    )
    token_budget: int | None = Field(
        None, ge=1, description="Tokens a session tree may use, threads included."
    )
    cost_budget: float | None = Field(
        None, gt=0, description="USD a session tree may spend, threads included."
    )
    max_running_tasks: int | None = Field(
        None, ge=1, description="Accepted suggested tasks running at once; the rest wait queued."
    )
    side_model: str | None = Field(None, description="Model option for side chats (a cheaper one, say).")
    permission_policy: PermissionPolicy = Field(
        "ask",
        description="How permission requests are answered when no client answers them: "
        "ask (wait for a client), allow, allow_reads (allow reads, deny the rest), deny.",
    )
    env_passthrough: list[str] | None = Field(
        None,
        description="The only variables of the daemon's environment its process and commands get "
        "(a trailing * matches a prefix), beside PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TERM, "
        "TMPDIR, TZ and the proxies. None: all but the daemon's own (SESSIOND_*).",
    )
    env_clear: bool = Field(
        False,
        description="Its process and commands start from PATH, HOME, USER, LOGNAME, SHELL, LANG, "
        "LC_*, TERM, TMPDIR, TZ and the proxies alone (plus env_passthrough and its env).",
    )
    max_prompt_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="The largest prompt (UTF-8 bytes) a turn of this agent takes; a larger one is refused.",
    )


class AgentSpec(Params):
    """An agent: one set of settings, one id, one process."""

    name: AgentName
    command: list[str] = Field(min_length=1, description="The ACP agent's command line.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Set for the agent's process, on top of the daemon's environment as its "
        "options (envPassthrough, envClear) filter it.",
    )
    options: AgentOptions = Field(default_factory=AgentOptions)


class AgentRef(Params):
    name: AgentName


class AgentUpdateParams(Params):
    """Fields given replace the agent's; options are merged key by key.

    A running agent process keeps its settings until it is restarted
    (`restart: true` does so at once; its running turns are cancelled).
    """

    name: AgentName
    command: list[str] | None = Field(None, min_length=1)
    env: dict[str, str] | None = None
    options: AgentOptions | None = None
    restart: bool = False


class AgentCapabilitiesInfo(Result):
    load_session: bool = False
    list: bool = False
    resume: bool = False
    fork: bool = False
    close: bool = False
    mcp_http: bool = Field(
        False,
        description="It takes MCP servers over HTTP: its sessions are offered the daemon's own MCP "
        "endpoint rather than a stdio bridge process each.",
    )


class AgentProcessInfo(Result):
    index: int | None = Field(
        None, description="Which of the agent's processes (0, 1, ...); None where they are taken together."
    )
    state: AgentProcessState
    pid: int | None = Field(None, description="Its pid, on the machine it runs on (see `node`).")
    node: str | None = Field(
        None, description="Where it runs when not on this machine: the Ray node's id and address."
    )
    memory: int | None = Field(
        None,
        description="Resident bytes of the process and its children while it runs (as last measured on "
        "its node, for a Ray-run one); None when not known.",
    )
    started_at: datetime | None = None
    exit_code: int | None = None
    starts: int = Field(0, description="How many times the process was started.")
    last_error: str | None = None
    capabilities: AgentCapabilitiesInfo | None = Field(
        None, description="As the agent declared them at initialize; None before its first start."
    )
    agent_info: dict[str, Any] | None = Field(None, description="The agent's name and version.")
    live_sessions: int = Field(0, description="Sessions currently open at the agent.")
    live_cap: int | None = Field(
        None,
        description="Sessions kept open at the agent at once, past which the least recently used idle "
        "one is closed there: the agent's max_live_sessions, or its default (claude-agent-acp: as many "
        "as fit in half this machine's memory, 256 MiB each); None: no cap, or not started yet.",
    )
    active_turns: int = 0
    note: str | None = Field(None, description="Something a person should know about this agent.")
    log_path: str | None = Field(None, description="Where the agent's stderr goes.")
    malformed_updates: int = Field(
        0,
        description="Updates from the agent that did not fit ACP's schema: what could be read of "
        "them was kept, the rest dropped (logged once per kind in the daemon's log).",
    )
    auth_methods: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The agent's ACP authMethods as it declared them at initialize (id, name, "
        "description, type; vars for an env_var method), each with `satisfied`: whether the "
        "agent's environment holds what the method needs.",
    )
    authenticated: str | None = Field(
        None,
        description="The authMethod the daemon authenticated with (ACP authenticate) before the "
        "first session; None if none was needed or none could be used.",
    )


class AgentInfo(Result):
    name: str
    command: list[str]
    env_keys: list[str] = Field(description="Names of the agent's own environment variables.")
    options: AgentOptions
    builtin: bool = False
    process: AgentProcessInfo = Field(
        description="Its process; with several (options.processes), them taken together: running if "
        "one is, pid and node of the first running one, counts summed."
    )
    processes: list[AgentProcessInfo] = Field(
        default_factory=list, description="Each of its processes, in order (one, unless options.processes)."
    )
    open_sessions: int = 0
    turns: int = Field(0, description="Turns its sessions have ended (closed ones too).")


class AgentList(Result):
    agents: list[AgentInfo]


class Removed(Result):
    removed: bool = True


# ---------------------------------------------------------------- sessions


StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class PlanEntry(Result):
    content: str
    priority: Literal["high", "medium", "low"] = "medium"
    status: Literal["pending", "in_progress", "completed"] = "pending"


class Plan(Result):
    """The agent's latest plan, as its last `plan` update gave it."""

    entries: list[PlanEntry] = Field(default_factory=list)
    done: int = Field(0, description="Entries completed.")
    total: int = 0
    current: str | None = Field(None, description="The entry in progress, if any.")
    updated_at: datetime | None = None


class Cost(Result):
    amount: float
    currency: str


class ContextFill(Result):
    used: int = Field(description="Tokens in the context window now.")
    size: int = Field(description="Size of the context window in tokens.")
    cost: Cost | None = Field(None, description="The session's cost so far, as the agent reports it.")
    percent: float | None = Field(None, description="used / size, in percent.")
    estimated: bool = Field(
        False, description="True when the agent sent no usage and this is estimated from the transcript."
    )


class TurnUsage(Result):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None


class SessionUsage(Result):
    """Tokens over every turn of a session, as the agent reported them per turn."""

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    busy_seconds: float = Field(0.0, description="Time its turns took, added up.")


ChangeKind = Literal["added", "modified", "deleted", "renamed"]


class ChangedFile(Result):
    path: str = Field(description="Relative to the session's root; absolute when outside it.")
    kind: ChangeKind
    added: int = Field(0, description="Lines added.")
    removed: int = Field(0, description="Lines removed.")
    old_path: str | None = Field(None, description="Where a renamed file was.")
    outside_root: bool = Field(False, description="Touched by a tool call outside the session's root.")
    shared: bool = Field(
        False,
        description="Changed while another session's command ran in the same working copy: "
        "it may be theirs as well (they are named in sharedWith, and show it too).",
    )
    shared_with: list[str] | None = Field(None, description="The other sessions, when shared.")


class Changes(Result):
    """What the session changed, against the state its root had when it first ran."""

    files: list[ChangedFile] = Field(default_factory=list)
    added: int = 0
    removed: int = 0
    base: str | None = Field(
        None, description="The git tree (or 'snapshot') the changes are counted against."
    )
    others: list[ChangedFile] | None = Field(
        None,
        description="In a working copy shared with other sessions (every placement but worktree): "
        "files changed in the root since the base by others (sessions, people), not in files or "
        "the counts. None for a worktree, whose changes are all its own.",
    )


SessionKind = Literal["main", "side", "task", "thread"]


class NameValue(Params):
    name: str = Field(min_length=1, max_length=1000)
    value: str = Field(max_length=100_000)


class McpServerSpec(Params):
    """An MCP server of the client's own for the session's agent, in ACP's `McpServer` shapes: one
    the agent starts (stdio: command, args, env) or reaches (http: url, headers)."""

    type: Literal["stdio", "http"] = "stdio"
    name: str = Field(min_length=1, max_length=200, description="Unique in the session; not `sessiond`.")
    command: str | None = Field(None, max_length=4096, description="stdio: the program to start.")
    args: list[str] = Field(default_factory=list, max_length=1000)
    env: list[NameValue] = Field(default_factory=list, max_length=1000)
    url: str | None = Field(None, max_length=8192, description="http: the server's URL.")
    headers: list[NameValue] = Field(default_factory=list, max_length=1000)

    @model_validator(mode="after")
    def _transport_fields(self) -> Self:
        if self.type == "stdio" and (not self.command or self.url is not None):
            raise ValueError(f"MCP server {self.name!r}: a stdio server has a command and no url")
        if self.type == "http" and (not self.url or self.command is not None):
            raise ValueError(f"MCP server {self.name!r}: an http server has a url and no command")
        return self


class SessionOpenParams(Params):
    agent: AgentName = "demo"
    root: AbsolutePath | None = Field(
        None,
        description="Directory the session works in; must exist. Default: the agent's default_root. "
        "Left out with placementSettings.repository (the session works in a clone of it).",
    )
    placement: Placement | None = Field(None, description="Default: the agent's default_placement.")
    placement_settings: PlacementSettings | None = Field(
        None, description="Merged over the agent's placement_settings, field by field."
    )
    title: str | None = Field(
        None, max_length=500, description="With count over 1, each is numbered: 'review (2 of 3)'."
    )
    count: int = Field(1, ge=1, le=100_000, description="Open this many sessions alike in one call.")
    mcp_servers: list[McpServerSpec] | None = Field(
        None,
        max_length=100,
        description="MCP servers of the client's own (an editor's tools), offered to the agent beside "
        "the daemon's `sessiond` server each time the session opens there; kept with the session and "
        "given to its side chats. http ones only to an agent that takes them.",
    )


class SessionRef(Params):
    session: SessionId


class SessionListParams(Params):
    agent: AgentName | None = None
    status: list[SessionStatus] | None = Field(None, description="Only sessions in one of these states.")
    kind: list[SessionKind] | None = None
    run: str | None = Field(None, description="Only sessions opened by this run.")
    attention: bool = Field(False, description="Only sessions with an attention flag.")
    sort: Literal["created", "activity"] = Field(
        "created",
        description="created: oldest first, stable while sessions work (for stepping '3 of 200'); "
        "activity: most recent first.",
    )
    include_closed: bool = Field(False, description="Closed sessions are left out unless asked for.")
    cursor: str | None = Field(None, description="nextCursor of the previous page.")
    limit: int = Field(200, ge=1, le=10_000)
    brief: bool = Field(False, description="Leave out plan entries and changed files (counts stay).")


class Where(Result):
    """Where a session's work lands."""

    placement: Placement
    root: str = Field(description="Where the agent works: the worktree, or the directory on the ssh target.")
    host: str | None = Field(
        None,
        description="user@host:port for ssh; the Ray node for a worktree made there from a repository; "
        "None on this machine.",
    )
    description: str = ""
    worktree: str | None = None
    branch: str | None = None
    repository: str | None = Field(None, description="The repository its worktree was made from, if any.")


class SessionInfo(Result):
    id: str
    agent: str
    root: str = Field(
        description="The directory it was opened in; for a worktree made from a repository, the repository."
    )
    placement: Placement
    title: str | None = None
    status: SessionStatus
    status_since: datetime
    status_detail: str | None = Field(
        None,
        description="Why the status is what it is, when it waits: which limit a queued turn waits on "
        "(maxActiveTurns, maxLiveSessions).",
    )
    created_at: datetime
    turns: int = Field(0, description="Turns that have ended.")
    queued_turns: int = Field(0, description="Turns asked for and not yet started.")
    live: bool = Field(False, description="Whether the session is open at the agent now.")
    agent_session_id: str | None = Field(None, description="The agent's own id; None until the first turn.")
    last_stop_reason: StopReason | None = None
    last_error: str | None = None
    recap: str | None = Field(
        None, description="The last reply's last paragraph (what the agent concluded), cut at a sentence."
    )
    kind: SessionKind = "main"
    parent: str | None = Field(None, description="The session a side chat, task or thread belongs to.")
    last_activity: datetime | None = Field(None, description="When anything last happened in it.")
    plan: Plan | None = None
    context: ContextFill | None = None
    usage: SessionUsage | None = None
    changes: Changes | None = None
    attention: list[Attention] = Field(default_factory=list)
    run: str | None = Field(None, description="The run that opened it, if any.")
    where: Where | None = Field(None, description="Set once its placement is up (on the first turn).")


class SessionOpenResult(Result):
    sessions: list[SessionInfo]


# ---------------------------------------------------------------- a session's controls


ControlsSource = Literal["session", "agent", "none"]


class ModeInfo(Result):
    id: str
    name: str
    description: str | None = None


class AgentCommand(Result):
    """One of the agent's own slash commands (a prompt that starts `/name`)."""

    name: str
    description: str = ""
    hint: str | None = Field(None, description="What to type after the command, if it takes input.")


class ChosenControls(Result):
    mode: str | None = None
    config: dict[str, str | bool] = Field(default_factory=dict)


class SessionControls(Result):
    """What a session's agent lets a person change (modes, config options such as the model) and
    its slash commands; with what was chosen for the session, kept and applied when it opens."""

    source: ControlsSource = Field(
        description="Where the offer comes from: `session`, as the agent said for this session (it is "
        "live or was); `agent`, as the agent offered its last session (this one has not opened at the "
        "agent yet, and the choices are laid over it); `none`, the agent has not said (it never ran)."
    )
    modes: list[ModeInfo] = Field(default_factory=list)
    mode: str | None = Field(None, description="The current mode (or the one chosen, until it opens).")
    config_options: list[dict[str, Any]] = Field(
        default_factory=list,
        description="ACP SessionConfigOption objects as the agent sent them (id, name, category, type, "
        "currentValue, options).",
    )
    commands: list[AgentCommand] = Field(default_factory=list)
    chosen: ChosenControls = Field(
        default_factory=ChosenControls,
        description="What was chosen for this session (session/setMode, session/setConfigOption).",
    )


def config_values(option: dict[str, Any]) -> list[str]:
    """The values a select config option (ACP SessionConfigOption) takes, its groups opened."""
    values: list[str] = []
    for entry in option.get("options") or []:
        if isinstance(entry, dict) and "value" in entry:
            values.append(str(entry["value"]))
        elif isinstance(entry, dict):
            values += [
                str(o["value"]) for o in entry.get("options") or [] if isinstance(o, dict) and "value" in o
            ]
    return values


class SessionSetModeParams(Params):
    session: SessionId
    mode: str = Field(min_length=1, description="One of the session's `modes` (session/controls).")


class SessionRenameParams(Params):
    session: SessionId
    # (No min_length: "" is refused by the daemon with the sentence a title of spaces gets.)
    title: str = Field(max_length=500, description="Its new title: words, not blanks.")


class SessionSetConfigParams(Params):
    session: SessionId
    config_id: str = Field(min_length=1, description="The `id` of one of the session's `configOptions`.")
    value: str | bool


class SessionPage(Result):
    sessions: list[SessionInfo]
    total: int = Field(description="Sessions matching the filters, on every page.")
    next_cursor: str | None = None


class SessionPromptParams(Params):
    session: SessionId
    prompt: str = Field(min_length=1)
    turn_id: str | None = Field(
        None,
        max_length=128,
        description="Chosen by the client to match this turn's events before the answer arrives.",
    )
    work_done_token: int | str | None = Field(
        None, description="LSP work-done progress token: the turn is reported through $/progress."
    )


class TurnResult(Result):
    turn_id: str
    session: str
    text: str = Field(description="The agent's reply, all its message chunks joined.")
    stop_reason: StopReason
    usage: TurnUsage | None = None
    context: ContextFill | None = None
    plan: Plan | None = Field(None, description="The session's plan as the turn ended.")
    changes: Changes | None = Field(None, description="The session's changed files as the turn ended.")
    notice: str | None = Field(
        None,
        description="What the person should know of how the turn went, as its turn.ended says: that "
        "the agent could not restore the session and this turn began a new conversation, say.",
    )
    started_at: datetime
    ended_at: datetime


class TranscriptParams(Params):
    session: SessionId
    offset: int | None = Field(
        None, ge=0, description="First line (0-based) of the whole transcript; None: the last `limit` lines."
    )
    limit: int = Field(200, ge=1, le=10_000)


class TranscriptLine(Result):
    n: int = Field(description="Line number in the whole transcript, from 0.")
    role: Literal["user", "agent", "thought", "tool", "status"] = Field(
        description="status: how a turn that did not complete ended (cancelled by whom, failed, interrupted)."
    )
    turn: str | None = None
    text: str


def tool_line(tool_kind: str | None, title: str, status: str | None = None) -> str:
    """A tool call as a transcript line (role tool) reads, and as a client shows what a turn does:
    "[edit] Write a.py"; one that failed (a command that failed) or whose permission was refused
    says so: "[execute] rm -rf build (refused)". `status` is ACP's, or "refused"."""
    return f"[{tool_kind or 'tool'}] {title}" + (f" ({status})" if status in ("failed", "refused") else "")


def refuses(option_kind: object) -> bool:
    """Whether a permission option of this ACP kind (`reject_once`, `reject_always`) says no."""
    return isinstance(option_kind, str) and option_kind.startswith("reject")


class Transcript(Result):
    lines: list[TranscriptLine]
    total: int = Field(description="Lines in the whole transcript.")
    head: int = Field(
        0, description="The newest seq when it was read: follow on with events after it, missing none."
    )


class SessionCancelParams(Params):
    session: SessionId
    turn_id: str | None = Field(None, description="Only this turn; by default every running and queued one.")
    reason: str | None = Field(
        None, max_length=200, description="Why, in a few words (a batch stop): kept in the transcript."
    )


class CancelResult(Result):
    cancelled: int = Field(description="How many turns were told to stop.")


class SessionPruneParams(Params):
    closed_before: datetime = Field(
        description="Remove the sessions closed before this time (ISO 8601; a time without a zone is UTC)."
    )
    dry_run: bool = Field(False, description="Count what would go, and remove nothing.")


class PruneResult(Result):
    sessions: int = Field(description="Closed sessions removed (with a dry run: that would be).")
    turns: int = Field(description="Their turns.")
    events: int = Field(description="Their events: transcripts, plans, usage, changes.")
    tasks: int = Field(description="Settled tasks (done, dismissed, failed) of theirs, or of no session.")
    runs: int = Field(description="Runs that ended before the time and have no session left.")
    kept: int = Field(
        description="Sessions closed before the time that stay: a session of theirs is still open, or a "
        "task suggested in them is still to run."
    )
    worktrees: list[str] = Field(
        default_factory=list,
        description="What their closes kept (a worktree with work in it, its branch): left where it is, "
        "each sentence saying how to remove it.",
    )
    freed_bytes: int = Field(
        0,
        description="Bytes the store's file gave back to the filesystem, before this answer (a read "
        "holding the store's log then: at a later checkpoint): 0 for a dry run, when what went freed "
        "no whole page, or for a store made before sessiond gave space back (`keptBytes`).",
    )
    kept_bytes: int = Field(
        0,
        description="Bytes free inside a store's file that keeps its size (made before sessiond gave space "
        "back), reused for what comes next: `sessiond compact`, with the daemon stopped, gives them back "
        "and makes the store give space back after each prune. 0 for a store that gives space back.",
    )
    dry_run: bool = False


class PermissionAnswerParams(Params):
    permission: str = Field(description="The id from the permission.asked event.")
    option_id: str | None = Field(description="One of the options offered, or null to answer 'cancelled'.")


class Answered(Result):
    answered: bool = True


class PermissionRequestParams(Result):
    """Sent by the daemon to clients that answer permissions (`session/requestPermission`)."""

    permission: str
    agent: str
    session: str
    turn: str | None = None
    tool_call: dict[str, Any] = Field(description="The agent's tool call: title, kind, content, locations.")
    options: list[dict[str, Any]] = Field(description="Each with optionId, name, kind (allow_once, ...).")


class PermissionListParams(Params):
    session: str | None = Field(None, description="Only this session's requests.")


class PermissionList(Result):
    permissions: list[PermissionRequestParams] = Field(
        description="Each as `session/requestPermission` carries it, oldest first."
    )


class PermissionRequestResult(Params):
    option_id: str | None = Field(description="The option chosen, or null for 'cancelled'.")


class ClientOptions(Params):
    """`initializationOptions` of `initialize`."""

    token: str | None = Field(None, description="The daemon's TCP token; needed over TCP only.")
    answers_permissions: bool = Field(
        False, description="Send this client `session/requestPermission` when an agent asks."
    )
    client_name: str | None = None
    session_token: str | None = Field(
        None, description="Acting for one session (the MCP bridge): the token the daemon gave it."
    )


# ---------------------------------------------------------------- side chats, tasks, threads


class SideParams(Params):
    session: SessionId = Field(description="The main session to ask beside.")
    question: str | None = Field(None, description="Asked at once when given; the answer comes back.")
    writable: bool = Field(False, description="Side chats may not write files unless this says so.")


class SideResult(Result):
    session: SessionInfo
    forked: bool = Field(
        description="True when the agent forked the main session; else it got an account of it."
    )
    reply: TurnResult | None = None


TaskStatus = Literal["suggested", "queued", "running", "done", "failed", "dismissed"]


class TaskSuggestParams(Params):
    agent: AgentName | None = Field(None, description="Whose inbox; default: the suggesting session's agent.")
    title: str = Field(min_length=1, max_length=300)
    prompt: str = Field(min_length=1)
    why: str | None = None
    placement: Placement | None = Field(
        None, description="Where it would run; default worktree in git, else here."
    )
    root: AbsolutePath | None = Field(None, description="Default: the suggesting session's root.")
    from_session: SessionId | None = None


class TaskInfo(Result):
    id: str
    agent: str
    title: str
    prompt: str
    why: str | None = None
    placement: str | None = None
    root: str | None = None
    from_session: str | None = None
    status: TaskStatus
    session: str | None = Field(None, description="The session it runs in, once accepted.")
    reason: str | None = Field(None, description="Why it was dismissed, or how it failed.")
    created_at: datetime


class TaskRef(Params):
    task: str


class TaskDismissParams(Params):
    task: str
    reason: str = Field(min_length=1)


class TaskListParams(Params):
    agent: AgentName | None = None
    status: list[TaskStatus] | None = None


class TaskList(Result):
    tasks: list[TaskInfo]


class ThreadStartParams(Params):
    parent: SessionId = Field(description="The coordinator session.")
    prompt: str = Field(min_length=1)
    placement: Placement | None = Field(None, description="Default: worktree in git, else here.")
    title: str | None = None


class ThreadReport(Result):
    session: str
    status: SessionStatus
    done: bool
    reply: str | None = Field(None, description="Its last reply.")
    error: str | None = None
    plan: Plan | None = None
    changes: Changes | None = None


class ThreadRef(Params):
    thread: SessionId


class ThreadWaitParams(Params):
    threads: list[SessionId] = Field(min_length=1)
    timeout: float | None = Field(None, gt=0, description="Seconds; reports as they are when it runs out.")


class ThreadReports(Result):
    reports: list[ThreadReport]


class BroadcastParams(Params):
    prompt: str = Field(min_length=1)
    sessions: list[SessionId] | None = None
    threads_of: SessionId | None = Field(None, description="Every thread of this coordinator.")


class BroadcastResult(Result):
    sessions: list[str] = Field(description="The sessions the prompt was queued on, as their next turn.")


class TreeNode(Result):
    session: SessionInfo
    children: list["TreeNode"] = Field(default_factory=list)
    tokens: int = Field(0, description="Tokens of this session and everything under it.")
    cost: float = 0.0


# ---------------------------------------------------------------- merging


class MergeParams(Params):
    session: SessionId
    strategy: Literal["merge", "rebase"] = "merge"
    gate: str | None = Field(None, description="A shell command that must pass on the merged result.")
    keep: bool = Field(False, description="Keep the worktree and branch after the merge.")
    base_branch: str | None = Field(None, description="Where to merge (default: the branch it came from).")
    hand_back: bool = Field(
        False,
        description="On a conflict or a failing gate, send the problem to the session as its next prompt.",
    )


class MergeEntry(Result):
    session: str
    branch: str
    base: str
    strategy: str
    gate: str | None = None
    status: Literal["queued", "running", "merged", "failed", "cancelled"]
    reason: str | None = None
    conflicts: list[str] = Field(default_factory=list)
    gate_output: str | None = None
    commit: str | None = None
    kept: bool | str | None = Field(
        None,
        description="After a merge: true when the worktree and branch were kept as asked (keep), "
        "false when they were removed, or the sentence saying why they could not be removed.",
    )
    repo: str | None = None
    position: int | None = Field(None, description="0: merging now; 1: next; None once done.")


class MergeList(Result):
    entries: list[MergeEntry]


# ---------------------------------------------------------------- runs


RunOutcome = Literal["completed", "failed", "stopped"]


class RunDeclareParams(Params):
    """Declare this connection's run: the sessions it opens from now on carry it."""

    name: str = Field(min_length=1, max_length=200)
    argv: list[str] = Field(default_factory=list, description="The command line of the flow.")
    cwd: AbsolutePath


class RunEndParams(Params):
    outcome: RunOutcome = Field(description="completed, failed, or stopped (by hand).")


class RunRef(Params):
    run: str


class RunInfo(Result):
    id: str
    name: str
    argv: list[str]
    cwd: str
    started_at: datetime
    ended_at: datetime | None = None
    outcome: RunOutcome | None = Field(None, description="None while it runs.")
    sessions: int = 0
    turns: int = 0
    serial_seconds: float = Field(
        0.0, description="Its turns' durations as they ran, added up (turns at once slow each other down)."
    )
    wall_seconds: float = Field(0.0, description="From its start to its end (or now).")
    cost: float = 0.0


class RunList(Result):
    runs: list[RunInfo]


# ---------------------------------------------------------------- events


class Event(Result):
    seq: int = Field(description="Daemon-wide, increasing, never reused.")
    kind: EventKind
    time: datetime
    agent: str | None = None
    session: str | None = None
    turn: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class EventsSubscribeParams(Params):
    since: int | None = Field(
        None, ge=0, description="Replay every stored event after this seq first; None: only new events."
    )
    sessions: list[str] | None = None
    agents: list[str] | None = None
    kinds: list[EventKind] | None = None
    snapshot: bool = Field(
        False, description="Also answer with the current state of the matching sessions and the fleet."
    )


class Fleet(Result):
    """The whole fleet at a glance, for a status line."""

    open: int = Field(description="Sessions not closed.")
    by_status: dict[SessionStatus, int] = Field(default_factory=dict)
    working: int = 0
    needs_you: int = 0
    failed: int = Field(0, description="Open sessions whose last turn failed (counted in open too).")
    attention: dict[Attention, int] = Field(default_factory=dict)
    cost: float = Field(0.0, description="Cost reported by the agents, added up (USD).")
    turns: int = Field(0, description="Turns that have ended.")
    serial_seconds: float = Field(
        0.0, description="Ended turns' durations as they ran, added up (turns at once slow each other down)."
    )
    wall_seconds: float = Field(
        0.0, description="From the first turn's start to the last one's end (of every turn, as turns counts)."
    )


class Snapshot(Result):
    """The state as of `head`: what a client shows before the events after it."""

    head: int
    sessions: list[SessionInfo]
    fleet: Fleet


class Subscription(Result):
    subscription: str
    head: int = Field(description="The seq of the newest event when the subscription began.")
    snapshot: Snapshot | None = None


class SubscriptionRef(Params):
    subscription: str


class EventsNotifyParams(Result):
    """Sent by the daemon: the next events of a subscription, in order."""

    subscription: str
    events: list[Event]
    through: int = Field(
        description="Every matching event up to this seq has now been sent (or superseded): "
        "resubscribe with since=through to carry on."
    )
    resync: Snapshot | None = Field(
        None,
        description="Sent instead of events when this client fell too far behind: "
        "the state as of resync.head; events after it follow.",
    )


# ---------------------------------------------------------------- daemon


class Empty(Params):
    pass


class StopResult(Result):
    pid: int
    cancelled_turns: int = Field(
        description="Turns running or queued as it was asked, which the stop cancels."
    )


class DaemonStatus(Result):
    version: str
    pid: int
    started_at: datetime
    socket: str
    tcp: str | None = None
    state_dir: str
    agents: int
    sessions: dict[SessionStatus, int] = Field(description="Open sessions by status.")
    closed: int = Field(0, description="Closed sessions the store keeps (`session/prune` removes them).")
    keep_closed: float | None = Field(
        None,
        description="Seconds a closed session is kept before the daemon removes it (`--keep-closed`); "
        "none: until `session/prune`.",
    )
    store: str | None = Field(None, description="The SQLite store's file.")
    store_bytes: int = Field(0, description="The store's size on disk, its write-ahead log included.")
    head: int = Field(description="The seq of the newest event.")
    clients: int = Field(description="Connections attached now.")
    mcp_url: str | None = Field(
        None,
        description="The daemon's MCP endpoint (loopback), once a session of an agent that takes "
        "http MCP servers was offered it.",
    )
