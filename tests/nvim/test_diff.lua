-- In a git repository the daemon records the root's state as a git tree when
-- the session first runs; Enter on a changed file opens a diff against it.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
H.setup({})

local id = H.open_sessions(1)[1]
local turn = H.send(id, "write g.txt new line\nwrite h.txt brand new")
H.wait("the turn", function()
  return turn.done
end)
H.eq(nil, turn.err, "turn error")
H.wait("two changed files", function()
  local info = H.session(id)
  return info.changes and #info.changes.files == 2
end)
local base = H.session(id).changes.base
H.truthy(base and base:match("^%x+$"), "a git tree as the base, got " .. tostring(base))

local view = require("sessiond.view").show(id)
H.wait_lines(view.buf, { "  M g.txt  +1 -1", "  A h.txt  +1 -0" }, "the changed files in the view")

-- A modified file: a diff of the base version against the file, in a new tab page.
vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(view.buf), "  M g.txt", "g.txt"), 0 })
local tabs = #vim.api.nvim_list_tabpages()
H.press("<CR>")
H.wait("a new tab page with two windows in diff mode", function()
  local wins = vim.api.nvim_tabpage_list_wins(0)
  return #vim.api.nvim_list_tabpages() == tabs + 1 and #wins == 2 and vim.wo[wins[1]].diff and vim.wo[wins[2]].diff
end)
local by_name = {}
for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  local buf = vim.api.nvim_win_get_buf(win)
  by_name[vim.api.nvim_buf_get_name(buf)] = H.lines(buf)
end
H.eq({ "old line" }, by_name["sessiond://base/" .. id .. "/g.txt"], "the base version")
H.eq({ "new line" }, by_name[vim.fn.getcwd() .. "/g.txt"], "the file now")

-- The same file once more, from the view: its diff's tab page, not a second one.
local diff_tab = vim.api.nvim_get_current_tabpage()
vim.cmd("tabfirst")
local view_tab = vim.api.nvim_get_current_tabpage()
H.eq(view.buf, vim.api.nvim_get_current_buf(), "back in the view")
vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(view.buf), "  M g.txt", "g.txt"), 0 })
H.press("<CR>")
H.wait("a tab page with the diff", function()
  return vim.api.nvim_get_current_tabpage() ~= view_tab
end)
H.eq(tabs + 1, #vim.api.nvim_list_tabpages(), "no second tab page for the same diff")
H.eq(diff_tab, vim.api.nvim_get_current_tabpage(), "the diff's own tab page")
H.eq(vim.fn.getcwd() .. "/g.txt", vim.api.nvim_buf_get_name(0), "on the file's window")
H.eq(2, #vim.api.nvim_tabpage_list_wins(0), "the diff's two windows")
vim.cmd("tabclose")

-- An added file has no base version: the file itself opens.
vim.api.nvim_set_current_buf(view.buf)
vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(view.buf), "  A h.txt", "h.txt"), 0 })
H.press("<CR>")
H.wait("h.txt to open", function()
  return vim.api.nvim_buf_get_name(0) == vim.fn.getcwd() .. "/h.txt"
end)
H.eq(false, vim.wo.diff, "no diff for an added file")
H.eq({ "brand new" }, H.lines(0), "the added file")

H.done("diff")
