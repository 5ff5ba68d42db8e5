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

--- How many times the panel was drawn (tests: idle must draw nothing).
M.renders = 0

local function model()
  return require("sessiond").model
end

local on_buffer -- below: the panel's keys and its cursor's moves
local panel = require("sessiond.listwin").new({
  name = NAME,
  filetype = "sessiond-panel",
  item = "session",
  highlight = function(id)
    return HIGHLIGHT[(model():session(id) or {}).status]
  end,
  on_buffer = function(buf)
    on_buffer(buf)
  end,
})

local function pad(text, width)
  local length = vim.fn.strdisplaywidth(text)
  if length > width then
    return vim.fn.strcharpart(text, 0, width - 1) .. "…"
  end
  return text .. string.rep(" ", width - length)
end

-- A session's line: margin, icon, label (id and title), then the columns below where they fit,
-- then its last column (what it asks, does or said). A column as wide as its widest cell, gone
-- when no row has one.
local MARGIN = 4 -- the margin, the icon and the space after it
local LABEL_MIN = 18 -- the label column (indentation and kind included) keeps this much first
local LAST_ROOM = 20 -- what the label column leaves for the last column, at most
-- The columns, and the order they go in when the row is too narrow for all: context first, the
-- status word last (the icon says it too, the last column says why a session needs you or failed).
local COLUMNS = {
  {
    name = "status",
    cell = function(info)
      return ((info.status or "?"):gsub("_", " "))
    end,
  },
  {
    name = "plan",
    cell = function(info)
      local plan = status.plan_progress(info)
      return plan and ("plan " .. plan) or ""
    end,
  },
  {
    name = "context",
    cell = function(info)
      local context = status.context_percent(info)
      return context and (context .. "%") or ""
    end,
  },
  {
    name = "files",
    cell = function(info)
      local files = status.changed_files(info)
      return files and files > 0 and (files .. (files == 1 and " file" or " files")) or ""
    end,
  },
}
local DROPPED_FIRST = { "context", "status", "files", "plan" }

--- A session's label: its id, which commands take, then its title. A side chat's
--- "side of s1" says what the indentation already does.
local function label_of(info, depth)
  local title = info.title
  if depth > 0 and title == ("side of " .. tostring(info.parent)) then
    title = nil
  end
  return title and title ~= "" and (info.id .. " " .. title) or info.id
end

--- The label column's lead: indentation under the parent and the kind of a session that is not main.
local function lead_of(info, depth)
  local kind = depth > 0 and info.kind and info.kind ~= "main" and (info.kind .. " ") or ""
  return string.rep("  ", depth), kind
end

--- A session's last column: its request waiting, else what its turn does or says, else how its
--- last turn ended.
local function last_of(info, m)
  local asks = m and m:pending_permissions(info.id)[1]
  if asks then
    local key = config.options.panel.keys.answer
    return ("asks: %s (%s)"):format(
      asks.toolCall.title or asks.toolCall.kind or "a permission",
      key and (key .. " answers") or ":Sessiond answer"
    )
  end
  -- A turn at work shows the tool call it makes, or what it has said, or its plan's step: not
  -- the last turn's recap.
  local at_work = info.status == "working" or info.status == "needs_you"
  local step = info.plan and info.plan.current and ("(" .. info.plan.current .. ")")
  -- A session found failed says why its last turn failed, not the turn before's recap.
  local failed = info.status == "failed" and info.lastError and ("error: " .. tostring(info.lastError))
  return (at_work and info.acting) or info.lastLine or (at_work and (step or "") or failed or info.recap) or ""
end

