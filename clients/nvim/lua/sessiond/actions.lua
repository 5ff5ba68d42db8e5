--- What the user can do, in one place: the commands, the panel's keys and
--- the session view's keys all call these. Every request is asynchronous;
--- failures are reported in one line with the daemon's own sentence.

local config = require("sessiond.config")
local client = require("sessiond.client")

local M = {}

local notify = require("sessiond.notify").notify

local function model()
  return require("sessiond").model
end

local function status_name(info)
  return require("sessiond.status").name(info)
end

local function status_escape(text)
  return require("sessiond.status").escape(text)
end

--- The daemon's sentences name its methods and shell commands for every
--- client ("list sessions with session/list (`sessiond ls --all`)"): say what to do
--- here instead.
local HINTS = {
  { "; list sessions with session/list %(`sessiond ls %-%-all`%)", "; :Sessiond panel lists the open sessions" },
  { "; list them with task/list %(`sessiond tasks`%)", "; :Sessiond tasks lists them" },
  { "; list runs with run/list %(`sessiond runs`%)", "" },
  {
    "; reopen it with session/reopen %(`sessiond reopen ([^`]+)`%), or open a new one with session/open %(`sessiond new`%)",
    "; reopen it with :Sessiond reopen %1, or open a new one with :Sessiond new",
  },
  { ", or create it with agent/create", "" },
  { "; change it with agent/update", "" },
  { "raise it with agent/update", "raise it in the agent's settings" },
}

--- A daemon error message as this editor's user should read it.
function M.humane(message)
  message = tostring(message)
  for _, hint in ipairs(HINTS) do
    message = message:gsub(hint[1], hint[2])
  end
  -- Any other "with some/method" or "(`sessiond ...`)" hint is for other clients.
  message = message:gsub(";? ?[%w ]* with [%l_]+/[%a_]+ ?%(`sessiond [^`]*`%)", "")
  message = message:gsub(" ?%(`sessiond [^`]*`%)", "")
  return message
end

local function report(what)
  return function(err)
    if err then
      notify(what .. ": " .. M.humane(err.message), vim.log.levels.ERROR)
    end
  end
end

local turn_counter = 0

local function new_turn_id()
  turn_counter = turn_counter + 1
  return ("nvim-%x-%d"):format(vim.uv.hrtime() % 0x100000000, turn_counter)
end

--- The session an action is about: the one given, else the current one.
--- Ask with vim.ui.input; `then_` hears an answer with words in it (blanks or <Esc>: nothing).
local function ask_words(opts, then_)
  vim.ui.input(opts, function(text)
    if text and text:find("%S") then
      then_(text)
    end
  end)
end

--- A request answered with a SessionInfo: the model takes it, then `then_(info)`; a failure is
--- reported as `failed`. `callback` hears the answer either way.
local function session_call(method, params, failed, then_, callback)
  client.request(method, params, function(err, result)
    if err then
      report(failed)(err)
    elseif result then
      model():merge_sessions({ result })
      then_(result)
    end
    if callback then
      callback(err, result)
    end
  end)
end

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

-- ------------------------------------------------------------------ prompts

local CONNECT_HINT = "Run :Sessiond connect (it starts a daemon when none runs)"

--- Prompts sent whose turn the daemon has not queued yet: turn id -> session id.
local sending = {}

--- A `turn.queued` event: a prompt sent from here was taken, so say where it went.
function M.on_turn_queued(event)
  local id = event.turn and sending[event.turn]
  if id then
    sending[event.turn] = nil
    notify(("sent to %s"):format(id))
  end
end

--- Nothing was sent (to `id`, when known): not connected.
local function say_not_connected(id)
  notify(
    ("not connected to the sessiond daemon: nothing sent%s. %s"):format(id and (" to " .. id) or "", CONNECT_HINT),
    vim.log.levels.WARN
  )
end

--- Why a prompt sent from here did not become a turn in `id`, or how its turn ended badly.
local function report_send_error(id, err)
  if err.taken and err.code == client.NOT_CONNECTED then
    notify(
      ("lost the daemon during the turn in %s; the turn is the daemon's, and shows here once reconnected"):format(id),
      vim.log.levels.WARN
    )
  elseif err.taken then
    report(("the turn in %s failed"):format(id))(err)
  elseif err.unsent then
    say_not_connected(id)
  elseif err.code == client.NOT_CONNECTED then
    notify(
      ("lost the daemon before %s took the prompt; once reconnected, its view shows whether it did"):format(id),
      vim.log.levels.WARN
    )
  else
    report("nothing sent to " .. id)(err)
  end
end

