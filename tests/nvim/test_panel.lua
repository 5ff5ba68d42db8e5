-- The panel over the stdio transport (`sessiond stdio`, spawned because
-- nothing answers at the configured socket; told with --socket where the test's
-- daemon is): its lines, its keys, and "n of m" stepping between working
-- sessions in the winbar and with :Sessiond next/prev.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({
  socket = "/tmp/sessiond-test-nothing-here.sock",
  cmd = { "sessiond", "--socket", vim.env.SESSIOND_SOCKET, "stdio" },
  compose = "input", -- one line with vim.ui.input (the compose buffer: test_everyday.lua)
})
local client = require("sessiond.client")
H.eq("stdio", client.state.transport, "nothing at the socket: connected through `sessiond stdio`")
H.wait("daemon/status to tell the real socket", function()
  return client.state.daemon ~= nil
end)
H.eq(vim.env.SESSIOND_SOCKET, client.state.socket, "the real socket, for reconnecting")

local ids = H.open_sessions(4)
H.eq({ "s1", "s2", "s3", "s4" }, ids, "ids")
local hangs = { H.send("s2", "say on it\nhang"), H.send("s4", "think first\nsay on it too\nhang") }
H.wait("two working sessions", function()
  return H.status():find("^2 working · 4 open") ~= nil
end)

vim.cmd("Sessiond panel")
local buf = require("sessiond.panel").buffer()
H.eq(buf, vim.api.nvim_get_current_buf(), "the panel has the focus")
H.wait_lines(buf, { "demo · running · 4 sessions" }, "the agent line")
local lines = H.lines(buf)
local function line_of(id)
  local row, line = H.find_line(
    H.lines(buf),
    "  " .. (id == "s2" and "●" or id == "s4" and "●" or "○") .. " " .. id .. " ",
    "line of " .. id
  )
  return row, line
end
H.wait_lines(buf, { "on it too" }, "the last line of s4")
local _, s4_line = line_of("s4") -- (its icon says it works)
H.truthy(s4_line:find("on it too", 1, true), "s4 says what it does: " .. s4_line)
-- In this 32-column panel the status word gives way to the last line (the icon says it); a wider
-- one shows it, its column lined up.
H.eq(32, vim.api.nvim_win_get_width(0), "the panel's width at 80 columns")
H.eq(nil, s4_line:find("working", 1, true), "no status word at 32 columns: " .. s4_line)
local wide = require("sessiond.panel").lines(require("sessiond").model, 100)
local _, wide_s1 = H.find_line(wide, " s1 ", "s1 at 100 columns")
local _, wide_s4 = H.find_line(wide, " s4 ", "s4 at 100 columns")
H.eq(wide_s1:find(" idle ", 1, true), wide_s4:find(" working ", 1, true), "the status column: " .. wide_s4)
-- A session opened with no title is named by its first prompt (the daemon's session.titled).
H.truthy(s4_line:find("s4 think first", 1, true), "s4 is named by its first prompt: " .. s4_line)
H.eq(5, #lines, "an agent line and four session lines")

-- ]w / [w step among the working sessions; the winbar says where.
local function winbar()
  return vim.wo.winbar:gsub("%%%%", "%%")
end
vim.api.nvim_win_set_cursor(0, { line_of("s1"), 0 })
H.press("]w")
H.eq("sessiond · s2 · 1 of 2 working", winbar(), "first working session")
H.eq(line_of("s2"), vim.api.nvim_win_get_cursor(0)[1], "cursor on s2")
H.press("]w")
H.eq("sessiond · s4 · 2 of 2 working", winbar(), "second")
H.press("]w")
H.eq("sessiond · s2 · 1 of 2 working", winbar(), "wraps")
H.press("[w")
H.eq("sessiond · s4 · 2 of 2 working", winbar(), "back, wrapping")
H.eq("s4", sessiond.model.current, "the cursor's session is current")

-- :Sessiond next / prev do the same from anywhere.
vim.cmd("Sessiond next")
H.eq("s2", sessiond.model.current, ":Sessiond next")
H.eq("sessiond · s2 · 1 of 2 working", winbar(), "winbar after :Sessiond next")
vim.cmd("Sessiond prev")
H.eq("s4", sessiond.model.current, ":Sessiond prev")

-- c cancels the session under the cursor.
H.press("c")
H.wait_status("s4", "stopped")
H.wait("one working session", function()
  return H.status():find("^1 working · 4 open") ~= nil
end)
H.press("]w")
H.eq("sessiond · s2 · 1 of 1 working", winbar(), "only s2 works now")

-- s sends a prompt (asked with vim.ui.input) to the session under the cursor.
vim.ui.input = function(_, on_confirm)
  on_confirm("say hello from the panel")
end
vim.api.nvim_win_set_cursor(0, { line_of("s1"), 0 })
H.press("s")
H.wait_lines(buf, { "hello from the panel" }, "s1's last line in the panel")

-- C closes the session under the cursor; its line goes.
vim.api.nvim_win_set_cursor(0, { line_of("s3"), 0 })
H.press("C")
H.wait("s3 to close", function()
  return H.session("s3") == nil and H.count_lines(H.lines(buf), " s3 ") == 0
end)
H.eq("1 working · 3 open", H.status():gsub(" │.*", ""), "counts after closing")

-- <CR> opens the session's view beside the panel.
vim.api.nvim_win_set_cursor(0, { line_of("s2"), 0 })
H.press("<CR>")
H.eq("sessiond://session/s2", vim.api.nvim_buf_get_name(0), "<CR> opens the view")
H.eq(1, #vim.fn.win_findbuf(buf), "the panel stays")
-- The window Neovim started with showed nothing: the view took it, rather than a third column.
H.eq(2, #vim.api.nvim_tabpage_list_wins(0), "the panel and the view, no empty window beside them")

vim.cmd("Sessiond cancel s2")
H.wait("the hanging turns to end", function()
  return hangs[1].done and hangs[2].done
end)
H.eq("cancelled", hangs[1].result.stopReason, "cancelled is a result, not an error")

-- Opened beside two windows in a wide editor, the panel takes its width from both, not all of it
-- from the window next to it (which was left a few columns wide).
require("sessiond.panel").close()
vim.o.columns = 200
vim.cmd("vsplit")
H.eq(2, #vim.api.nvim_tabpage_list_wins(0), "two windows, no panel")
vim.cmd("Sessiond panel")
local widths = {}
for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  if vim.api.nvim_win_get_buf(win) ~= buf then
    widths[#widths + 1] = vim.api.nvim_win_get_width(win)
  end
end
H.eq(2, #widths, "the panel beside the two windows")
H.truthy(math.abs(widths[1] - widths[2]) <= 1, "the two windows share what is left: " .. vim.inspect(widths))
local room = 200 - require("sessiond.config").options.panel.width - 2 -- (the separators)
for _, width in ipairs(widths) do
  H.truthy(width >= room / 2 - 1, ("each window keeps about half of what is left (%d of %d): %s"):format(
    width,
    room,
    vim.inspect(widths)
  ))
end

H.done("panel")