--- The panel's rows' layout in a window `width` cells wide: the label column's width and the
--- columns kept, each as wide as its widest cell. The label keeps LABEL_MIN and the last column
--- up to LAST_ROOM before any column is kept; then the label takes what is left, up to its need.
--- @param groups table[] m:by_agent()
function M.layout(groups, m, width)
  local need, last, widths = 0, 0, {}
  for _, group in ipairs(groups) do
    for _, info in ipairs(group.sessions) do
      local depth = group.depth and group.depth[info.id] or 0
      local indent, kind = lead_of(info, depth)
      need = math.max(need, #indent + #kind + vim.fn.strdisplaywidth(label_of(info, depth)))
      last = math.max(last, vim.fn.strdisplaywidth(last_of(info, m)))
      for _, column in ipairs(COLUMNS) do
        widths[column.name] = math.max(widths[column.name] or 0, vim.fn.strdisplaywidth(column.cell(info)))
      end
    end
  end
  local kept, used = {}, 0
  for _, column in ipairs(COLUMNS) do
    if (widths[column.name] or 0) > 0 then
      kept[column.name] = widths[column.name]
      used = used + widths[column.name] + 1
    end
  end
  local floor = MARGIN + LABEL_MIN + 1 + math.min(last, LAST_ROOM)
  for _, name in ipairs(DROPPED_FIRST) do
    if floor + used <= width then
      break
    end
    if kept[name] then
      used = used - kept[name] - 1
      kept[name] = nil
    end
  end
  local room = width - MARGIN - used - 1 - math.min(last, LAST_ROOM)
  return { label = math.max(LABEL_MIN, math.min(need, room)), columns = kept }
end

--- One session's line; a side chat, task or thread (`depth` > 0) is indented under its parent and
--- named by its kind. `layout` is M.layout's (default: this row's own, however wide).
function M.session_line(info, depth, m, layout)
  depth = depth or 0
  layout = layout or M.layout({ { sessions = { info }, depth = { [info.id] = depth } } }, m, math.huge)
  local indent, kind = lead_of(info, depth)
  local cells = { "  " .. indent .. (ICON[info.status] or "?") .. " " .. kind }
  cells[1] = cells[1] .. pad(label_of(info, depth), math.max(layout.label - #indent - #kind, 6))
  for _, column in ipairs(COLUMNS) do
    local column_width = layout.columns[column.name]
    if column_width then
      cells[#cells + 1] = pad(column.cell(info), column_width)
    end
  end
  cells[#cells + 1] = last_of(info, m)
  return table.concat(cells, " ")
end

local function agent_line(group)
  local state = status.process_state(group.agent and group.agent.process) or "stopped"
  local count = #group.sessions
  return ("%s · %s · %d session%s"):format(group.name, state, count, count == 1 and "" or "s")
end

-- The panel takes at most this share of the screen's columns, and never fewer than WIDTH_MIN
-- (unless `panel.width` asks for fewer): a 72-column panel left 7 of an 80-column terminal.
local WIDTH_SHARE = 0.4
local WIDTH_MIN = 30

--- The width the panel's window is given: `panel.width`, within its share of the screen.
function M.fit_width()
  local wanted = config.options.panel.width
  return math.min(wanted, math.max(WIDTH_MIN, math.floor(vim.o.columns * WIDTH_SHARE)))
end

--- The panel's width: its window's when shown, else the one it would be given.
function M.width()
  local win = panel:win()
  return win and vim.api.nvim_win_get_width(win) or M.fit_width()
end

--- The panel's lines, for a window `width` cells wide (default: the panel's), and which line
--- shows which session.
--- @return string[] lines, table<integer, string> line_session
function M.lines(m, width)
  local lines, line_session = {}, {}
  if m.connection ~= "online" then
    lines[1] = m.connection == "connecting" and "Connecting to the sessiond daemon…"
      or "Not connected to the sessiond daemon (:checkhealth sessiond)"
  end
  local groups = m:by_agent()
  local layout = M.layout(groups, m, width or M.width())
  for _, group in ipairs(groups) do
    lines[#lines + 1] = agent_line(group)
    for _, info in ipairs(group.sessions) do
      lines[#lines + 1] = M.session_line(info, group.depth and group.depth[info.id], m, layout)
      line_session[#lines] = info.id
    end
  end
  if #lines == 0 then
    lines[1] = "No agents yet."
  end
  return lines, line_session
end

--- The winbar's text: where the cursor stands among the working sessions.
function M.winbar_text(m, id)
  local index, total = m:working_position(id)
  if index > 0 then
    return ("sessiond · %s · %d of %d working"):format(id, index, total)
  end
  if m.connection ~= "online" then
    return "sessiond · " .. m.connection
  end
  local text = status.format(status.dict(m))
  return "sessiond · " .. text:gsub(" │ .*$", "")
end

local function update_winbar()
  local win = panel:win()
  if win then
    local text = status.escape(M.winbar_text(model(), panel:under_cursor()))
    if vim.wo[win].winbar ~= text then
      vim.wo[win].winbar = text
    end
  end
end

--- Redraw, keeping the cursor on the same session.
function M.render()
  if not panel:valid() then
    return
  end
  M.renders = M.renders + 1
  local lines, line_session = M.lines(model())
  panel:draw(lines, line_session)
  for line, text in ipairs(lines) do
    if not line_session[line] and not text:find("^  ") then
      vim.api.nvim_buf_set_extmark(panel.buf, panel.ns, line - 1, 0, { end_col = #text, hl_group = "SessiondAgent" })
    end
  end
  update_winbar()
end

--- Redraw when visible.
function M.refresh()
  if panel:win() then
    M.render()
  end
end

--- Put the panel's cursor on session `id`; false when the panel is not shown.
function M.reveal(id)
  if not panel:win() then
    return false
  end
  M.render()
  local line = panel.item_line[id]
  if line then
    panel:set_line(line)
  end
  update_winbar()
  return true
end

local function map_keys()
  local actions = require("sessiond.actions")
  local keys = config.options.panel.keys
  panel:map(keys, {
    open = { panel:on_item(actions.open), "open the session's view" },
    send = { panel:on_item(actions.ask_and_send), "send a prompt to the session" },
    cancel = { panel:on_item(actions.cancel), "cancel the session's turns" },
    close = {
      panel:on_item(function(id)
        actions.close(id, { confirm = true })
      end),
      "close the session (asks first when it works)",
    },
    rename = {
      panel:on_item(function(id)
        actions.rename(id)
      end),
      "rename the session (its title to edit)",
    },
    answer = {
      panel:on_item(function(id)
        actions.answer(id, true)
      end),
      "answer the session's permission request",
    },
    merge = { panel:on_item(actions.merge), "merge the worktree session's branch" },
    side = {
      panel:on_item(function(id)
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
        require("sessiond.listwin").show_keys(keys)
      end,
      "show the keys",
    },
  })
end

on_buffer = function(buf)
  vim.api.nvim_create_autocmd("CursorMoved", {
    buffer = buf,
    callback = function()
      -- Only a real change redraws: render() moves the cursor too, and an
      -- unconditional redraw here would loop (render, CursorMoved, render).
      local id = panel:under_cursor()
      if id and model():set_current(id) then
        require("sessiond").changed(id)
      end
      update_winbar()
    end,
  })
  map_keys()
end

--- A split of a given width takes it all from the window beside it (a 72-column panel left
--- 6 of a code window in a 160-column terminal): the others share what is left, as after any
--- split with 'equalalways', and the panel keeps its width ('winfixwidth').
local function share_the_rest()
  if vim.o.equalalways then
    vim.cmd("horizontal wincmd =")
  end
end

--- The screen was resized: the panel takes its share of the new width, and its rows the room.
local function on_vim_resized()
  local win = panel:win()
  if win then
    vim.api.nvim_win_set_width(win, M.fit_width())
    share_the_rest()
    M.render()
  end
end

--- The panel's window was resized (by hand, or with the screen): its rows use the room.
local function on_win_resized()
  local win = panel:win()
  if win and vim.tbl_contains(vim.v.event.windows or {}, win) then
    M.render()
  end
end

local function watch_sizes()
  local group = vim.api.nvim_create_augroup("sessiond.panel", { clear = true })
  vim.api.nvim_create_autocmd("VimResized", { group = group, callback = on_vim_resized })
  vim.api.nvim_create_autocmd("WinResized", { group = group, callback = on_win_resized })
end

--- Open the panel, or go to it.
function M.open()
  local side = config.options.panel.position == "left" and "topleft" or "botright"
  local shown = panel:win() ~= nil
  local win = panel:open(("%s vertical %dsplit"):format(side, M.fit_width()), { winfixwidth = true })
  if not shown then
    share_the_rest()
    watch_sizes()
  end
  M.render()
  local current = model().current
  if current and panel.item_line[current] then
    vim.api.nvim_win_set_cursor(win, { panel.item_line[current], 0 })
    update_winbar()
  end
  return win
end

function M.close()
  panel:close()
end

--- For tests: the panel's buffer, if any.
function M.buffer()
  return panel.buf
end

return M
