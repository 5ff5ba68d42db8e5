-- The model and the status line text, with no daemon: events in, state out.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local Model = require("sessiond.model")
local status = require("sessiond.status")

-- The model is pure: no editor API in it.
local source = table.concat(vim.fn.readfile(H.repo .. "/clients/nvim/lua/sessiond/model.lua"), "\n")
for _, forbidden in ipairs({ "vim%.api", "vim%.fn", "vim%.cmd", "vim%.schedule", "vim%.uv", "vim%.loop", "require%(" }) do
  H.eq(nil, source:find(forbidden), "model.lua uses " .. forbidden)
end

local seq = 0
local function event(kind, session, data, extra)
  seq = seq + 1
  return vim.tbl_extend("force", {
    seq = seq,
    kind = kind,
    time = ("2026-01-01T00:00:%02dZ"):format(seq % 60),
    agent = "demo",
    session = session,
    data = data or {},
  }, extra or {})
end

local m = Model.new()
H.eq("sessiond: offline", status.get(m), "status before connecting")
m:set_connection("online")
m:reset({
  head = 10,
  sessions = {
    { id = "s10", agent = "demo", status = "idle", createdAt = "2026-01-01T00:00:00Z", attention = {} },
    { id = "s2", agent = "demo", status = "working", createdAt = "2026-01-01T00:00:00Z", attention = {} },
  },
  fleet = { open = 2, working = 1, needsYou = 0 },
})
seq = 10
H.eq(10, m.seq, "seq after a snapshot")
H.eq(
  { "s2", "s10" },
  vim.tbl_map(function(i)
    return i.id
  end, m:ordered()),
  "creation order, s2 before s10"
)
H.eq("1 working · 2 open", status.get(m), "status after a snapshot")

-- Events at or below seq are duplicates.
H.eq(false, m:apply({ seq = 10, kind = "session.status", session = "s10", data = { status = "working" } }), "duplicate")
H.eq("idle", m:session("s10").status, "a duplicate changes nothing")

m:apply(event("session.opened", "s3", { root = "/w", placement = "here" }))
m:apply(event("session.status", "s3", { status = "working", since = 1767225601 }))
H.eq("2026-01-01T00:00:01Z", m:session("s3").statusSince, "a status's since is the time it began")
-- The same status with a detail added later (an agent gone silent) began when it began.
m:apply(event("session.status", "s3", { status = "working", since = 1767225601, detail = "no word" }))
H.eq("2026-01-01T00:00:01Z", m:session("s3").statusSince, "a detail's event does not move since")
H.eq("no word", m:session("s3").statusDetail, "the detail")
m:apply(event("fleet.summary", nil, { open = 3, working = 2, needsYou = 0 }))
m:set_current("s3")
H.eq("2 working · 3 open │ s3", status.get(m), "a current session without insight")

m:apply(event("session.plan", "s3", {
  plan = {
    entries = { { content = "a", status = "completed" }, { content = "b", status = "in_progress" } },
    done = 1,
    total = 2,
  },
}))
m:apply(event("session.usage", "s3", { context = { used = 84000, size = 200000, percent = 42.0 } }))
m:apply(event("session.changes", "s3", {
  changes = {
    files = { { path = "f.txt", kind = "added" }, { path = "g.txt", kind = "modified" } },
    base = "snapshot",
  },
}))
local text, dict = status.get(m)
H.eq("2 working · 3 open │ s3: plan 1/2 · ctx 42% · 2 files", text, "status with plan, context and files")
H.eq(
  { id = "s3", label = "s3", status = "working", plan = "1/2", context = 42, files = 2 },
  dict.session,
  "status dict"
)
H.eq("ctx 42%% ", status.escape("ctx 42% "), "escaping for a statusline format")

-- Streaming chunks keep the last non-blank line.
m:apply(event("turn.started", "s3", {}, { turn = "t1" }))
m:apply(event("turn.chunk", "s3", { text = "first" }, { turn = "t1" }))
m:apply(event("turn.chunk", "s3", { text = "\nsecond li" }, { turn = "t1" }))
m:apply(event("turn.chunk", "s3", { text = "ne\n" }, { turn = "t1" }))
H.eq("second line", m:session("s3").lastLine, "last line while streaming")
m:apply(event("turn.ended", "s3", { stopReason = "end_turn" }, { turn = "t1" }))
H.eq(1, m:session("s3").turns, "turns counted")

