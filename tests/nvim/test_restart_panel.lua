-- The panel after :Sessiond restart: a session that reported its context fill before the
-- restart still shows it (the ctx column), both resumed from the last seq seen and from a fresh
-- snapshot; the agent the new daemon has not started yet is "not started", not "stopped".
-- pytest stops the last daemon.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({ reconnect = { min_ms = 100, max_ms = 500 } })
local client = require("sessiond.client")
local panel = require("sessiond.panel")
local WIDTH = 72 -- the panel's default width: room for every column

local id = H.open_sessions(1)[1]
local turn = H.send(id, "usage 1000 200000 0.25")
H.wait("the usage turn", function()
  return turn.done
end)
H.eq(nil, turn.err, "the usage turn")

--- Wait until the panel's line of `id` shows `cell` (and the agent line `agent`, when given).
local function wait_panel(what, cell, agent)
  local lines
  local ok = vim.wait(30000, function()
    lines = panel.lines(sessiond.model, WIDTH)
    local row = vim.tbl_filter(function(line)
      return line:find("○ " .. id .. " ", 1, true) ~= nil
    end, lines)[1]
    return row ~= nil and row:find(" " .. cell .. " ", 1, true) ~= nil and (not agent or lines[1] == agent)
  end, 10)
  local session = vim.inspect(H.session(id))
  H.truthy(ok, ("%s: the panel:\n%s\nthe session: %s"):format(what, table.concat(lines, "\n"), session))
end
wait_panel("the context fill before the restart", "1%")

local old_pid = H.request("daemon/status", {}).pid
vim.cmd("Sessiond restart")
H.wait("the plugin to be online with another daemon", function()
  local daemon = client.state.daemon
  return client.connected() and sessiond.model.connection == "online" and daemon and daemon.pid ~= old_pid
end, 60000)
H.wait_note("restarted the daemon", 1, 60000)
wait_panel("the context fill after the restart", "1%", "demo · not started · 1 session")

-- A fresh snapshot from the new daemon (as a Neovim started after the restart gets) says it too.
local subscription = client.state.subscription
client.subscribe(true)
H.wait("the new subscription", function()
  return client.state.subscription ~= nil and client.state.subscription ~= subscription
end)
wait_panel("the context fill from a snapshot", "1%", "demo · not started · 1 session")
H.done("restart panel")
