--- The panel: agents and their sessions, one line each with status, plan
--- progress, context %, changed files and last line. Its winbar tells where
--- the cursor stands among the working sessions ("3 of 200 working").

local config = require("sessiond.config")
local status = require("sessiond.status")

local M = {}

local NAME = "sessiond://panel"
local ICON = {
  working = "●",
  needs_you = "!",
  queued = "…",
  idle = "○",
  failed = "✗",
  stopped = "■",
  closed = "·",
}
local HIGHLIGHT = {
  working = "SessiondWorking",
  needs_you = "SessiondNeedsYou",
  failed = "SessiondFailed",
}

local ns = vim.api.nvim_create_namespace("sessiond.panel")

local panel = { buf = nil, line_session = {}, session_line = {} }

--- How many times the panel was drawn (tests: idle must draw nothing).
M.renders = 0

local function model()
  return require("sessiond").model
end

local function pad(text, width)
  local length = vim.fn.strdisplaywidth(text)
  if length > width then
    return vim.fn.strcharpart(text, 0, width - 1) .. "…"
  end
  return text .. string.rep(" ", width - length)
end

--- One session's line; a side chat, task or thread (`depth` > 0) is indented
--- under its parent and named by its kind.
function M.session_line(info, depth, m)
  local asks = m and m:pending_permissions(info.id)[1]
  local last = info.lastLine or info.recap or ""
  if asks then
    local key = config.options.panel.keys.answer
    last = ("asks: %s (%s)"):format(
      asks.toolCall.title or asks.toolCall.kind or "a permission",
      key and (key .. " answers") or ":Sessiond answer"
    )
  end
  local plan = status.plan_progress(info)
  local context = status.context_percent(info)
  local files = status.changed_files(info)
  depth = depth or 0
  local indent = string.rep("  ", depth)
  local kind = depth > 0 and info.kind and info.kind ~= "main" and (info.kind .. " ") or ""
  local width = math.max(18 - #indent - #kind, 6)
  local label = status.label(info, width)
  if depth > 0 then
    -- Its id (the title "side of s1" says what the indentation already does).
    local title = info.title ~= ("side of " .. tostring(info.parent)) and info.title or nil
    label = title and title ~= "" and (info.id .. " " .. title) or info.id
  end
  return ("  %s%s %s%s %s %s %s %s %s"):format(
    indent,
    ICON[info.status] or "?",
    kind,
    pad(label, width),
    pad((info.status or "?"):gsub("_", " "), 9),
    pad(plan and ("plan " .. plan) or "", 9),
    pad(context and (context .. "%") or "", 4),
    pad(files and files > 0 and (files .. (files == 1 and " file" or " files")) or "", 8),
    last
  )
end

local function agent_line(group)
  local process = group.agent and group.agent.process
  local state = process and process.state or "stopped"
  local count = #group.sessions
  return ("%s · %s · %d session%s"):format(group.name, state, count, count == 1 and "" or "s")
end

--- The panel's lines, and which line shows which session.
--- @return string[] lines, table<integer, string> line_session
function M.lines(m)
  local lines, line_session = {}, {}
  if m.connection ~= "online" then
    lines[1] = m.connection == "connecting" and "Connecting to the sessiond daemon…"
      or "Not connected to the sessiond daemon (:checkhealth sessiond)"
  end
  for _, group in ipairs(m:by_agent()) do
    lines[#lines + 1] = agent_line(group)
    for _, info in ipairs(group.sessions) do
      lines[#lines + 1] = M.session_line(info, group.depth and group.depth[info.id], m)
      line_session[#lines] = info.id
    end
  end
  if #lines == 0 then
    lines[1] = "No agents yet."
  end
  return lines, line_session
end

local function panel_win()
  if not panel.buf or not vim.api.nvim_buf_is_valid(panel.buf) then
    return nil
  end
  return vim.fn.win_findbuf(panel.buf)[1]
end

local function session_under_cursor()
  local win = panel_win()
  if not win then
    return nil
  end
  return panel.line_session[vim.api.nvim_win_get_cursor(win)[1]]
end

--- The winbar's text: where the cursor stands among the working sessions.
function M.winbar_text(m, id)
  local index, total = m:working_position(id)
  if index > 0 then
    return ("sessiond · %s · %d of %d working"):format(id, index, total)
  end
  local text = status.format(status.dict(m))
  return "sessiond · " .. text:gsub(" │ .*$", "")
end

local function update_winbar()
  local win = panel_win()
  if win then
    local text = status.escape(M.winbar_text(model(), session_under_cursor()))
    if vim.wo[win].winbar ~= text then
      vim.wo[win].winbar = text
    end
  end
end

--- Put the cursor of `win` on `line`, unless it is there already (no CursorMoved for nothing).
local function set_line(win, line)
  if vim.api.nvim_win_get_cursor(win)[1] ~= line then
    vim.api.nvim_win_set_cursor(win, { line, 0 })
  end
end

--- Redraw, keeping the cursor on the same session.
function M.render()
  if not panel.buf or not vim.api.nvim_buf_is_valid(panel.buf) then
    return
  end
  M.renders = M.renders + 1
  local keep = session_under_cursor()
  local lines, line_session = M.lines(model())
  if not vim.deep_equal(lines, vim.api.nvim_buf_get_lines(panel.buf, 0, -1, false)) then
    vim.bo[panel.buf].modifiable = true
    vim.api.nvim_buf_set_lines(panel.buf, 0, -1, false, lines)
    vim.bo[panel.buf].modifiable = false
  end
  panel.line_session = line_session
  panel.session_line = {}
  vim.api.nvim_buf_clear_namespace(panel.buf, ns, 0, -1)
  for line, id in pairs(line_session) do
    panel.session_line[id] = line
    local group = HIGHLIGHT[(model():session(id) or {}).status]
    if group then
      vim.api.nvim_buf_set_extmark(panel.buf, ns, line - 1, 0, { line_hl_group = group })
    end
  end
  for line, text in ipairs(lines) do
    if not line_session[line] and not text:find("^  ") then
      vim.api.nvim_buf_set_extmark(panel.buf, ns, line - 1, 0, { end_col = #text, hl_group = "SessiondAgent" })
    end
  end
  local win = panel_win()
  if win and keep and panel.session_line[keep] then
    set_line(win, panel.session_line[keep])
  end
  update_winbar()
end

--- Redraw when visible.
function M.refresh()
  if panel_win() then
    M.render()
  end
end

--- Put the panel's cursor on session `id`; false when the panel is not shown.
function M.reveal(id)
  local win = panel_win()
  if not win then
    return false
  end
  M.render()
  local line = panel.session_line[id]
  if line then
    set_line(win, line)
  end
  update_winbar()
  return true
end

function M.show_keys(keys)
  local parts = {}
  for action, key in pairs(keys) do
    if key then
      parts[#parts + 1] = key .. " " .. action
    end
  end
  table.sort(parts)
  vim.api.nvim_echo({ { "sessiond keys: " .. table.concat(parts, ", ") } }, false, {})
end

local function map_keys(buf)
  local actions = require("sessiond.actions")
  local keys = config.options.panel.keys
  local function on_session(fn)
    return function()
      local id = session_under_cursor()
      if id then
        fn(id)
      else
        vim.notify("sessiond: put the cursor on a session line", vim.log.levels.INFO)
      end
    end
  end
  local bindings = {
    open = { on_session(actions.open), "open the session's view" },
    send = { on_session(actions.ask_and_send), "send a prompt to the session" },
    cancel = { on_session(actions.cancel), "cancel the session's turns" },
    close = {
      on_session(function(id)
        actions.close(id, { confirm = true })
      end),
      "close the session (asks first when it works)",
    },
    answer = {
      on_session(function(id)
        actions.answer(id, true)
      end),
      "answer the session's permission request",
    },
    merge = { on_session(actions.merge), "merge the worktree session's branch" },
    side = {
      on_session(function(id)
        actions.side(nil, id)
      end),
      "ask a question in a side chat beside the session",
    },
    tasks = {
      function()
        require("sessiond.tasks").open()
      end,
      "the tasks list",
    },
    new = {
      function()
        actions.new({ open_view = false })
      end,
      "open a new session here",
    },
    next = {
      function()
        actions.step(1)
      end,
      "next working session",
    },
    prev = {
      function()
        actions.step(-1)
      end,
      "previous working session",
    },
    quit = { M.close, "close the panel" },
    help = {
      function()
        M.show_keys(keys)
      end,
      "show the keys",
    },
  }
  for action, binding in pairs(bindings) do
    if keys[action] then
      vim.keymap.set("n", keys[action], binding[1], { buffer = buf, nowait = true, desc = "sessiond: " .. binding[2] })
    end
  end
end

local function create_buffer()
  local stale = vim.fn.bufnr(NAME)
  if stale ~= -1 then
    pcall(vim.api.nvim_buf_delete, stale, { force = true })
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, NAME)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "sessiond-panel"
  vim.api.nvim_create_autocmd("CursorMoved", {
    buffer = buf,
    callback = function()
      -- Only a real change redraws: render() moves the cursor too, and an
      -- unconditional redraw here would loop (render, CursorMoved, render).
      local id = session_under_cursor()
      if id and model():set_current(id) then
        require("sessiond").changed(id)
      end
      update_winbar()
    end,
  })
  map_keys(buf)
  return buf
end

--- Open the panel, or go to it.
function M.open()
  if not panel.buf or not vim.api.nvim_buf_is_valid(panel.buf) then
    panel.buf = create_buffer()
  end
  local win = panel_win()
  if not win then
    local side = config.options.panel.position == "left" and "topleft" or "botright"
    vim.cmd(("%s vertical %dsplit"):format(side, config.options.panel.width))
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, panel.buf)
    for option, value in pairs({
      number = false,
      relativenumber = false,
      wrap = false,
      cursorline = true,
      winfixwidth = true,
      signcolumn = "no",
      foldcolumn = "0",
    }) do
      vim.wo[win][option] = value
    end
  end
  vim.api.nvim_set_current_win(win)
  M.render()
  local current = model().current
  if current and panel.session_line[current] then
    vim.api.nvim_win_set_cursor(win, { panel.session_line[current], 0 })
    update_winbar()
  end
  return win
end

function M.close()
  local win = panel_win()
  if win and #vim.api.nvim_list_wins() > 1 then
    vim.api.nvim_win_close(win, false)
  end
end

--- For tests: the panel's buffer, if any.
function M.buffer()
  return panel.buf
end

return M
