-- Neovim with a UI attached, as a person has it: this script, run with
-- `nvim -l`, starts a child `nvim --embed`, attaches a UI to it (the grid is
-- ignored), and the child runs the scenario below in its main loop, where
-- CursorMoved and redraws happen as in a terminal (headless `-l` has neither).
-- The README's %{g:sessiond_status} works from the first redraw, and a focused
-- panel over 20 sessions costs nothing while nothing happens (no render, no
-- `User SessiondUpdate`), yet follows the cursor and real changes. The child
-- UI comes from embed.lua.
if not vim.env.SESSIOND_UI_CHILD then
  local script = vim.fn.fnamemodify(arg[0], ":p")
  local embed = dofile(vim.fn.fnamemodify(script, ":h") .. "/embed.lua")
  local request = embed.child(script, 120, 40)
  local result, deadline = nil, vim.uv.now() + 80000
  while (result == nil or result == vim.NIL) and vim.uv.now() < deadline do
    vim.wait(200, function()
      return false
    end)
    result = request("nvim_exec_lua", "return _G.SESSIOND_TEST_RESULT", {})
  end
  pcall(request, "nvim_command", "qa!")
  assert(result ~= nil and result ~= vim.NIL, "the child Neovim did not finish the scenario")
  if not result.ok then
    error(result.err, 0)
  end
  io.stdout:write("ok idle\n")
  return
end

local H = dofile(os.getenv("SESSIOND_REPO") .. "/tests/nvim/helpers.lua")

-- The child: its stdout is the RPC channel, so it only leaves a result behind.
local function finish(ok, err)
  _G.SESSIOND_TEST_RESULT = { ok = ok, err = err and (tostring(err) .. "\n" .. H.debug()) or nil }
end

local sessiond, ids, panel, buf
local setup_ok, setup_err = pcall(function()
vim.o.laststatus = 2
vim.o.statusline = "%f %{g:sessiond_status}"
sessiond = require("sessiond")
H.truthy(sessiond.setup({}), "setup")
-- Right after setup(), before any redraw or answer from the daemon.
H.truthy(vim.g.sessiond_status ~= nil and vim.g.sessiond_status ~= "", "g:sessiond_status is defined by setup()")
H.eq(
  "%f sessiond: connecting",
  "%f " .. vim.api.nvim_eval_statusline("%{g:sessiond_status}", {}).str,
  "the README's statusline item evaluates"
)
H.wait("the plugin to connect", function()
  return sessiond.model.connection == "online"
end)
ids = H.open_sessions(20)
local turn = H.send(ids[3], "plan a | b\nsay done")
H.wait("the turn", function()
  return turn.done
end)
vim.cmd("Sessiond panel")
panel = require("sessiond.panel")
buf = panel.buffer()
H.wait_lines(buf, { "done" }, "the turn's last line in the panel")
vim.api.nvim_win_set_cursor(0, { 5, 0 })
end)
if not setup_ok then
  finish(false, setup_err)
  return
end

local record = H.record_updates()
local step = coroutine.wrap(function()
  local ok, err = pcall(function()
    local function sleep(ms)
      local co = coroutine.running()
      vim.defer_fn(function()
        coroutine.resume(co)
      end, ms)
      coroutine.yield()
    end
    sleep(1500) -- the cursor move above, state events, settle
    H.eq(buf, vim.api.nvim_get_current_buf(), "the panel has the focus")
    local renders, updates = panel.renders, record.updates
    sleep(3000)
    H.eq(0, panel.renders - renders, "panel renders while idle")
    H.eq(0, record.updates - updates, "User SessiondUpdate while idle")
    -- Moving the cursor still makes the row's session current, once.
    local before = sessiond.model.current
    vim.api.nvim_feedkeys("j", "nx", false)
    sleep(500)
    H.truthy(sessiond.model.current ~= before, "the cursor's session is current: " .. tostring(sessiond.model.current))
    local after_move = record.updates
    H.truthy(after_move - updates >= 1 and after_move - updates <= 2, "one update for the move: " .. (after_move - updates))
    sleep(1500)
    H.eq(after_move, record.updates, "idle again after the move")
    -- A real change redraws.
    local renders_before = panel.renders
    local second = H.send(ids[1], "say again")
    while not second.done do
      sleep(50)
    end
    sleep(400)
    H.truthy(panel.renders > renders_before, "a turn redraws the panel")
  end)
  if ok and #H.globals > 0 then
    ok, err = false, "globals set by the plugin: " .. table.concat(H.globals, ", ")
  end
  finish(ok, err)
end)
vim.schedule(function()
  local ok, err = pcall(step)
  if not ok then
    finish(false, err)
  end
end)
