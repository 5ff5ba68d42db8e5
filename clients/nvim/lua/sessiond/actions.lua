--- What the user can do, in one place: the commands, the panel's keys and
--- the session view's keys all call these. Every request is asynchronous;
--- failures are reported in one line with the daemon's own sentence.

local config = require("sessiond.config")
local client = require("sessiond.client")

local M = {}

local function notify(message, level)
  vim.notify("sessiond: " .. message, level or vim.log.levels.INFO)
end

local function model()
  return require("sessiond").model
end

local function report(what)
  return function(err)
    if err then
      notify(what .. ": " .. tostring(err.message), vim.log.levels.ERROR)
    end
  end
end

local turn_counter = 0

local function new_turn_id()
  turn_counter = turn_counter + 1
  return ("nvim-%x-%d"):format(vim.uv.hrtime() % 0x100000000, turn_counter)
end

--- The session an action is about: the one given, else the current one.
local function target(session)
  local id = session or model().current
  if not id then
    notify("no current session: open one with :Sessiond new or from :Sessiond panel", vim.log.levels.WARN)
  end
  return id
end

--- Open a session rooted at the working directory.
--- @param opts { placement?: string, agent?: string, root?: string, title?: string, open_view?: boolean }
--- @param callback? fun(info: table)
function M.new(opts, callback)
  opts = opts or {}
  local params = {
    root = opts.root or vim.fn.getcwd(),
    placement = opts.placement,
    agent = opts.agent or config.options.agent,
    title = opts.title,
  }
  client.request("session/open", params, function(err, result)
    if err then
      report("could not open a session")(err)
      return
    end
    local info = result.sessions[1]
    model():set_current(info.id)
    require("sessiond").changed(info.id)
    notify(("opened %s (%s, %s) at %s"):format(info.id, info.agent, info.placement, info.root))
    if opts.open_view ~= false then
      require("sessiond.view").show(info.id)
    end
    if callback then
      callback(info)
    end
  end)
end

--- Send a prompt to `session` (default: the current one; none: a new one).
--- @param callback? fun(err: table|nil, result: table|nil)
function M.send(text, session, callback)
  if not text or not text:find("%S") then
    notify("nothing to send: give a prompt (:Sessiond send {text}) or select lines", vim.log.levels.WARN)
    return
  end
  local id = session or model().current
  if not id then
    M.new({ open_view = true }, function(info)
      M.send(text, info.id, callback)
    end)
    return
  end
  local turn = new_turn_id()
  client.request("session/prompt", { session = id, prompt = text, turnId = turn }, function(err, result)
    if err and err.code == client.NOT_CONNECTED then
      notify(
        ("lost the daemon during the turn in %s; the turn is the daemon's, and shows here once reconnected"):format(id),
        vim.log.levels.WARN
      )
    elseif err then
      report(("the turn in %s failed"):format(id))(err)
    end
    if callback then
      callback(err, result)
    end
  end)
  return turn
end

--- Ask for a prompt with vim.ui.input, then send it.
function M.ask_and_send(session)
  local id = target(session)
  if not id then
    return
  end
  vim.ui.input({ prompt = ("sessiond %s> "):format(id) }, function(text)
    if text and text:find("%S") then
      M.send(text, id)
    end
  end)
end

function M.cancel(session)
  local id = target(session)
  if id then
    client.request("session/cancel", { session = id }, function(err, result)
      if err then
        report("could not cancel " .. id)(err)
      elseif result.cancelled == 0 then
        notify(id .. " had no running or queued turn")
      end
    end)
  end
end

function M.close(session)
  local id = target(session)
  if id then
    client.request("session/close", { session = id }, report("could not close " .. id))
  end
end

--- Make `id` current and show it: in the panel when it is open, else in a view.
function M.focus(id)
  model():set_current(id)
  require("sessiond").changed(id)
  if not require("sessiond.panel").reveal(id) then
    require("sessiond.view").show(id)
  end
end

--- Step to the next (dir = 1) or previous (dir = -1) working session.
function M.step(dir)
  local m = model()
  local id, index, total = m:step(m.current, dir)
  if not id then
    notify("no session is working now")
    return
  end
  M.focus(id)
  vim.api.nvim_echo({ { ("sessiond: %s, %d of %d working"):format(id, index, total) } }, false, {})