--- Send a prompt to `session` (default: the current one; none: a new one). Says "sent to sN"
--- once the daemon took it (its `turn.queued`), and refuses at once when not connected.
--- An error given to `callback` has `taken`: whether the daemon queued the turn.
--- @param callback? fun(err: table|nil, result: table|nil)
function M.send(text, session, callback)
  if not text or not text:find("%S") then
    notify("nothing to send: give a prompt (:Sessiond send {text}) or select lines", vim.log.levels.WARN)
    return
  end
  local id = session or model().current
  if not client.connected() then
    say_not_connected(id)
    if callback then
      vim.schedule(function()
        callback({ code = client.NOT_CONNECTED, message = "not connected to the sessiond daemon", unsent = true })
      end)
    end
    return
  end
  if not id then
    M.new({ open_view = true }, function(info)
      M.send(text, info.id, callback)
    end)
    return
  end
  local turn = new_turn_id()
  sending[turn] = id
  client.request("session/prompt", { session = id, prompt = text, turnId = turn }, function(err, result)
    local taken = sending[turn] == nil
    sending[turn] = nil
    if err then
      err.taken = taken
      report_send_error(id, err)
    elseif not taken then
      notify(("sent to %s"):format(id)) -- its turn.queued never came (a resync skipped it)
    end
    if callback then
      callback(err, result)
    end
  end)
  return turn
end

--- A session a prompt cannot be written for: one that is closed (the model drops those).
local function refuse_closed(id)
  if client.connected() and not model():session(id) then
    notify(("%s is closed: reopen it with :Sessiond reopen %s, then send"):format(id, id), vim.log.levels.WARN)
    return true
  end
  return false
end

--- Ask for a prompt, then send it: in a compose buffer (the default; `compose`
--- option), or on one line with vim.ui.input.
function M.ask_and_send(session)
  local id = target(session)
  if not id or refuse_closed(id) then
    return
  end
  if config.options.compose == "buffer" then
    M.compose(id)
    return
  end
  vim.ui.input({ prompt = ("sessiond %s> "):format(id) }, function(text)
    if text and text:find("%S") then
      M.send(text, id)
    end
  end)
end

local function compose_name(id)
  return "sessiond://compose/" .. id
end

--- The compose buffer of `id`, if one is open.
local function compose_buffer(id)
  return require("sessiond.view").buffer_named(compose_name(id))
end

--- Why the compose buffer of `id` cannot send now, and what to do first (nil: it can).
local function compose_refusal(id)
  if not client.connected() then
    return "not connected to the sessiond daemon", "run :Sessiond connect (it starts a daemon when none runs)"
  elseif not model():session(id) then
    return id .. " is closed", ("reopen it with :Sessiond reopen %s"):format(id)
  end
end

--- Close the compose buffer's windows (not the last one) and wipe it.
local function close_compose(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if #vim.api.nvim_list_wins() > 1 then
      pcall(vim.api.nvim_win_close, win, true)
    end
  end
  pcall(vim.api.nvim_buf_delete, buf, { force = true })
end

--- When the compose window closes from inside (:w, ZZ, :q!), the cursor goes back to `origin`,
--- the window `s` was pressed in, rather than to whichever window is next to it (in the panel,
--- that would make the row under its cursor current).
local function return_focus_on_close(win, buf, origin)
  vim.api.nvim_create_autocmd("WinClosed", {
    pattern = tostring(win),
    once = true,
    callback = function()
      if vim.api.nvim_get_current_win() == win and vim.api.nvim_win_get_buf(win) == buf then
        vim.schedule(function()
          if vim.api.nvim_win_is_valid(origin) then
            vim.api.nvim_set_current_win(origin)
          end
        end)
      end
    end,
  })
end

--- `:w` in the compose buffer of `id`: send what it holds and close it. When it cannot go now
--- (not connected, the session closed) it stays, modified, to be written again; when the daemon
--- refuses the prompt, it opens again with the text.
local function write_compose(buf, id)
  local prompt = vim.trim(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n"))
  if prompt == "" then
    vim.bo[buf].modified = false
    notify(("nothing sent to %s: the prompt is empty"):format(id))
    vim.schedule(function()
      close_compose(buf)
    end)
    return
  end
  local why, first = compose_refusal(id)
  if why then
    notify(
      ("%s: nothing sent to %s, and the prompt stays here; %s, then :w again"):format(why, id, first),
      vim.log.levels.WARN
    )
    return
  end
  vim.bo[buf].modified = false
  M.send(prompt, id, function(err)
    if err and not err.taken and not compose_buffer(id) then
      M.compose(id, prompt)
    end
  end)
  vim.schedule(function()
    close_compose(buf)
  end)
end

--- A buffer to write a prompt for `session` in, like a commit message: `:w`
--- (or `ZZ`, `:x`) sends what it holds and closes it; an empty buffer, `:q!`
--- or wiping it sends nothing. `text` starts it off. A compose buffer of the
--- session that is open already is gone to, its text kept.
--- @return integer buf
function M.compose(session, text)
  local id = session
  local open = compose_buffer(id)
  local open_win = open and vim.fn.win_findbuf(open)[1]
  if open_win then
    vim.api.nvim_set_current_win(open_win)
    return open
  elseif open then
    pcall(vim.api.nvim_buf_delete, open, { force = true })
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, compose_name(id))
  vim.bo[buf].buftype = "acwrite"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "markdown"
  if text and text ~= "" then
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, "\n", { plain = true }))
  end
  vim.bo[buf].modified = false
  vim.api.nvim_create_autocmd("BufWriteCmd", {
    buffer = buf,
    callback = function()
      write_compose(buf, id)
    end,
  })
  local origin = vim.api.nvim_get_current_win()
  vim.cmd("botright 10split")
  local win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(win, buf)
  return_focus_on_close(win, buf, origin)
  local info = model():session(id)
  vim.wo[win].winbar = status_escape(
    ("sessiond · prompt for %s · :w or ZZ sends · empty or :q! sends nothing"):format(
      info and status_name(info) or id
    )
  )
  if not (text and text ~= "") then
    vim.cmd("startinsert")
  end
  return buf
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

