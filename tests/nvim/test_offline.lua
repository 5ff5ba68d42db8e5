-- The daemon stops under a running Neovim (daemon/stop, as `sessiond stop` asks it): the
-- plugin says so once (the winbar says "offline", once), and while it is away a prompt is
-- refused at once, nothing said to be on its way; a compose buffer keeps its text, and once
-- :Sessiond connect has started a daemon again, :w there sends it and says where it went.
-- pytest stops the daemon `sessiond stdio` started.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({ reconnect = { min_ms = 100, max_ms = 300 } })
local client = require("sessiond.client")

local id = H.open_sessions(1)[1]
local view = require("sessiond.view").show(id)
local view_win = vim.api.nvim_get_current_win()
H.eq(id, sessiond.model.current, "the view's session is current")

local from = #H.notes + 1
H.request("daemon/stop", {})
H.wait("the plugin to notice the daemon went away", function()
  return sessiond.model.connection ~= "online"
end)

H.case("a lost connection is said once, and the winbar says offline once", function()
  local lost = H.wait_note("lost the connection to the daemon", from)
  H.eq(vim.log.levels.WARN, lost.level, "a warning")
  -- Attempts to reconnect fail one after another, and say nothing more.
  local generation = client.state.generation
  H.wait("three more attempts to reconnect", function()
    return client.state.generation >= generation + 3
  end)
  H.eq(1, #H.notes_with("lost the connection", from), "said once")
  local winbar = require("sessiond.panel").winbar_text(sessiond.model, nil)
  H.truthy(winbar == "sessiond · offline" or winbar == "sessiond · connecting", "the panel's winbar: " .. winbar)
end)

H.case(":Sessiond send while not connected is refused at once", function()
  local before = #H.notes + 1
  vim.cmd("Sessiond send say hello")
  local refused = H.wait_note("not connected to the sessiond daemon: nothing sent to " .. id, before)
  H.truthy(refused.message:find(":Sessiond connect", 1, true), "it says what to do: " .. refused.message)
  H.eq(0, #H.notes_with("lost the daemon", before), "no turn said to be the daemon's")
  H.eq(0, #H.notes_with("sessiond: sent to", before), "nothing said to be sent")
end)

H.case("the compose buffer keeps its prompt while not connected, and sends it once connected", function()
  vim.api.nvim_set_current_win(view_win)
  H.press("s")
  vim.cmd("stopinsert")
  local compose = vim.api.nvim_get_current_buf()
  H.eq("sessiond://compose/" .. id, vim.api.nvim_buf_get_name(compose), "the compose buffer")
  local prompt = { "say kept while away", "say on two lines" }
  vim.api.nvim_buf_set_lines(compose, 0, -1, false, prompt)
  local before = #H.notes + 1
  vim.cmd("write")
  local refused = H.wait_note("not connected to the sessiond daemon: nothing sent to " .. id, before)
  H.truthy(refused.message:find("the prompt stays here", 1, true), refused.message)
  H.eq(0, #H.notes_with("sessiond: sent to " .. id, before), "not said to be sent")
  H.truthy(vim.api.nvim_buf_is_valid(compose), "the compose buffer stays")
  H.eq(prompt, H.lines(compose), "with its text")
  H.eq(true, vim.bo[compose].modified, "unwritten")
  H.eq(compose, vim.api.nvim_get_current_buf(), "and the cursor in it")

  vim.cmd("Sessiond connect") -- starts a daemon again (`sessiond stdio`), with the same home
  H.wait("the plugin to connect again", function()
    return sessiond.model.connection == "online"
  end, 60000)
  before = #H.notes + 1
  vim.cmd("write")
  H.wait("the compose buffer to go", function()
    return not vim.api.nvim_buf_is_valid(compose)
  end)
  H.wait_note("sessiond: sent to " .. id, before)
  H.wait_lines(view.buf, { "kept while away", "on two lines" }, "the prompt's turn in the view")
end)

H.done("offline")