end

--- Sessions whose merge this editor asked for: it tells how they end.
local merges_asked = {}

local MERGE_ENDS = { merged = true, failed = true, cancelled = true }

--- Queue a worktree session's branch to merge into its base.
function M.merge(session)
  local id = target(session)
  if not id then
    return
  end
  client.request("session/get", { session = id }, function(err, info)
    if err then
      report("could not merge " .. id)(err)
      return
    end
    if info.placement ~= "worktree" then
      notify(
        ("%s works %s, not in a worktree: there is no branch to merge"):format(id, info.placement),
        vim.log.levels.WARN
      )
      return
    end
    client.request("merge/request", { session = id }, function(merge_err, entry)
      if merge_err then
        report("could not merge " .. id)(merge_err)
        return
      end
      merges_asked[id] = true
      notify(("%s: merge of %s into %s %s"):format(id, entry.branch, entry.base, entry.status))
    end)
  end)
end

--- A `merge.step` event: say how a merge asked for here ended.
function M.on_merge_step(event)
  local data = event.data or {}
  if not merges_asked[event.session] or not MERGE_ENDS[data.step] then
    return
  end
  merges_asked[event.session] = nil
  if data.step == "merged" then
    notify(
      ("%s: merged %s%s"):format(
        event.session,
        data.branch or "",
        data.commit and (" (" .. data.commit:sub(1, 12) .. ")") or ""
      )
    )
  else
    local conflicts = type(data.conflicts) == "table"
        and #data.conflicts > 0
        and ("; conflicts: " .. table.concat(data.conflicts, ", "))
      or ""
    notify(
      ("%s: merge %s: %s%s"):format(event.session, data.step, tostring(data.reason or "see :Sessiond open"), conflicts),
      vim.log.levels.WARN
    )
  end
end

-- ------------------------------------------------------------------ side chats

--- Side chats asked from here and not yet seen opening: parent id -> list of
--- { session = nil | id }. The `session.opened` event of a side chat (it comes
--- before the answer) shows its view at once, so the answer streams into it.
local sides_asked = {}

local function show_side(id, parent)
  if model():session(id) then
    model():set_current(id)
    require("sessiond").changed(id)
    require("sessiond.view").show(id, { beside = parent })
  end
end

--- Ask `question` in a side chat beside `session` (default: the current one):
--- a session of its own that starts from the main session's context and
--- leaves the main session untouched. Its view shows the answer.
--- @param callback? fun(err: table|nil, result: table|nil) with the SideResult
function M.side(question, session, callback)
  local id = target(session)
  if not id then
    return
  end
  if not question or not question:find("%S") then
    vim.ui.input({ prompt = ("sessiond side chat beside %s> "):format(id) }, function(text)
      if text and text:find("%S") then
        M.side(text, id, callback)
      end
    end)
    return
  end
  local asked = { parent = id }
  sides_asked[id] = sides_asked[id] or {}
  table.insert(sides_asked[id], asked)
  notify(("asking beside %s…"):format(id))
  client.request("session/side", { session = id, question = question }, function(err, result)
    local waiting = sides_asked[id] or {}
    for i, other in ipairs(waiting) do
      if other == asked then
        table.remove(waiting, i)
        break
      end
    end
    if err then
      report(("the side chat beside %s failed"):format(id))(err)
    elseif result and result.session and asked.session ~= result.session.id then
      show_side(result.session.id, id)
    end
    if callback then
      callback(err, result)
    end
  end)
end

--- A `session.opened` event: the side chat asked from here shows at once.
function M.on_session_opened(event)
  local data = event.data or {}
  local waiting = data.sessionKind == "side" and data.parent and sides_asked[data.parent]
  if not waiting then
    return
  end
  for _, asked in ipairs(waiting) do
    if not asked.session then
      asked.session = event.session
      vim.schedule(function()
        show_side(event.session, data.parent)
      end)
      return
    end
  end
end

-- ------------------------------------------------------------------ tasks

--- Re-read the tasks (task/list); `task.changed` events keep them current after.
function M.list_tasks(callback)
  client.request("task/list", {}, function(err, result)
    if not err and result then
      model():set_tasks(result.tasks or {})
      require("sessiond").changed(nil)
    end
    if callback then
      callback(err, result)
    end
  end)