-- The next turn: the panel shows what this one says (or its plan's step), not the last one's line.
local panel = require("sessiond.panel")
m:session("s3").recap = "second line"
m:apply(event("turn.started", "s3", {}, { turn = "t2" }))
H.eq(nil, m:session("s3").lastLine, "a new turn starts without the last one's line")
local row = panel.session_line(m:session("s3"), 0, m)
H.eq(nil, row:find("second line", 1, true), "the last turn's line in a working row: " .. row)
m:apply(event("session.plan", "s3", {
  plan = { entries = { { content = "b", status = "in_progress" } }, done = 0, total = 1, current = "b" },
}))
row = panel.session_line(m:session("s3"), 0, m)
H.eq("(b)", row:match("%(b%)$"), "its plan's step until it says something: " .. row)
m:apply(event("turn.chunk", "s3", { text = "third" }, { turn = "t2" }))
row = panel.session_line(m:session("s3"), 0, m)
H.eq("third", row:match("third$"), "then what it says: " .. row)
m:apply(event("session.status", "s3", { status = "working" }))
m:apply(event("turn.tool", "s3", { first = true, title = "Write a.py", toolKind = "edit" }, { turn = "t2" }))
row = panel.session_line(m:session("s3"), 0, m)
H.eq("[edit] Write a.py", row:match("%[edit%] Write a%.py$"), "then the tool call it makes: " .. row)
m:apply(event("turn.chunk", "s3", { text = "\nwrote it" }, { turn = "t2" }))
row = panel.session_line(m:session("s3"), 0, m)
H.eq("wrote it", row:match("wrote it$"), "until it says something after it: " .. row)
-- A call named by its tool first (claude-agent-acp: "Terminal") takes the title its update gives.
local function tool(call, title, first)
  m:apply(event("turn.tool", "s3", { toolCallId = call, first = first, title = title, toolKind = "execute" }, { turn = "t2" }))
  return panel.session_line(m:session("s3"), 0, m)
end
tool("c1", "Terminal", true)
row = tool("c1", "pwd > where.txt", false)
H.eq("[execute] pwd > where.txt", row:match("%[execute%] pwd > where%.txt$"), "retitled by its update: " .. row)
row = tool("c2", "other call", false)
H.eq(nil, row:find("other call", 1, true), "an update of another call does not take the line: " .. row)
m:apply(event("turn.chunk", "s3", { text = "\nran it" }, { turn = "t2" }))
row = tool("c1", "pwd again", false)
H.eq("ran it", row:match("ran it$"), "nor one after it spoke: " .. row)
m:apply(event("turn.ended", "s3", { stopReason = "end_turn" }, { turn = "t2" }))

-- A failed turn's row says why; so does a session found failed (its recap is the turn before's).
m:apply(event("turn.started", "s3", {}, { turn = "t3" }))
m:apply(event("turn.ended", "s3", { error = "the tests did not pass" }, { turn = "t3" }))
m:apply(event("session.status", "s3", { status = "failed" }))
row = panel.session_line(m:session("s3"), 0, m)
H.eq("error: the tests did not pass", row:match("error: .*$"), "a failed turn's row: " .. row)
local found = { id = "s9", agent = "demo", status = "failed", lastError = "agent 'demo' exited", recap = "an old answer" }
row = panel.session_line(found, 0, m)
H.eq("error: agent 'demo' exited", row:match("error: .*$"), "a session found failed: " .. row)
m:apply(event("session.status", "s3", { status = "working" })) -- (working again, for what follows)

-- Stepping among working sessions, in creation order, wrapping.
m:apply(event("session.status", "s10", { status = "working" }))
local function step(from, dir)
  local id, index, total = m:step(from, dir)
  return { id, index, total }
end
H.eq({ "s2", 1, 3 }, step(nil, 1), "first working session")
H.eq({ "s10", 2, 3 }, step("s2", 1), "next after s2")
H.eq({ "s3", 3, 3 }, step("s10", 1), "next after s10")
H.eq({ "s2", 1, 3 }, step("s3", 1), "wraps to the first")
H.eq({ "s3", 3, 3 }, step("s2", -1), "previous wraps to the last")
m:apply(event("session.status", "s10", { status = "idle" }))
H.eq({ "s3", 2, 2 }, step("s10", 1), "from a session that is not working")
H.eq({ 0, 2 }, { m:working_position("s10") }, "position of a session not working")

