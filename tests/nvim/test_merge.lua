-- A worktree session: its changed file opens from its worktree, and
-- :Sessiond merge lands its branch in the repository (the cwd, a git repo).
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({})
local cwd = vim.fn.getcwd()

local id = H.request("session/open", { root = cwd, placement = "worktree" }).sessions[1].id
H.wait("the session in the model", function()
  return H.session(id) ~= nil
end)
sessiond.model:set_current(id)
local turn = H.send(id, "write w.txt from the worktree")
H.wait("the turn", function()
  return turn.done
end)
H.eq(nil, turn.err, "turn error")
local view = require("sessiond.view").show(id)
H.wait_lines(view.buf, { "  A w.txt  +1 -0" }, "the changed file")
H.eq(nil, vim.uv.fs_stat(cwd .. "/w.txt"), "not in the repository before the merge")

-- Enter opens the file where the session works: its worktree.
vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(view.buf), "  A w.txt", "w.txt"), 0 })
H.press("<CR>")
H.wait("w.txt to open", function()
  return vim.api.nvim_buf_get_name(0):match("/w%.txt$") ~= nil
end)
local where = H.request("session/get", { session = id }).where
H.eq(where.root .. "/w.txt", vim.api.nvim_buf_get_name(0), "opened from the worktree")
H.eq({ "from the worktree" }, H.lines(0), "the worktree's file")
vim.cmd("tabclose")

-- A session that works here has no branch to merge: said in one line.
local here = H.open_sessions(1)[1]
vim.cmd("Sessiond merge " .. here)
H.wait("the refusal", function()
  return H.count_lines(
    vim.tbl_map(function(n)
      return n.message
    end, H.notes),
    here .. " works here, not in a worktree"
  ) == 1
end)

-- :Sessiond merge (the current session) lands the branch.
vim.cmd("Sessiond merge")
H.wait("the merge to be reported", function()
  for _, note in ipairs(H.notes) do
    if note.message:find(id .. ": merged", 1, true) or note.message:find(id .. ": merge failed", 1, true) then
      return true
    end
  end
  return false
end, 60000)
H.find_line(
  vim.tbl_map(function(n)
    return n.message
  end, H.notes),
  id .. ": merged",
  "merged"
)
H.eq({ "from the worktree" }, vim.fn.readfile(cwd .. "/w.txt"), "the file landed in the repository")
H.wait_lines(view.buf, { "Merge: ", " merged" }, "the merge in the view")

H.done("merge")
