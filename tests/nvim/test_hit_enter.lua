-- A permission request arrives while a person types in insert mode, in Neovim with a UI
-- attached (embed.lua) and the real vim.notify: its tool title is longer than 'columns'.
-- Nothing takes the keyboard: no hit-enter prompt (nvim_get_mode().blocking stays false)
-- and every key typed lands in the buffer; back in normal mode the notification is on the
-- last line, cut in the middle to fit.
if not vim.env.SESSIOND_UI_CHILD then
  local script = vim.fn.fnamemodify(arg[0], ":p")
  local embed = dofile(vim.fn.fnamemodify(script, ":h") .. "/embed.lua")
  local request, screen = embed.child(script, 80, 24)
  local function quit()
    pcall(request, "nvim_command", "qa!")
  end
  local function fail(message)
    local mode = request("nvim_get_mode")
    -- Not while a prompt blocks it: the child would answer only after a key.
    local messages = "(blocked)"
    if not mode.blocking then
      local code = "return vim.api.nvim_exec2('messages', { output = true }).output"
      messages = select(2, pcall(request, "nvim_exec_lua", code, {}))
    end
    quit()
    local report = "%s\n--- the child's screen:\n%s\n--- its :messages:\n%s"
    error(report:format(message, screen.text(), tostring(messages)), 0)
  end
  local child, wait = embed.helpers(request, fail)
  local function not_blocked(when)
    local mode = request("nvim_get_mode")
    if mode.blocking or mode.mode ~= "i" then
      fail(("%s: mode %s, blocking %s (a prompt took the keyboard)"):format(when, mode.mode, tostring(mode.blocking)))
    end
  end

  wait("the child to set up and open a session", function()
    local ready = child("return _G.SESSIOND_TEST_READY")
    if type(ready) == "table" and ready.err then
      fail(ready.err)
    end
    return type(ready) == "table" and ready.session ~= nil
  end, 80000)
  -- A person typing.
  request("nvim_input", "ihello")
  wait("insert mode and the typed text", function()
    return request("nvim_get_mode").mode == "i" and child("return vim.api.nvim_get_current_line()") == "hello"
  end)
  local title = "Delete every cached build artifact under build/ and .cache/, then rebuild the wheels from scratch?"
  assert(#title > 80)
  child("_G.SESSIOND_TEST_ASK(...)", title)
  -- Given (in :messages), and no prompt: the mode message covers it while typing.
  wait("the notification", function()
    not_blocked("as the notification comes")
    local messages = child("return vim.api.nvim_exec2('messages', { output = true }).output")
    return messages:find("b (s1) asks: Delete", 1, true) ~= nil
  end)
  not_blocked("right after the notification")
  if screen.text():find("Press ENTER", 1, true) then
    fail("a hit-enter prompt")
  end
  -- Typing goes on; every key reaches the buffer.
  request("nvim_input", " world")
  wait("the rest of the typing", function()
    local mode = request("nvim_get_mode")
    if mode.blocking then
      fail("a hit-enter prompt while typing on")
    end
    return child("return vim.api.nvim_get_current_line()") == "hello world"
  end)
  not_blocked("after typing on")
  -- Back in normal mode: the notification on the last line, one line with its start and its end.
  local flushes = screen.flushes
  request("nvim_input", "<Esc>")
  wait("the notification shown again in normal mode", function()
    return screen.flushes > flushes and screen.lines()[24]:find("^sessiond: b %(s%d+%) asks: Delete") ~= nil
  end)
  local last = screen.lines()[24]
  if not (last:find("…", 1, true) and last:find("%(:Sessiond answer%)%s*$")) then
    fail("the notification is not one line with its start and its end: " .. last)
  end
  local mode = request("nvim_get_mode")
  if mode.blocking or mode.mode ~= "n" or screen.text():find("Press ENTER", 1, true) then
    fail("a prompt in normal mode: " .. vim.inspect(mode))
  end
  if child("return vim.api.nvim_get_current_line()") ~= "hello world" then
    fail("the buffer changed")
  end
  -- The request and the session's new state are two messages: the mark may come a moment later.
  local shown
  if not vim.wait(30000, function()
    shown = child("return require('sessiond').status({ raw = true })")
    return shown:find("1 needs you", 1, true) ~= nil
  end, 20) then
    fail("the status line does not mark the request: " .. shown)
  end
  local failure = child("return _G.SESSIOND_TEST_FAILURE")
  if failure ~= nil and failure ~= vim.NIL then
    fail(failure)
  end
  quit()
  io.stdout:write("ok hit-enter\n")
  return
end

-- The child. Its stdout is the RPC channel: it only leaves state behind for the parent.
local real_notify = vim.notify
local H = dofile(os.getenv("SESSIOND_REPO") .. "/tests/nvim/helpers.lua")
vim.notify = real_notify -- helpers.lua records and swallows messages; here they are shown

local ok, err = pcall(function()
  local sessiond = require("sessiond")
  H.truthy(sessiond.setup({}), "setup")
  H.wait("the plugin to connect", function()
    return sessiond.model.connection == "online"
  end)
  -- Named, or its first prompt (the long request) would name it, and the message start with that.
  local id = H.open_sessions(1, nil, "b")[1]
  _G.SESSIOND_TEST_ASK = function(title)
    local turn = H.send(id, "ask " .. title .. "\nsay done")
    vim.defer_fn(function()
      if turn.done then
        _G.SESSIOND_TEST_FAILURE = "the turn ended without an answer: " .. vim.inspect(turn)
      end
    end, 100)
  end
  vim.cmd("enew")
  _G.SESSIOND_TEST_READY = { session = id }
end)
if not ok then
  _G.SESSIOND_TEST_READY = { err = tostring(err) .. "\n" .. H.debug() }
end
