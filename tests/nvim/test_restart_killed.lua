-- The daemon is killed (SIGKILL) in the middle of a turn and started again by
-- pytest with the same home. It ends the cut-off turn itself on start-up
-- (`turn.ended` with outcome "interrupted" and an error): the plugin, resuming
-- from its last seq, shows the session ended (failed, not working) and the
-- view marks the turn. The lost connection is said once.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({ reconnect = { min_ms = 100, max_ms = 500 } })
local id = H.open_sessions(1)[1]
local view = require("sessiond.view").show(id)
H.send(id, "say hanging on\nhang")
H.wait_status(id, "working")
H.wait_lines(view.buf, { "hanging on" }, "the hanging turn in the view")

H.signal("stop")
H.wait("the plugin to notice the daemon went away", function()
  return sessiond.model.connection ~= "online"
end)
H.await_signal("started", 60000)
-- Said once, though the attempts to reconnect failed until the daemon was back.
H.wait_note("lost the connection to the daemon")
H.wait("the plugin to reconnect by itself", function()
  return sessiond.model.connection == "online"
end, 30000)
H.wait("the cut-off turn to end", function()
  local info = H.session(id)
  return info and info.status ~= "working"
end)
H.eq("failed", H.session(id).status, "the session ends failed, not working")
H.eq(nil, H.status():find("working", 1, true), "nothing works: " .. H.status())
H.wait_lines(view.buf, { "── interrupted: the daemon stopped", "Status: failed" }, "the view marks the turn and the session")
H.eq(1, H.count_lines(H.lines(view.buf), "── interrupted: the daemon stopped"), "one mark: " .. table.concat(H.lines(view.buf), " / "))
H.eq(1, #H.notes_with("lost the connection"), "the lost connection said once")
H.done("restart killed")
