--- sessiond for Neovim: the daemon's sessions in the status line, a panel,
--- session views, and commands to drive them. See :help sessiond.
---
--- This module wires the parts together: daemon notifications go into the
--- model (model.lua, no UI); the status line, panel and views are redrawn
--- from the model at most every `refresh_ms`, followed by `User SessiondUpdate`.
---
--- Nothing at the top level may need Neovim 0.10: setup() must be able to
--- refuse politely on older versions.

local M = {}

local MINIMUM = "0.10"

local did_setup = false

--- The one model; other modules read it as require("sessiond").model.
M.model = nil

local function supported()
  return vim.fn.has("nvim-" .. MINIMUM) == 1
end

local function refuse()
  local v = vim.version()
  vim.notify(
    ("sessiond needs Neovim %s or newer; this is %d.%d.%d, so setup() did nothing."):format(
      MINIMUM,
      v.major,
      v.minor,
      v.patch
    ),
    vim.log.levels.WARN
  )
  return false
end

-- ------------------------------------------------------------------ redraws

local refresh = { timer = nil, last = 0, dirty = {}, all = false }

--- g:sessiond_status and g:sessiond_status_dict from the model.
local function publish_status()
  local text, dict = require("sessiond.status").get(M.model)
  vim.g.sessiond_status = text
  vim.g.sessiond_status_dict = dict
  return text, dict
end

local function flush()
  refresh.timer = nil
  refresh.last = vim.uv.now()
  local dirty, all = refresh.dirty, refresh.all
  refresh.dirty, refresh.all = {}, false
  local _, dict = publish_status()
  require("sessiond.panel").refresh()
  require("sessiond.tasks").refresh()
  require("sessiond.view").refresh(not all and dirty or nil)
  vim.api.nvim_exec_autocmds("User", { pattern = "SessiondUpdate", modeline = false, data = dict })
  vim.cmd("redrawstatus!")
end

--- Something changed (in session `id`, in every session with `all`): redraw
--- soon, at once when nothing was redrawn for `refresh_ms`.
function M.changed(id, all)
  if id then
    refresh.dirty[id] = true
  end
  refresh.all = refresh.all or all == true
  if refresh.timer then
    return
  end
  local interval = require("sessiond.config").options.refresh_ms
  local wait = math.max(0, interval - (vim.uv.now() - refresh.last))
  refresh.timer = true
  vim.defer_fn(flush, wait)
end

-- ------------------------------------------------------------------ events

local function on_notify(params)
  local model = M.model
  local view = require("sessiond.view")
  local permission = require("sessiond.permission")
  if params.resync then
    model:reset(params.resync)
    require("sessiond.actions").list_tasks()
    permission.sync(model)
    view.reload_all()
    M.changed(nil, true)
  end
  for _, event in ipairs(params.events or {}) do
    if model:apply(event) then
      view.on_event(event)
      if event.kind == "permission.asked" then
        permission.on_asked(model.permissions[event.data.permission] or event.data)
      elseif event.kind == "permission.answered" then
        permission.on_answered(event.data.permission)
      elseif event.kind == "merge.step" then
        require("sessiond.actions").on_merge_step(event)
      elseif event.kind == "session.opened" then
        require("sessiond.actions").on_session_opened(event)
      elseif event.kind == "turn.queued" then
        require("sessiond.actions").on_turn_queued(event)
      elseif event.kind == "session.changes" then
        require("sessiond.files").check_buffers(model:session(event.session))
      end
      M.changed(event.session)
    end
  end
  model:advance(params.through)
end

local function list_sessions(cursor)
  local client = require("sessiond.client")
  client.request("session/list", { cursor = cursor, limit = 1000, brief = true }, function(err, page)
    if err then
      return
    end
    M.model:merge_sessions(page.sessions or {})
    M.changed(nil, true)
    if page.nextCursor then
      list_sessions(page.nextCursor)
    end
  end)
end

local function on_subscribed(result, params)
  local client = require("sessiond.client")
  if result.snapshot then
    M.model:reset(result.snapshot)
    require("sessiond.permission").sync(M.model)
    require("sessiond.view").reload_all()
  elseif not params.since then
    -- A daemon that sends no snapshot: read the sessions the slow way.
    M.model:advance(result.head)
    list_sessions(nil)
  end
  -- Tasks are not in the snapshot: read them; `task.changed` events keep them current.
  require("sessiond.actions").list_tasks()
  client.request("agent/list", {}, function(err, agents)
    if not err and agents then
      M.model:set_agents(agents.agents or {})
      M.changed(nil)
    end
  end)
  M.model:set_connection("online")
  M.changed(nil, true)
