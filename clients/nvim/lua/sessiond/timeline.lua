--- :Sessiond timeline [run]: write a run's timeline as one HTML page (the
--- `sessiond` CLI draws it from the event log) and open it with vim.ui.open().
---
--- Which run: the one named; else the current session's run; else the newest
--- run still going; else not a run but the last hour of the log.

local client = require("sessiond.client")
local config = require("sessiond.config")

local M = {}

--- How long "the last hour" is, as `sessiond trace --last` reads it.
M.LAST = "1h"

local notify = require("sessiond.notify").notify

--- The `sessiond` command line: `cmd` without its trailing "stdio" (so a
--- configured `{ "python", "-m", "sessiond.client", "stdio" }` works too).
function M.cli()
  local cmd = config.options.cmd or { "sessiond", "stdio" }
  if #cmd > 1 and cmd[#cmd] == "stdio" then
    return vim.list_slice(cmd, 1, #cmd - 1)
  end
  return { "sessiond" }
end

--- Where the page of `name` (a run id, or "last-hour") is written.
function M.path(name)
  return ("%s/sessiond/timeline-%s.html"):format(vim.fn.stdpath("cache"), name:gsub("[^%w%-_.]", "_"))
end

--- The argv that writes the page of `run` (nil: the last hour) to `path`.
function M.argv(run, path)
  local argv = vim.list_extend(M.cli(), { "--socket", client.socket() })
  if run then
    vim.list_extend(argv, { "runs", run, "--html", path })
  else
    vim.list_extend(argv, { "trace", "--last", M.LAST, "--html", path })
  end
  return argv
end

--- The run to draw when none is named: the current session's, else the newest still going.
local function choose(callback)
  local ok, sessiond = pcall(require, "sessiond")
  local model = ok and sessiond.model or nil
  local current = model and model.current and model.sessions[model.current]
  if current and current.run then
    callback(current.run)
    return
  end
  client.request("run/list", {}, function(err, result)
    if err then
      callback(nil, err)
      return
    end
    local runs = result and result.runs or {}
    for i = #runs, 1, -1 do
      if runs[i].outcome == nil or runs[i].outcome == vim.NIL then
        callback(runs[i].id)
        return
      end
    end
    callback(nil)
  end)
end

--- Write the page and open it.
--- @param run string|nil a run id; nil: the current run, or the last hour
--- @param callback? fun(err: string|nil, path: string|nil)
function M.open(run, callback)
  callback = callback or function() end
  local function write(chosen)
    local path = M.path(chosen or "last-hour")
    vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
    local argv = M.argv(chosen, path)
    local ok, started = pcall(vim.system, argv, { text = true }, function(result)
      vim.schedule(function()
        if result.code ~= 0 then
          local why = vim.trim(result.stderr or ""):gsub("^sessiond: ", "")
          local message = why ~= "" and why or ("exit " .. result.code)
          notify(("could not draw the timeline: %s"):format(message), vim.log.levels.ERROR)
          callback(why, nil)
          return
        end
        notify(("timeline of %s: %s"):format(chosen and ("run " .. chosen) or "the last hour", path))
        -- Headless (no browser) vim.ui.open fails: the path above is still there to open.
        -- vim.ui.open says it failed by returning an error (no opener found), or throws.
        local called, opener, open_err = pcall(vim.ui.open, path)
        if not called or (opener == nil and open_err ~= nil) then
          local why = called and open_err or opener
          local message = ("could not open it (%s); open %s in a browser"):format(tostring(why), path)
          notify(message, vim.log.levels.WARN)
        end
        callback(nil, path)
      end)
    end)
    if not ok then
      local message = ("could not run %s: %s (see :help sessiond-option-cmd)"):format(argv[1], tostring(started))
      notify(message, vim.log.levels.ERROR)
      callback(tostring(started), nil)
    end
  end
  if run and run ~= "" then
    write(run)
    return
  end
  choose(function(chosen, err)
    if err then
      notify("could not list runs: " .. tostring(err.message), vim.log.levels.ERROR)
      callback(err.message, nil)
      return
    end
    write(chosen)
  end)
end

--- Run ids for completion (the newest first).
function M.complete(arglead)
  local result = client.request_sync("run/list", {}, 1000)
  local ids = {}
  for _, info in ipairs(result and result.runs or {}) do
    if vim.startswith(info.id, arglead or "") then
      table.insert(ids, 1, info.id)
    end
  end
  return ids
end

return M
