--- The tasks list: tasks agents (or people) suggested, newest first, one line
--- each with its status; keys accept one (it runs in a session of its own)
--- or dismiss it with a reason. Kept current by `task.changed` events.

local config = require("sessiond.config")

local M = {}

local NAME = "sessiond://tasks"
local ICON = {
  suggested = "?",
  queued = "…",
  running = "●",
  done = "✓",
  failed = "✗",
  dismissed = "·",
}
local HIGHLIGHT = {
  suggested = "SessiondNeedsYou",
  running = "SessiondWorking",
  failed = "SessiondFailed",
  dismissed = "SessiondThought",
}

local ns = vim.api.nvim_create_namespace("sessiond.tasks")

local list = { buf = nil, line_task = {}, task_line = {} }

local function model()
  return require("sessiond").model
end

--- One task's line.
function M.task_line(task)
  local line = ("%s %-9s %s  %s"):format(ICON[task.status] or "?", task.status or "?", task.id, task.title or "")
  if task.session then
    line = line .. " → " .. task.session
  end
  if task.reason and task.reason ~= "" then
    line = line .. " (" .. task.reason .. ")"
  elseif task.status == "suggested" and task.why and task.why ~= "" then
    line = line .. " · " .. task.why
  end
  return line
end

--- The list's lines, and which line shows which task.
--- @return string[] lines, table<integer, string> line_task
function M.lines(m)
  local lines, line_task = {}, {}
  local tasks = m:task_list()
  local counts = {}
  for _, task in ipairs(tasks) do
    counts[task.status] = (counts[task.status] or 0) + 1
  end
  local summary = {}
  for _, state in ipairs({ "suggested", "queued", "running", "done", "failed", "dismissed" }) do
    if counts[state] then
      summary[#summary + 1] = ("%d %s"):format(counts[state], state)
    end
  end
  if m.connection ~= "online" then
    lines[#lines + 1] = "Not connected to the sessiond daemon (:checkhealth sessiond)"
  end
  if #tasks == 0 then
    lines[#lines + 1] = "No tasks. Agents suggest them as they work (the suggest_task tool)."
    return lines, line_task
  end
  lines[#lines + 1] = "Tasks: " .. table.concat(summary, " · ")
  for _, task in ipairs(tasks) do
    lines[#lines + 1] = M.task_line(task)
    line_task[#lines] = task.id
  end
  return lines, line_task
end

local function list_win()
  if not list.buf or not vim.api.nvim_buf_is_valid(list.buf) then
    return nil
  end
  return vim.fn.win_findbuf(list.buf)[1]
end

local function task_under_cursor()
  local win = list_win()
  if not win then
    return nil
  end
  return list.line_task[vim.api.nvim_win_get_cursor(win)[1]]
end

--- Redraw, keeping the cursor on the same task.
function M.render()
  if not list.buf or not vim.api.nvim_buf_is_valid(list.buf) then
    return
  end
  local keep = task_under_cursor()
  local lines, line_task = M.lines(model())
  vim.bo[list.buf].modifiable = true
  vim.api.nvim_buf_set_lines(list.buf, 0, -1, false, lines)
  vim.bo[list.buf].modifiable = false
  list.line_task, list.task_line = line_task, {}
  vim.api.nvim_buf_clear_namespace(list.buf, ns, 0, -1)
  for line, id in pairs(line_task) do
    list.task_line[id] = line
    local group = HIGHLIGHT[(model().tasks[id] or {}).status]
    if group then
      vim.api.nvim_buf_set_extmark(list.buf, ns, line - 1, 0, { line_hl_group = group })
    end
  end
  local win = list_win()
  if win and keep and list.task_line[keep] then
    vim.api.nvim_win_set_cursor(win, { list.task_line[keep], 0 })
  end
end

--- Redraw when visible.
function M.refresh()
  if list_win() then
    M.render()
  end
end

local function map_keys(buf)
  local actions = require("sessiond.actions")
  local keys = config.options.tasks.keys
  local function on_task(fn)
    return function()
      local id = task_under_cursor()
      if id then
        fn(id)
      else
        vim.notify("sessiond: put the cursor on a task line", vim.log.levels.INFO)
      end
    end
  end
  local bindings = {
    accept = { on_task(actions.accept_task), "accept the task: it runs in a session of its own" },
    dismiss = {
      on_task(function(id)
        actions.dismiss_task(id)
      end),
      "dismiss the task (asks why)",
    },
    open = {
      on_task(function(id)
        local task = model().tasks[id]
        if task and task.session and model():session(task.session) then
          actions.open(task.session)
        elseif task then
          vim.api.nvim_echo({ { ("%s: %s\n%s"):format(task.id, task.title or "", task.prompt or "") } }, false, {})
        end
      end),
      "open the task's session (or show its prompt)",
    },
    refresh = {
      function()
        actions.list_tasks()
      end,
      "read the tasks again",
    },
    quit = { M.close, "close the list" },
    help = {
      function()
        require("sessiond.panel").show_keys(keys)
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
  vim.bo[buf].filetype = "sessiond-tasks"
  map_keys(buf)
  return buf
end

--- Open the tasks list, or go to it.
function M.open()
  if not list.buf or not vim.api.nvim_buf_is_valid(list.buf) then
    list.buf = create_buffer()
  end
  local win = list_win()
  if not win then
    vim.cmd(config.options.tasks.split)
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, list.buf)
    for option, value in pairs({
      number = false,
      relativenumber = false,
      wrap = false,
      cursorline = true,
      signcolumn = "no",
      foldcolumn = "0",
    }) do
      vim.wo[win][option] = value
    end
  end
  vim.api.nvim_set_current_win(win)
  M.render()
  -- The first task line, not the summary.
  local first = next(list.line_task) and math.min(unpack(vim.tbl_keys(list.line_task)))
  if first and vim.api.nvim_win_get_cursor(win)[1] < first then
    vim.api.nvim_win_set_cursor(win, { first, 0 })
  end
  return win
end

function M.close()
  local win = list_win()
  if win and #vim.api.nvim_list_wins() > 1 then
    vim.api.nvim_win_close(win, false)
  end
end

--- For tests: the list's buffer, if any.
function M.buffer()
  return list.buf
end

return M
