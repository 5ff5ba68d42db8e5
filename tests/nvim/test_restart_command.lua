-- :Sessiond restart: daemon/stop over the plugin's connection, then the
-- plugin's own connect path (`sessiond stdio`, at the same socket and home)
-- starts a new daemon, and the plugin resyncs from it. Twice: with a turn
-- running (cancelled, and counted in the notification) and with none. Not
-- connected, it says so and stops nothing. Neither a restart nor disconnecting
-- is announced as a lost connection. pytest stops the last daemon.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({ reconnect = { min_ms = 100, max_ms = 500 } })
local client = require("sessiond.client")

--- The first notification from index `from` on that contains `needle`.
local function wait_note(from, needle, what)
  local found
  H.wait(what, function()
    for i = from, #H.notes do
      if H.notes[i].message:find(needle, 1, true) then
        found = H.notes[i]
        return true
      end
    end
    return false
  end, 60000)
  return found
end

--- :Sessiond restart, then wait until the plugin is online with another daemon.
--- Returns the new daemon's status and the notification.
local function restart(old_pid)
  local from = #H.notes + 1
  vim.cmd("Sessiond restart")
  H.wait("the plugin to be online with a daemon other than pid " .. old_pid, function()
    local daemon = client.state.daemon
    return client.connected() and sessiond.model.connection == "online" and daemon and daemon.pid ~= old_pid
  end, 60000)
  local note = wait_note(from, "restarted the daemon", "the restart's notification")
  local status = H.request("daemon/status", {})
  H.truthy(status.pid ~= old_pid, "a new daemon: pid " .. status.pid)
  H.eq(vim.env.SESSIOND_SOCKET, status.socket, "the new daemon is at the same socket")
  H.eq(vim.log.levels.INFO, note.level, "the restart is news, not an error")
  return status, note
end

local first = H.request("daemon/status", {})
H.eq(vim.env.SESSIOND_SOCKET, first.socket, "pytest's daemon")

-- A turn runs in a session with a view.
local id = H.open_sessions(1)[1]
local view = require("sessiond.view").show(id)
local hanging = H.send(id, "say hanging on\nhang")
H.wait_status(id, "working")
H.lines_debug = view.buf
H.wait("the agent's reply in the view (not only the prompt, which says it too)", function()
  return H.count_exact(H.lines(view.buf), "hanging on") == 1
end)

-- First restart: the running turn is cancelled and counted.
local second, note = restart(first.pid)
H.eq(
  ("sessiond: restarted the daemon (pid %d → %d); 1 running or queued turn was cancelled"):format(
    first.pid,
    second.pid
  ),
  note.message,
  "the notification"
)
H.eq("stdio", client.state.transport, "the new daemon came through `sessiond stdio`")
H.wait("the hanging turn's request to end", function()
  return hanging.done
end)
-- The model, status line and view come from the new daemon (same home: the same store and log).
H.wait("the cut turn to end in the model", function()
  return H.session(id) and H.session(id).status ~= "working" and not H.status():find("working")
end)
local after = H.send(id, "say after the restart")
H.wait("a turn with the new daemon", function()
  return after.done
end)
H.eq(nil, after.err, "the turn with the new daemon")
H.wait_lines(view.buf, { "after the restart" }, "the new turn in the view")
H.eq(1, H.count_exact(H.lines(view.buf), "hanging on"), "the cut reply once")

-- Second restart, of the daemon the plugin started: nothing to cancel, nothing said about turns.
local third, quiet = restart(second.pid)
H.eq(("sessiond: restarted the daemon (pid %d → %d)"):format(second.pid, third.pid), quiet.message, "no turns part")
H.truthy(H.session(id), "the session is still there")

-- Not connected: an error that says what to do, and the daemon keeps running.
client.disconnect()
local from = #H.notes + 1
vim.cmd("Sessiond restart")
local refused = wait_note(from, "cannot restart the daemon", "the refusal")
H.eq(vim.log.levels.ERROR, refused.level, "the refusal is an error")
H.truthy(refused.message:find(":Sessiond connect", 1, true), "it says what to do: " .. refused.message)
vim.cmd("Sessiond connect")
H.wait("the plugin to connect again", function()
  return sessiond.model.connection == "online"
end)
H.eq(third.pid, H.request("daemon/status", {}).pid, "the same daemon: nothing was restarted")

-- The connection closed by the restarts and by disconnecting was not lost: nothing said so.
H.eq({}, H.notes_with("lost the connection"), "no lost connection announced")

-- Completion offers it.
H.eq({ "restart" }, vim.fn.getcompletion("Sessiond rest", "cmdline"), "completion")

H.done("restart command")
