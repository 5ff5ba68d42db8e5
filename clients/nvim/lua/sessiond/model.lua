--- What the plugin knows about the daemon: sessions, agents, the fleet,
--- pending permission requests, suggested tasks. Pure data: no editor API, no I/O, so tests
--- drive it with plain tables. What the daemon says changes it: `apply` (an
--- event), `reset` (a snapshot), `merge_sessions`, `set_agents` and `set_tasks` (answers);
--- besides that only the connection state and the user's current session.
---
--- Sessions are kept in their wire shape (SessionInfo, camelCase fields).

local M = {}

local Model = {}
Model.__index = Model

--- @return table
function M.new()
  return setmetatable({
    seq = 0, -- every event up to this one has been applied
    version = 0, -- bumped on every change, for caches
    sessions = {}, -- id -> SessionInfo
    agents = {}, -- name -> AgentInfo (or a stub with only a name)
    agent_order = {}, -- names, in the daemon's order
    fleet = nil, -- Fleet from the daemon, when it sends one
    permissions = {}, -- permission id -> { id, session, agent, turn, toolCall, options, seq }
    tasks = {}, -- task id -> TaskInfo (suggested tasks and what became of them)
    current = nil, -- the session the user works with (status line, :Sessiond send)
    connection = "offline", -- offline | connecting | online
    _order = nil, -- cached ids sorted by creation
  }, Model)
end

local function bump(self)
  self.version = self.version + 1
end

--- Ids in creation order; the tie-break keeps s2 before s10.
local function created_before(a, b)
  if (a.createdAt or "") ~= (b.createdAt or "") then
    return (a.createdAt or "") < (b.createdAt or "")
  end
  if #a.id ~= #b.id then
    return #a.id < #b.id
  end
  return a.id < b.id
end

