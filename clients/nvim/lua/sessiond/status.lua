--- The status line text, computed from the model alone and cached by the
--- model's version: calling it on every redraw costs a table lookup.

local M = {}

local SEPARATOR = " · "

--- A session's short name: its title, else its id.
function M.label(info, width)
  local label = info.title and info.title ~= "" and info.title or info.id
  width = width or 24
  if vim.fn.strchars(label) > width then
    label = vim.fn.strcharpart(label, 0, width - 1) .. "…"
  end
  return label
end

--- A session's name in sentences (a permission request's "who asks", a
--- confirmation): "title (id)" when it has a title, else its id. The same
--- rule as the VS Code extension's, so a request reads alike in both; the
--- title cut as the status line cuts it, leaving the line room for the rest.
function M.name(info)
  if info.title and info.title ~= "" then
    return ("%s (%s)"):format(M.label(info), info.id)
  end
  return info.id
end

function M.plan_progress(info)
  local plan = info.plan
  if type(plan) ~= "table" or not plan.total or plan.total == 0 then
    return nil
  end
  return ("%d/%d"):format(plan.done or 0, plan.total)
end

function M.context_percent(info)
  local context = info.context
  if type(context) ~= "table" then
    return nil
  end
  local percent = context.percent
  if type(percent) ~= "number" and type(context.used) == "number" and (context.size or 0) > 0 then
    percent = 100 * context.used / context.size
  end
  if type(percent) ~= "number" then
    return nil
  end
  return math.floor(percent + 0.5)
end

--- An agent's process state as people say it: "not started" for one stopped that never ran
--- (since the daemon started), else the daemon's word ("stopped", "running").
function M.process_state(process)
  if type(process) ~= "table" or not process.state then
    return nil
  end
  if process.state == "stopped" and (process.starts or 0) == 0 then
    return "not started"
  end
  return process.state
end

function M.changed_files(info)
  local changes = info.changes
  if type(changes) ~= "table" or type(changes.files) ~= "table" then
    return nil
  end
  return #changes.files
end

local function plural(n, one, many)
  return ("%d %s"):format(n, n == 1 and one or many)
end

--- Everything the status line shows, as data (also `g:sessiond_status_dict`).
function M.dict(model)
  local counts = model:counts()
  local dict = {
    connection = model.connection,
    open = counts.open,
    working = counts.working,
    needs_you = counts.needs_you,
  }
  local info = model:session(model.current)
  if info then
    dict.session = {
      id = info.id,
      label = M.label(info),
      status = info.status,
      plan = M.plan_progress(info),
      context = M.context_percent(info),
      files = M.changed_files(info),
    }
  end
  return dict
end

--- The status line text, plain (no statusline escaping).
function M.format(dict)
  if dict.connection ~= "online" then
    return dict.connection == "connecting" and "sessiond: connecting" or "sessiond: offline"
  end
  local parts = {}
  if dict.working > 0 then
    parts[#parts + 1] = dict.working .. " working"
  end
  if dict.needs_you > 0 then
    parts[#parts + 1] = dict.needs_you .. " needs you"
  end
  parts[#parts + 1] = dict.open .. " open"
  local text = table.concat(parts, SEPARATOR)
  local session = dict.session
  if session then
    local details = {}
    if session.plan then
      details[#details + 1] = "plan " .. session.plan
    end
    if session.context then
      details[#details + 1] = ("ctx %d%%"):format(session.context)
    end
    if session.files and session.files > 0 then
      details[#details + 1] = plural(session.files, "file", "files")
    end
    text = text .. " │ " .. session.label
    if #details > 0 then
      text = text .. ": " .. table.concat(details, SEPARATOR)
    end
  end
  return text
end

local cache = { model = nil, version = -1, text = "", dict = {} }

--- The text and dict for `model`, recomputed only when it changed.
--- @return string text, table dict
function M.get(model)
  if cache.model ~= model or cache.version ~= model.version then
    cache.model, cache.version = model, model.version
    cache.dict = M.dict(model)
    cache.text = M.format(cache.dict)
  end
  return cache.text, cache.dict
end

--- Escaped for a 'statusline' format string (lualine, heirline, %!, %{%...%}).
function M.escape(text)
  return (text:gsub("%%", "%%%%"))
end

return M
