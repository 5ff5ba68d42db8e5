--- Permission requests: an agent asks; by default a notification says so and
--- the status line and panel mark the session, and the user answers when
--- ready (`a` in the panel or a view, :Sessiond answer) by picking an option
--- with vim.ui.select (so any picker works), one picker at a time. A request
--- never takes the keyboard by itself; with `permission_prompt = "select"` the
--- picker opens at once, but only when the user is not typing (insert mode,
--- the command line): else once they are back in normal mode.
---
--- A request reaches the plugin twice: as a `session/requestPermission`
--- request from the daemon (when answer_permissions is on) and as a
--- `permission.asked` event. Both lead to one entry per permission id and one
--- question to the user. The answer goes back as the request's response when
--- there is a live request, else through `permission/answer`. A
--- `permission.answered` event (this editor's answer or anyone else's)
--- settles the entry.

local config = require("sessiond.config")
local client = require("sessiond.client")

local M = {}

local REQUEST_CANCELLED = -32800

--- permission id -> { id, session, agent, toolCall, options, requests, offered, done, choice }
local entries = {}
local queue = {} -- ids waiting for the picker
local showing = nil -- id whose picker is open

local notify = require("sessiond.notify").notify

local function model()
  return require("sessiond").model
end

local function ensure(ask)
  local entry = entries[ask.permission or ask.id]
  if not entry then
    entry = { id = ask.permission or ask.id, requests = {} }
    entries[entry.id] = entry
  end
  entry.session = entry.session or ask.session
  entry.agent = entry.agent or ask.agent
  entry.toolCall = entry.toolCall or ask.toolCall or {}
  entry.options = entry.options or ask.options or {}
  return entry
end

local function describe(entry)
  local info = model():session(entry.session)
  local label = info and require("sessiond.status").name(info) or tostring(entry.session)
  local title = entry.toolCall.title or entry.toolCall.kind or "a tool call"
  return label, title
end

--- Resume the coroutines of Neovim's RPC layer that wait for this answer.
local function resume_requests(entry, result, err)
  local requests = entry.requests
  entry.requests = {}
  for _, request in ipairs(requests) do
    -- Always from the main loop, never inside the picker's callback: the
    -- request's coroutine may not have yielded yet.
    vim.schedule(function()
      if coroutine.status(request.co) == "suspended" then
        coroutine.resume(request.co, result, err)
      end
    end)
  end
end

local show_next

--- Answer permission `id` with `option_id` (nil: cancelled).
function M.answer(id, option_id)
  local entry = entries[id]
  if not entry or entry.done then
    notify("that permission request was already answered")
    return
  end
  entry.done = true
  entry.choice = option_id
  local live = vim.tbl_filter(function(request)
    return request.generation == client.state.generation
  end, entry.requests)
  if #live > 0 then
    entry.requests = live
    resume_requests(entry, { optionId = option_id == nil and vim.NIL or option_id })
    return
  end
  client.request(
    "permission/answer",
    { permission = id, optionId = option_id == nil and vim.NIL or option_id },
    function(err)
      if err then
        notify(("could not answer %s: %s"):format(id, err.message), vim.log.levels.WARN)
      end
    end
  )
end

--- Show the picker for permission `id` now.
function M.prompt(id)
  local entry = entries[id]
  if not entry or entry.done then
    return false
  end
  showing = id
  local label, title = describe(entry)
  vim.ui.select(entry.options, {
    prompt = ("sessiond: %s asks: %s"):format(label, title),
    kind = "sessiond.permission",
    format_item = function(option)
      return option.name or option.optionId
    end,
  }, function(choice)
    showing = nil
    if choice then
      M.answer(id, choice.optionId)
    elseif entries[id] and not entries[id].done then
      notify(("%s still needs you; answer with :Sessiond answer"):format(label))
    end
    vim.schedule(show_next)
  end)
  return true
end

local typing = require("sessiond.notify").typing

local waiting_for_normal = false

show_next = function()
  if #queue > 0 and not showing and typing() then
    -- Not now: once back in normal mode.
    if not waiting_for_normal then
      waiting_for_normal = true
      vim.api.nvim_create_autocmd("ModeChanged", {
        pattern = "*:n",
        once = true,
        callback = function()
          waiting_for_normal = false
          vim.schedule(show_next)
        end,
      })
    end
    return
  end
  while not showing and #queue > 0 do
    local id = table.remove(queue, 1)
    if M.prompt(id) then
      return
    end
  end
end

local function offer(entry)
  if entry.offered or entry.done then
    return
  end
  entry.offered = true
  if config.options.permission_prompt == "select" then
    queue[#queue + 1] = entry.id
    vim.schedule(show_next)
  else
    local label, title = describe(entry)
    notify(("%s asks: %s (:Sessiond answer)"):format(label, title), vim.log.levels.WARN)
  end
end

--- `session/requestPermission` from the daemon. Runs in the coroutine Neovim's
--- RPC layer gives server requests, and yields until the user answers.
function M.on_request(params, generation)
  model():asked(params)
  require("sessiond").changed(params.session)
  local entry = ensure(params)
  if entry.done then
    return { optionId = entry.choice == nil and vim.NIL or entry.choice }
  end
  local co, is_main = coroutine.running()
  if not co or is_main then
    offer(entry) -- answered through permission/answer instead
    return nil, { code = REQUEST_CANCELLED, message = "this Neovim answers through permission/answer" }
  end
  entry.requests[#entry.requests + 1] = { co = co, generation = generation }
  offer(entry)
  return coroutine.yield()
end

--- A `permission.asked` event (already in the model).
function M.on_asked(ask)
  offer(ensure(ask))
end

--- A `permission.answered` event: settled, here or elsewhere.
function M.on_answered(id)
  local entry = entries[id]
  if not entry then
    return
  end
  entries[id] = nil
  queue = vim.tbl_filter(function(queued)
    return queued ~= id
  end, queue)
  if not entry.done then
    entry.done = true
    resume_requests(entry, nil, { code = REQUEST_CANCELLED, message = "answered by another client" })
  end
end

--- After a snapshot: forget requests the model no longer knows and no live request holds.
function M.sync(current_model)
  for id, entry in pairs(entries) do
    local live = #vim.tbl_filter(function(request)
      return request.generation == client.state.generation
    end, entry.requests) > 0
    if not current_model.permissions[id] and not live then
      entries[id] = nil
    end
  end
end

--- Requests waiting for an answer here, oldest first; of `session` when given.
function M.pending(session)
  local list = {}
  for _, entry in pairs(entries) do
    if not entry.done and (not session or entry.session == session) then
      list[#list + 1] = entry
    end
  end
  local asked = model().permissions
  table.sort(list, function(a, b)
    local sa, sb = asked[a.id] and asked[a.id].seq or math.huge, asked[b.id] and asked[b.id].seq or math.huge
    if sa ~= sb then
      return sa < sb
    end
    return a.id < b.id
  end)
  return list
end

--- :Sessiond answer: the oldest request of `session` (or any, unless `only`), in the picker.
function M.answer_next(session, only)
  local pending = M.pending(session)
  if #pending == 0 and session and not only then
    pending = M.pending()
  end
  if #pending == 0 then
    notify(only and session and ("%s has no permission request waiting"):format(session) or "no permission request is waiting")
    return
  end
  if showing then
    notify("a permission picker is open already")
    return
  end
  M.prompt(pending[1].id)
end

return M
