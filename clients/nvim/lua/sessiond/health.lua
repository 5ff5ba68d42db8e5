--- :checkhealth sessiond: Neovim, the daemon (found, version, socket), agents.

local M = {}

--- vim.health (0.10+), or the report_* functions of Neovim 0.7–0.9's `health`
--- module, so that an old Neovim hears why the plugin does nothing there.
local health = vim.health
if not (health and health.start) then
  local ok, old = pcall(require, "health")
  old = ok and type(old) == "table" and old or {}
  local function say(name)
    return function(...)
      local fn = old["report_" .. name] or (vim.fn.exists("*health#report_" .. name) == 1 and function(...)
        vim.fn["health#report_" .. name](...)
      end)
      if fn then
        fn(...)
      end
    end
  end
  health = { start = say("start"), ok = say("ok"), info = say("info"), warn = say("warn"), error = say("error") }
end

local function check_neovim()
  health.start("sessiond: Neovim")
  local v = vim.version()
  local version = ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. version)
  else
    health.error(
      ("sessiond needs Neovim 0.10 or newer; this is %s, so setup() does nothing"):format(version),
      { "Upgrade Neovim to 0.10 or newer" }
    )
  end
end

local function check_daemon()
  health.start("sessiond: daemon")
  local config = require("sessiond.config")
  local client = require("sessiond.client")
  local state = client.state
  local cmd = config.options.cmd
  local exe = vim.fn.exepath(cmd[1])
  if exe ~= "" then
    health.ok(("`%s` found: %s"):format(cmd[1], exe))
  elseif client.connected() then
    health.info(
      ("`%s` is not on PATH; not needed while the daemon runs (see :help sessiond-option-cmd)"):format(cmd[1])
    )
  else
    health.warn(("`%s` is not on PATH, so no daemon can be started"):format(cmd[1]), {
      "Install sessiond (pip install sessiond) or set `cmd` in setup()",
    })
  end
  local socket = client.socket()
  local stat = vim.uv.fs_stat(socket)
  if stat and stat.type == "socket" then
    health.ok("socket: " .. socket)
  else
    health.info("no socket at " .. socket .. (stat and (" (a " .. stat.type .. ")") or ""))
  end
  if not client.connected() then
    health.error("not connected to the daemon", {
      state.last_error or "setup() was not called, or the connection is being made",
      "`:Sessiond connect` tries again",
    })
    return false
  end
  local daemon, err = client.request_sync("daemon/status", {}, 3000)
  if not daemon then
    health.error("daemon/status failed: " .. tostring(err and err.message))
    return false
  end
  local info = state.server_info or {}
  health.ok(
    ("connected over %s to %s %s (pid %s), event log at seq %s, %s client(s)"):format(
      state.transport or "?",
      info.name or "sessiond",
      daemon.version or info.version or "?",
      tostring(daemon.pid),
      tostring(daemon.head),
      tostring(daemon.clients)
    )
  )
  local model = require("sessiond").model
  health.info(("this editor has applied events up to seq %d"):format(model.seq))
  return true
end

local function check_agents()
  health.start("sessiond: agents")
  local client = require("sessiond.client")
  local result, err = client.request_sync("agent/list", {}, 3000)
  if not result then
    health.error("agent/list failed: " .. tostring(err and err.message))
    return
  end
  if #result.agents == 0 then
    health.warn("no agents")
  end
  for _, agent in ipairs(result.agents) do
    local process = agent.process or {}
    local line = ("%s: %s, %d open session(s), command: %s"):format(
      agent.name,
      require("sessiond.status").process_state(process) or "?",
      agent.openSessions or 0,
      table.concat(agent.command or {}, " ")
    )
    if process.state == "crashed" or process.lastError then
      health.warn(line, { process.lastError or "it crashed; it starts again on the next turn", process.logPath })
    else
      health.ok(line)
    end
    if process.note then
      health.info(agent.name .. ": " .. process.note)
    end
  end
end

function M.check()
  check_neovim()
  if vim.fn.has("nvim-0.10") ~= 1 then
    return
  end
  if not require("sessiond").model then
    health.start("sessiond: daemon")
    health.warn("setup() was not called", { 'Add require("sessiond").setup({}) to your config' })
    return
  end
  if check_daemon() then
    check_agents()
  end
end

return M
