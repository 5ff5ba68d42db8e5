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

local function model()
  return require("sessiond").model
end

local map_keys -- below: the keys act on the list
local list = require("sessiond.listwin").new({
  name = NAME,
  filetype = "sessiond-tasks",
  item = "task",
  highlight = function(id)
    return HIGHLIGHT[(model().tasks[id] or {}).status]
  end,
  on_buffer = function()
    map_keys()
  end,
})

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

--- Redraw, keeping the cursor on the same task.
function M.render()
  if list:valid() then
    list:draw(M.lines(model()))
  end
end

--- Redraw when visible.
function M.refresh()
  if list:win() then
    M.render()
  end
end

map_keys = function()
  local actions = require("sessiond.actions")
  local keys = config.options.tasks.keys
  list:map(keys, {
    accept = { list:on_item(actions.accept_task), "accept the task: it runs in a session of its own" },
    dismiss = {
      list:on_item(function(id)
        actions.dismiss_task(id)
      end),
      "dismiss the task (asks why)",
    },
    open = {
      list:on_item(function(id)
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
        require("sessiond.listwin").show_keys(keys)
      end,
      "show the keys",
    },
  })
end

--- Open the tasks list, or go to it.
function M.open()
  local win = list:open(config.options.tasks.split)
  M.render()
  -- The first task line, not the summary.
  local first = list:first_item_line()
  if first and vim.api.nvim_win_get_cursor(win)[1] < first then
    vim.api.nvim_win_set_cursor(win, { first, 0 })
  end
  return win
end

function M.close()
  list:close()
end

--- For tests: the list's buffer, if any.
function M.buffer()
  return list.buf
end

return M