--- Name `session` (default: current) `title`; with none, ask for it (its title to edit). A
--- session opened without a title is named by its first prompt, then by its agent: a name given
--- here is neither's to replace.
function M.rename(session, title, callback)
  local id = target(session)
  if not id then
    return
  end
  if not title or not title:find("%S") then
    local info = model():session(id)
    ask_words({ prompt = ("sessiond rename %s> "):format(id), default = info and info.title or "" }, function(text)
      M.rename(id, text, callback)
    end)
    return
  end
  session_call("session/rename", { session = id, title = title }, "could not rename " .. id, function()
    require("sessiond").changed(id)
  end, callback)
end

local BUSY = { working = true, queued = true, needs_you = true }

--- Close `session`; with `opts.confirm`, a session that works (or waits) is
--- closed only once the user says so: closing cancels its turns.
--- @param opts? { confirm?: boolean }
function M.close(session, opts)
  local id = target(session)
  if not id then
    return
  end
  local info = model():session(id)
  if opts and opts.confirm and info and BUSY[info.status] then
    local question = ("Close %s? It is %s; closing cancels its turns."):format(
      status_name(info),
      (info.status:gsub("_", " "))
    )
    if vim.fn.confirm(question, "&Close\n&Keep it", 2, "Question") ~= 1 then
      notify(("kept %s"):format(id))
      return
    end
  end
  local name = info and status_name(info) or id
  client.request("session/close", { session = id }, function(err)
    if err then
      return report("could not close " .. id)(err)
    end
    -- Said, with the way back: `C` in the panel is one key.
    notify(("closed %s (:Sessiond reopen %s brings it back)"):format(name, id))
  end)
end

--- Open closed session `session` again, as it was, and show it; with none,
--- pick one of those closed last (vim.ui.select).
--- @param callback? fun(err: table|nil, info: table|nil)
function M.reopen(session, callback)
  if not session then
    local params = { status = { "closed" }, includeClosed = true, sort = "activity", limit = 50, brief = true }
    client.request("session/list", params, function(err, result)
      if err then
        return report("could not list the closed sessions")(err)
      end
      local closed = result and result.sessions or {}
      if #closed == 0 then
        return notify("no closed sessions to reopen", vim.log.levels.WARN)
      end
      vim.ui.select(closed, {
        prompt = "Reopen which session?",
        format_item = function(info)
          return ("%s %s"):format(info.id, info.title or info.recap or info.root)
        end,
      }, function(info)
        if info then
          M.reopen(info.id, callback)
        end
      end)
    end)
    return
  end
  session_call("session/reopen", { session = session }, "could not reopen " .. session, function(info)
    notify(("reopened %s: its next prompt goes on where it left off"):format(status_name(info)))
    M.focus(info.id)
  end, callback)
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
    ask_words({ prompt = ("sessiond side chat beside %s> "):format(id) }, function(text)
      M.side(text, id, callback)
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

--- Answer a permission request: with `only`, the request of `session` (a
--- panel row, a view) or none; else that session's, or the oldest of any.
function M.answer(session, only)
  if session and not model():session(session) then
    notify(("there is no open session %s; :Sessiond panel lists them"):format(session), vim.log.levels.WARN)
    return
  end
  require("sessiond.permission").answer_next(session or model().current, only)
end

function M.open(id)
  if not id then
    notify("which session? :Sessiond open {session} (<Tab> completes), or pick one in :Sessiond panel", vim.log.levels.WARN)
    return
  end
  if not model():session(id) then
    notify(("there is no open session %s; :Sessiond panel lists them"):format(id), vim.log.levels.WARN)
    return
  end
  model():set_current(id)
  require("sessiond").changed(id)
  require("sessiond.view").show(id)
end

return M
