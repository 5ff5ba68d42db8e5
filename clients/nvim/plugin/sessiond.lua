vim.api.nvim_create_user_command("Sessiond", function(opts)
  require("sessiond.commands").run(opts)
end, {
  nargs = "*",
  range = true,
  desc = "sessiond: panel, new, send, next, prev, cancel, close, open, answer, connect",
  complete = function(...)
    return require("sessiond.commands").complete(...)
  end,
})
