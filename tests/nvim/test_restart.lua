-- The daemon is stopped (SIGTERM) in the middle of a turn and started again
-- with the same home by pytest. The plugin goes offline, reconnects by
-- itself, resubscribes from the last seq it applied, and carries on; the lost
-- connection is said once.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({ reconnect = { min_ms = 100, max_ms = 500 } })
local client = require("sessiond.client")

local subscriptions = {}
local request = client.request
client.request = function(method, params, callback)
  if method == "events/subscribe" then
    subscriptions[#subscriptions + 1] = params
  end
  return request(method, params, callback)
end

local id = H.open_sessions(1)[1]
local view = require("sessiond.view").show(id)
local first = H.send(id, "say before the restart")
H.wait("the first turn", function()
  return first.done
end)
local hanging = H.send(id, "say hanging on\nhang")
H.wait("the session to work", function()
  return H.session(id).status == "working"
end)
H.wait_lines(view.buf, { "hanging on" }, "the hanging turn in the view")
local seq_before = sessiond.model.seq

H.signal("stop")
H.wait("the plugin to notice the daemon went away", function()
  return sessiond.model.connection ~= "online"
end)
H.eq("sessiond: offline", H.status():gsub("connecting", "offline"), "offline in the status line")
H.await_signal("started", 60000)
-- Said once, though the attempts to reconnect failed until the daemon was back.
H.wait_note("lost the connection to the daemon")
H.wait("the plugin to reconnect by itself", function()
  return sessiond.model.connection == "online"
end, 30000)

-- Resubscribed from the last seq seen, not from a fresh snapshot.
local last = subscriptions[#subscriptions]
H.truthy(last.since and last.since >= seq_before, "resubscribed with since: " .. vim.inspect(last))
H.eq(nil, last.snapshot, "no snapshot when resuming")
-- The turn the restart cut short ended (replayed or new events); nothing works now.
H.wait("the cut turn to end in the model", function()
  return H.session(id) and H.session(id).status ~= "working" and not H.status():find("working")
end)
-- Its prompt request was answered (stopping, the daemon cancels turns) or failed with the connection.
H.truthy(hanging.done, "the prompt of the old connection ended")

-- The session carries on after the restart; the view has every line once.
local after = H.send(id, "say after the restart")
H.wait("a turn after the restart", function()
  return after.done
end)
H.eq(nil, after.err, "turn after the restart")
H.wait_lines(view.buf, { "after the restart" }, "the new turn in the view")
local lines = H.lines(view.buf)
H.eq(1, H.count_exact(lines, "before the restart"), "the old reply once")
H.eq(1, H.count_exact(lines, "hanging on"), "the cut reply once")
H.eq(1, H.count_exact(lines, "after the restart"), "the new reply once")

H.eq(1, #H.notes_with("lost the connection"), "the lost connection said once")
H.done("restart")