local function add_agent_name(self, name)
  if name and not self.agents[name] then
    self.agents[name] = { name = name }
    self.agent_order[#self.agent_order + 1] = name
  end
end

local function put_session(self, info)
  if info.status == "closed" then
    self.sessions[info.id] = nil
  else
    info.attention = info.attention or {}
    self.sessions[info.id] = info
    add_agent_name(self, info.agent)
  end
  self._order = nil
end

--- Replace everything with a snapshot ({ head, sessions, fleet }).
function Model:reset(snapshot)
  self.sessions = {}
  self._order = nil
  for _, info in ipairs(snapshot.sessions or {}) do
    put_session(self, info)
  end
  self.fleet = snapshot.fleet
  self.seq = snapshot.head or self.seq
  self:_drop_stale_permissions()
  if self.current and not self.sessions[self.current] then
    self.current = nil
  end
  bump(self)
end

--- Sessions from a listing (a daemon without snapshots); newer than the events before it.
function Model:merge_sessions(list)
  for _, info in ipairs(list) do
    put_session(self, info)
  end
  bump(self)
end

--- Agents from agent/list, in the daemon's order.
function Model:set_agents(list)
  local agents, order = {}, {}
  for _, info in ipairs(list) do
    agents[info.name] = info
    order[#order + 1] = info.name
  end
  for _, name in ipairs(self.agent_order) do
    if not agents[name] and self:_agent_has_sessions(name) then
      agents[name] = self.agents[name]
      order[#order + 1] = name
    end
  end
  self.agents, self.agent_order = agents, order
  bump(self)
end

--- Tasks from task/list: every task the daemon has (it sends all of them).
function Model:set_tasks(list)
  local tasks = {}
  for _, task in ipairs(list) do
    tasks[task.id] = task
  end
  self.tasks = tasks
  bump(self)
end

function Model:_agent_has_sessions(name)
  for _, info in pairs(self.sessions) do
    if info.agent == name then
      return true
    end
  end
  return false
end

--- Requests of sessions that no longer wait (for `session`, asked before `before`; else all).
function Model:_drop_stale_permissions(session, before)
  for id, ask in pairs(self.permissions) do
    local info = self.sessions[ask.session]
    local waits = info and info.status == "needs_you"
    local concerned = not session or (ask.session == session and (ask.seq or 0) < before)
    if concerned and not waits then
      self.permissions[id] = nil
    end
  end
end

--- A permission request waits: told by its `permission.asked` event (`seq`), or by the daemon
--- asking this client (`session/requestPermission`), as it asks a newcomer those that waited
--- before it came, whose events its snapshot does not replay.
function Model:asked(ask, seq)
  local known = self.permissions[ask.permission]
  self.permissions[ask.permission] = {
    id = ask.permission,
    session = ask.session,
    agent = ask.agent,
    turn = ask.turn,
    toolCall = ask.toolCall or {},
    options = ask.options or {},
    seq = seq or (known and known.seq),
  }
  bump(self)
end

--- Every matching event up to `seq` has been sent (some superseded).
function Model:advance(seq)
  if type(seq) == "number" and seq > self.seq then
    self.seq = seq
  end
end

function Model:set_connection(state)
  if self.connection ~= state then
    self.connection = state
    bump(self)
  end
end

--- @return boolean changed
function Model:set_current(id)
  if self.current ~= id then
    self.current = id
    bump(self)
    return true
  end
  return false
end

--- The last non-blank line of a reply, kept while it streams.
local function feed_last_line(info, text)
  local partial = (info._partial or "") .. text
  local lines = vim.split(partial, "\n", { plain = true })
  info._partial = lines[#lines]
  for i = #lines, 1, -1 do
    if lines[i]:find("%S") then
      info.lastLine = vim.trim(lines[i])
      break
    end
  end
end

--- A time as ISO 8601 (UTC), as the daemon's records say it: session.status sends its `since` as
--- seconds since the epoch, which the event's own time is not when only the detail changed.
local function iso_time(seconds)
  return type(seconds) == "number" and os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(seconds)) or nil
end

local session_handlers = {
  ["session.status"] = function(info, event)
    info.status = event.data.status
    info.statusSince = iso_time(event.data.since) or event.time
    info.statusDetail = event.data.detail
  end,
  ["session.titled"] = function(info, event)
    info.title = event.data.title or info.title
  end,
  ["turn.queued"] = function(info)
    info.queuedTurns = (info.queuedTurns or 0) + 1
  end,
  ["turn.started"] = function(info, event)
    info.queuedTurns = math.max((info.queuedTurns or 1) - 1, 0)
    info.turn = event.turn
    info._partial = nil
    info.lastLine = nil -- the last turn's line is not this one's
    info.acting = nil
  end,
  ["turn.chunk"] = function(info, event)
    info.acting = nil
    feed_last_line(info, event.data.text or "")
  end,
  -- The tool call a turn makes, shown until it says something after it: "[edit] Write a.py".
  -- Its later updates retitle it (some agents name a call by its tool first: "Terminal").
  ["turn.tool"] = function(info, event)
    local data = event.data
    if data.title and (data.first or (info.acting and info.actingCall == data.toolCallId)) then
      info.acting = ("[%s] %s"):format(data.toolKind or "tool", data.title)
      info.actingCall = data.toolCallId
    end
  end,
  ["turn.ended"] = function(info, event)
    info.turns = (info.turns or 0) + 1
    info.turn = nil
    info._partial = nil
    info.acting = nil
    info.lastStopReason = event.data.stopReason
    info.lastError = event.data.error
    if event.data.error then
      info.lastLine = "error: " .. tostring(event.data.error)
    end
  end,
  ["session.plan"] = function(info, event)
    info.plan = event.data.plan
  end,
  ["session.usage"] = function(info, event)
    if event.data.context then
      info.context = event.data.context
    end
    if event.data.usage then
      info.usage = event.data.usage
    end
  end,
  ["session.changes"] = function(info, event)
    info.changes = event.data.changes
  end,
  ["session.attention"] = function(info, event)
    info.attention = event.data.attention or {}
  end,
  ["merge.step"] = function(info, event)
    info.merge = event.data
  end,
}

--- Apply one event. Events at or below `seq` were seen already and are skipped.
--- @return boolean changed
function Model:apply(event)
  if type(event.seq) == "number" then
    if event.seq <= self.seq then
      return false
    end
    self.seq = event.seq
  end
  local kind, data = event.kind, event.data or {}
  event.data = data
  local info = event.session and self.sessions[event.session]

  if kind == "session.opened" then
    put_session(self, {
      id = event.session,
      agent = event.agent,
      root = data.root,
      placement = data.placement,
      title = data.title,
      kind = data.sessionKind or "main",
      parent = data.parent,
      status = "idle",
      statusSince = event.time,
      createdAt = event.time,
      turns = 0,
      queuedTurns = 0,
    })
  elseif kind == "session.reopened" then
    if type(data.info) == "table" then
      put_session(self, data.info) -- as it was (turns, plan, changes), open again
    end
  elseif kind == "session.closed" then
    self.sessions[event.session] = nil
    self._order = nil
    if self.current == event.session then
      self.current = nil
    end
    self:_drop_stale_permissions(event.session, math.huge)
  elseif kind == "fleet.summary" then
    self.fleet = data
  elseif kind == "permission.asked" then
    self:asked({
      permission = data.permission,
      session = event.session,
      agent = event.agent,
      turn = event.turn,
      toolCall = data.toolCall,
      options = data.options,
    }, event.seq)
  elseif kind == "permission.answered" then
    self.permissions[data.permission] = nil
  elseif kind == "task.changed" then
    if type(data.task) == "table" and data.task.id then
      self.tasks[data.task.id] = data.task
    end
  elseif kind == "agent.created" then
    add_agent_name(self, event.agent)
  elseif kind == "agent.removed" then
    self.agents[event.agent] = nil
    self.agent_order = vim.tbl_filter(function(name)
      return name ~= event.agent
    end, self.agent_order)
  elseif kind == "agent.process" then
    add_agent_name(self, event.agent)
    local agent = self.agents[event.agent]
    local process = vim.tbl_extend("force", agent.process or {}, { state = data.state, pid = data.pid })
    -- The event does not count starts (agent/list does): one that starts has been started.
    if data.state ~= "stopped" then
      process.starts = math.max(process.starts or 0, 1)
    end
    agent.process = process
  elseif info and session_handlers[kind] then
    session_handlers[kind](info, event)
    if kind == "session.status" then
      self:_drop_stale_permissions(info.id, event.seq or math.huge)
    end
  end
  if info then
    info.lastActivity = event.time
  end
  bump(self)
  return true
end

-- ------------------------------------------------------------------ reading

function Model:session(id)
  return id and self.sessions[id] or nil
end

--- Open sessions, oldest first.
--- @return table[] SessionInfo
function Model:ordered()
  if not self._order then
    local list = {}
    for _, info in pairs(self.sessions) do
      list[#list + 1] = info
    end
    table.sort(list, created_before)
    self._order = list
  end
  return self._order
end

--- Counts for the status line, from the sessions themselves: the snapshot
--- holds every open session and events keep them current, so the counts
--- always agree with what the panel lists (the daemon's fleet summary is
--- throttled and is not sent for every change).
--- @return { open: integer, working: integer, needs_you: integer }
function Model:counts()
  local counts = { open = 0, working = 0, needs_you = 0 }
  for _, info in pairs(self.sessions) do
    counts.open = counts.open + 1
    if info.status == "working" then
      counts.working = counts.working + 1
    elseif info.status == "needs_you" then
      counts.needs_you = counts.needs_you + 1
    end
  end
  return counts
end

--- Sessions that are working now, oldest first: the ones "3 of 200" steps through.
function Model:working()
  return vim.tbl_filter(function(info)
    return info.status == "working"
  end, self:ordered())
end

--- The working session after (dir = 1) or before (dir = -1) `from`, wrapping.
--- `from` need not be working: stepping starts from its place in creation order.
--- @return string|nil id, integer index, integer total
function Model:step(from, dir)
  local working = self:working()
  local total = #working
  if total == 0 then
    return nil, 0, 0
  end
  local origin = from and self.sessions[from]
  if not origin then
    local index = dir > 0 and 1 or total
    return working[index].id, index, total
  end
  if dir > 0 then
    for i, info in ipairs(working) do
      if info.id ~= origin.id and created_before(origin, info) then
        return info.id, i, total
      end
    end
    return working[1].id, 1, total
  end
  for i = total, 1, -1 do
    local info = working[i]
    if info.id ~= origin.id and created_before(info, origin) then
      return info.id, i, total
    end
  end
  return working[total].id, total, total
end

--- Where a session stands among the working ones: index (0 when not working), total.
function Model:working_position(id)
  local working = self:working()
  for i, info in ipairs(working) do
    if info.id == id then
      return i, #working
    end
  end
  return 0, #working
end

--- Pending permission requests, oldest first; only those of `session` when given.
function Model:pending_permissions(session)
  local list = {}
  for _, ask in pairs(self.permissions) do
    if not session or ask.session == session then
      list[#list + 1] = ask
    end
  end
  table.sort(list, function(a, b)
    return (a.seq or 0) < (b.seq or 0)
  end)
  return list
end

--- Tasks, newest first; only those whose status is in `statuses` (a set) when given.
--- @return table[] TaskInfo
function Model:task_list(statuses)
  local list = {}
  for _, task in pairs(self.tasks) do
    if not statuses or statuses[task.status] then
      list[#list + 1] = task
    end
  end
  table.sort(list, function(a, b)
    if (a.createdAt or "") ~= (b.createdAt or "") then
      return (a.createdAt or "") > (b.createdAt or "")
    end
    return a.id > b.id
  end)
  return list
end

--- A group's sessions with each one's side chats, tasks and threads right
--- under it (`depth` 1, 2, ...); those whose parent is not in the group stay on top.
local function nest(sessions)
  local present, children, top = {}, {}, {}
  for _, info in ipairs(sessions) do
    present[info.id] = true
  end
  for _, info in ipairs(sessions) do
    if info.parent and present[info.parent] and info.parent ~= info.id then
      children[info.parent] = children[info.parent] or {}
      table.insert(children[info.parent], info)
    else
      top[#top + 1] = info
    end
  end
  local ordered, depth, seen = {}, {}, {}
  local function add(info, level)
    if seen[info.id] then
      return
    end
    seen[info.id] = true
    ordered[#ordered + 1] = info
    depth[info.id] = level
    for _, child in ipairs(children[info.id] or {}) do
      add(child, level + 1)
    end
  end
  for _, info in ipairs(top) do
    add(info, 0)
  end
  for _, info in ipairs(sessions) do -- a cycle of parents: still listed
    add(info, 0)
  end
  return ordered, depth
end

--- Sessions grouped under their agents, agents in the daemon's order; in a
--- group each session is followed by its side chats, tasks and threads
--- (`depth[id]`: 0 for a session of its own, 1 for one of its children, ...).
--- @return { name: string, agent: table, sessions: table[], depth: table<string, integer> }[]
function Model:by_agent()
  local groups, index = {}, {}
  for _, name in ipairs(self.agent_order) do
    groups[#groups + 1] = { name = name, agent = self.agents[name], sessions = {} }
    index[name] = groups[#groups]
  end
  for _, info in ipairs(self:ordered()) do
    local group = index[info.agent]
    if not group then
      group = { name = info.agent, agent = { name = info.agent }, sessions = {} }
      groups[#groups + 1] = group
      index[info.agent] = group
    end
    group.sessions[#group.sessions + 1] = info
  end
  for _, group in ipairs(groups) do
    group.sessions, group.depth = nest(group.sessions)
  end
  return groups
end

return M