end

--- Accept suggested task `id`: it runs in a session of its own.
--- @param callback? fun(err: table|nil, task: table|nil)
function M.accept_task(id, callback)
  if not id or id == "" then
    notify("which task? :Sessiond tasks accept {task}", vim.log.levels.WARN)
    return
  end
  client.request("task/accept", { task = id }, function(err, task)
    if err then
      report("could not accept " .. id)(err)
    else
      notify(("accepted %s (%s): %s"):format(id, task.title or "", task.status or "?"))
    end
    if callback then
      callback(err, task)
    end
  end)
end

--- Dismiss suggested task `id` with `reason` (asked with vim.ui.input when not given).
--- @param callback? fun(err: table|nil, task: table|nil)
function M.dismiss_task(id, reason, callback)
  if not id or id == "" then
    notify("which task? :Sessiond tasks dismiss {task} {reason}", vim.log.levels.WARN)
    return
  end
  if not reason or not reason:find("%S") then
    vim.ui.input({ prompt = ("sessiond dismiss %s, why? "):format(id) }, function(text)
      if text and text:find("%S") then
        M.dismiss_task(id, text, callback)
      end
    end)
    return
  end
  client.request("task/dismiss", { task = id, reason = vim.trim(reason) }, function(err, task)
    if err then
      report("could not dismiss " .. id)(err)
    else
      notify(("dismissed %s (%s)"):format(id, task.title or ""))
    end
    if callback then
      callback(err, task)
    end
  end)
end

-- ------------------------------------------------------------------ the daemon

local function plural(count, one, many)
  return ("%d %s"):format(count, count == 1 and one or many)
end

--- What went wrong with a restart, and what to do, by how far it got (client.restart).
local function restart_failure(err)
  local stage = err.stage
  if stage == "busy" then
    return err.message .. "; wait for it to finish"
  elseif stage == "connect" then
    return "cannot restart the daemon: not connected to it. Run :Sessiond connect (it starts a daemon when none runs)"
  elseif stage == "cmd" then
    local why = ("%s, so no new daemon could be started"):format(err.message)
    return "cannot restart the daemon: " .. why .. "; it was left running (see :help sessiond-option-cmd)"
  elseif stage == "stop" and err.code == client.NOT_CONNECTED then
    return "the connection was lost before the daemon answered daemon/stop, so it may not have stopped. "
      .. "Run :Sessiond connect (it starts a daemon when none runs)"
  elseif stage == "stop" then
    local kill = err.pid and ("kill %d"):format(err.pid) or "kill it; :checkhealth sessiond tells its pid"
    return ("the daemon did not stop: %s. It still runs; stop it from a shell (%s), then run :Sessiond connect"):format(
      err.message,
      kill
    )
  end
  return ("stopped the daemon%s, but no new one came up (%s). Run :Sessiond connect to try again"):format(
    err.pid and (" (pid %d)"):format(err.pid) or "",
    err.message
  )
end

--- Stop the daemon and start a fresh one (running turns end cancelled); the
--- plugin reconnects and resyncs as after any restart.
--- @param callback? fun(err: table|nil, restarted: { old_pid: integer, new_pid: integer|nil, cancelled: integer }|nil)
function M.restart(callback)
  client.restart(function(err, restarted)
    if err then
      notify(restart_failure(err), err.stage == "busy" and vim.log.levels.WARN or vim.log.levels.ERROR)
    else
      local cancelled = plural(restarted.cancelled, "running or queued turn was", "running or queued turns were")
      local turns = restarted.cancelled > 0 and ("; %s cancelled"):format(cancelled) or ""
      notify(
        ("restarted the daemon (pid %d → %s)%s"):format(restarted.old_pid, tostring(restarted.new_pid or "?"), turns)
      )
    end
    if callback then
      callback(err, restarted)
    end
  end)
end

function M.answer(session)
  require("sessiond.permission").answer_next(session or model().current)
end

function M.open(id)
  if not model():session(id) then
    notify(("no open session %s"):format(tostring(id)), vim.log.levels.WARN)
    return
  end
  model():set_current(id)
  require("sessiond").changed(id)
  require("sessiond.view").show(id)
end

return M
