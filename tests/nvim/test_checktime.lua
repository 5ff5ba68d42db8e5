-- A file a session changes, open in a buffer: the buffer is checked against the disk when the
-- session's changed files change (:checktime), so with 'autoread' (Neovim's default) it shows
-- the agent's edit at once, not only once the diff is opened.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
H.setup({})

local root = vim.fn.getcwd()
vim.fn.writefile({ "before the edit" }, root .. "/notes.txt")
vim.cmd("edit " .. vim.fn.fnameescape(root .. "/notes.txt"))
local buf = vim.api.nvim_get_current_buf()
H.eq(true, vim.o.autoread, "'autoread' is on (Neovim's default)")

local id = H.open_sessions(1)[1]
local turn = H.send(id, "edit notes.txt before => after")
H.wait("the turn", function()
  return turn.done
end)
H.eq(nil, turn.err, "the edit")
H.lines_debug = buf
H.wait("the buffer to show the agent's edit", function()
  return vim.deep_equal(H.lines(buf), { "after the edit" })
end)

H.done("checktime")