-- Permissions: asked, then answered; a status change settles older asks of that session only.
m:apply(event("permission.asked", "s3", { permission = "p1", toolCall = { title = "ok?" }, options = {} }))
m:apply(event("session.status", "s2", { status = "working" }))
H.eq(1, #m:pending_permissions(), "another session's status leaves the ask")
m:apply(event("session.status", "s3", { status = "needs_you" }))
H.eq(1, #m:pending_permissions("s3"), "asked")
m:apply(event("permission.answered", "s3", { permission = "p1", optionId = "allow" }))
H.eq(0, #m:pending_permissions(), "answered")
m:apply(event("permission.asked", "s3", { permission = "p2", toolCall = {}, options = {} }))
m:apply(event("session.status", "s3", { status = "stopped" }))
H.eq(0, #m:pending_permissions(), "a cancelled turn's ask is dropped")

-- Closing forgets the session and the current choice.
m:apply(event("session.closed", "s3", {}))
H.eq(nil, m:session("s3"), "closed session forgotten")
H.eq(nil, m.current, "current cleared")

-- Counts come from the sessions, with or without a fleet summary.
local bare = Model.new()
bare:set_connection("online")
bare:apply({ seq = 1, kind = "session.opened", session = "a", agent = "x", time = "t", data = {} })
bare:apply({ seq = 2, kind = "session.status", session = "a", data = { status = "needs_you" } })
H.eq("1 needs you · 1 open", status.get(bare), "local counts")
H.eq(
  { "x" },
  vim.tbl_map(function(g)
    return g.name
  end, bare:by_agent()),
  "agents from sessions"
)

-- Side chats, tasks and threads come right under their parent, with their depth.
bare:apply({ seq = 3, kind = "session.opened", session = "b", agent = "x", time = "u", data = {} })
bare:apply({
  seq = 4,
  kind = "session.opened",
  session = "c",
  agent = "x",
  time = "v",
  data = { sessionKind = "side", parent = "a" },
})
local group = bare:by_agent()[1]
H.eq(
  { "a", "c", "b" },
  vim.tbl_map(function(i)
    return i.id
  end, group.sessions),
  "the side chat under its parent"
)
H.eq({ a = 0, b = 0, c = 1 }, group.depth, "depths")
H.eq("side", bare:session("c").kind, "the kind from session.opened")

-- Tasks: a listing, then task.changed events; newest first.
bare:set_tasks({ { id = "k-1", status = "suggested", title = "one", createdAt = "2026-01-01T00:00:01Z" } })
bare:apply({
  seq = 5,
  kind = "task.changed",
  agent = "x",
  time = "w",
  data = { task = { id = "k-2", status = "suggested", title = "two", createdAt = "2026-01-01T00:00:02Z" } },
})
bare:apply({
  seq = 6,
  kind = "task.changed",
  agent = "x",
  time = "w",
  data = { task = { id = "k-1", status = "running", title = "one", createdAt = "2026-01-01T00:00:01Z" } },
})
H.eq(
  { "k-2:suggested", "k-1:running" },
  vim.tbl_map(function(t)
    return t.id .. ":" .. t.status
  end, bare:task_list()),
  "tasks, newest first"
)
H.eq(1, #bare:task_list({ suggested = true }), "only the suggested ones")

-- An agent never started is "not started" in the panel; one that ran and stopped is "stopped"
-- (agent.process events carry no count of starts: one that starts has been started).
local agents = Model.new()
agents:set_connection("online")
agents:set_agents({ { name = "demo", process = { state = "stopped", starts = 0 } } })
local panel = require("sessiond.panel")
H.eq({ "demo · not started · 0 sessions" }, panel.lines(agents, 80), "an agent never started")
agents:apply(event("agent.process", nil, { state = "starting" }))
agents:apply(event("agent.process", nil, { state = "running", pid = 42 }))
H.eq({ "demo · running · 0 sessions" }, panel.lines(agents, 80), "a running agent")
agents:apply(event("agent.process", nil, { state = "stopped" }))
H.eq({ "demo · stopped · 0 sessions" }, panel.lines(agents, 80), "an agent that ran and stopped")
agents:set_agents({ { name = "demo", process = { state = "stopped", starts = 2 } } })
H.eq({ "demo · stopped · 0 sessions" }, panel.lines(agents, 80), "stopped, as agent/list says it")

-- `through` moves seq past superseded events.
bare:advance(40)
H.eq(40, bare.seq, "advance")
bare:advance(30)
H.eq(40, bare.seq, "advance never goes back")

H.done("model")
