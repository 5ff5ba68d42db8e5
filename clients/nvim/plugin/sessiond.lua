vim.api.nvim_create_user_command("Sessiond", function(opts) require("sessiond.commands").run(opts) end, { nargs = "*", range = true, desc = "sessiond: panel, new, send, side, tasks, next, prev, cancel, close, open, answer, merge, connect, restart, timeline", complete = function(...) return require("sessiond.commands").complete(...) end })
-- A 'statusline' with %{g:sessiond_status} works before setup() (and on a Neovim setup() refuses).
if vim.g.sessiond_status == nil then vim.g.sessiond_status = "" end
require("sessiond.commands").define_plug_mappings()