end

-- ------------------------------------------------------------------ public

local function define_highlights()
  for group, link in pairs({
    SessiondUser = "Title",
    SessiondThought = "Comment",
    SessiondTool = "Special",
    SessiondAgent = "Title",
    SessiondWorking = "DiagnosticInfo",
    SessiondNeedsYou = "DiagnosticWarn",
    SessiondFailed = "DiagnosticError",
  }) do
    vim.api.nvim_set_hl(0, group, { link = link, default = true })
  end
end

--- `:help sessiond` needs doc/tags, which a plain 'runtimepath' install lacks:
--- make it next to the doc when that folder is writable, else in a copy of the
--- doc under stdpath("cache") that is put on 'runtimepath'. Cheap when fresh.
local function ensure_helptags()
  local source = debug.getinfo(1, "S").source:gsub("^@", "")
  local root = vim.fn.fnamemodify(source, ":p:h:h:h")
  local doc = root .. "/doc/sessiond.txt"
  local doc_stat = vim.uv.fs_stat(doc)
  if not doc_stat then
    return
  end
  local function fresh(dir)
    local tags = vim.uv.fs_stat(dir .. "/tags")
    return tags and tags.mtime.sec >= doc_stat.mtime.sec
  end
  if fresh(root .. "/doc") or #vim.api.nvim_get_runtime_file("doc/sessiond.txt", true) == 0 then
    return
  end
  if vim.fn.filewritable(root .. "/doc") == 2 and pcall(vim.cmd.helptags, vim.fn.fnameescape(root .. "/doc")) then
    return
  end
  local copy = vim.fn.stdpath("cache") .. "/sessiond"
  if not fresh(copy .. "/doc") then
    vim.fn.mkdir(copy .. "/doc", "p")
    vim.fn.writefile(vim.fn.readfile(doc), copy .. "/doc/sessiond.txt")
    pcall(vim.cmd.helptags, vim.fn.fnameescape(copy .. "/doc"))
  end
  if not vim.tbl_contains(vim.opt.runtimepath:get(), copy) then
    vim.opt.runtimepath:append(copy)
  end
end

local function connection_settings(options)
  return vim.inspect({ options.socket, options.cmd, options.answer_permissions, options.progress })
end

--- Start: read the options, connect to the daemon, keep the model current.
--- Safe to call again (new options apply; the connection is remade only
--- when connection options changed). Returns false on Neovim < 0.10.
--- @param opts table|nil see :help sessiond-options
function M.setup(opts)
  if not supported() then
    return refuse()
  end
  local config = require("sessiond.config")
  local client = require("sessiond.client")
  local before = did_setup and connection_settings(config.options) or nil
  config.apply(opts)
  if not M.model then
    M.model = require("sessiond.model").new()
  end
  define_highlights()
  pcall(ensure_helptags)
  local group = vim.api.nvim_create_augroup("sessiond", { clear = true })
  vim.api.nvim_create_autocmd("VimLeavePre", { group = group, callback = client.on_vim_leave })
  vim.api.nvim_create_autocmd("ColorScheme", { group = group, callback = define_highlights })
  client.set_hooks({
    seq = function()
      return M.model.seq
    end,
    on_state = function(state)
      M.model:set_connection(state)
      M.changed(nil)
    end,
    on_subscribed = on_subscribed,
    on_notify = on_notify,
    on_permission_request = function(params, generation)
      return require("sessiond.permission").on_request(params, generation)
    end,
  })
  if not did_setup then
    did_setup = true
    client.connect({ start = true })
  elseif before ~= connection_settings(config.options) then
    client.state.socket = nil
    client.disconnect(true)
  end
  -- Defined now, before the first redraw: a 'statusline' with %{g:sessiond_status} must not fail.
  publish_status()
  M.changed(nil)
  return true
end

--- Commands work before setup() was called: they set up with the defaults.
function M.ensure_setup()
  if did_setup then
    return true
  end
  return M.setup({})
end

--- The status line text. Cheap: it reads the model, never the daemon.
--- Escaped for a 'statusline' format (lualine, heirline, %!, %{%...%});
--- `{ raw = true }` gives the plain text (also in g:sessiond_status).
--- @param opts { raw?: boolean }|nil
function M.status(opts)
  if not did_setup then
    return ""
  end
  local status = require("sessiond.status")
  local text = status.get(M.model)
  if opts and opts.raw then
    return text
  end
  return status.escape(text)
end

--- The status line's data: connection, open, working, needs_you, session = {...}.
function M.status_dict()
  if not did_setup then
    return {}
  end
  local _, dict = require("sessiond.status").get(M.model)
  return dict
end

return M
