-- Options, setup() twice, the help file (fresh and loadable), and completion;
-- no daemon runs: the plugin stays offline and says so.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local config = require("sessiond.config")

-- Defaults.
local defaults = config.resolve({})
H.eq({ "sessiond", "stdio" }, defaults.cmd, "default cmd")
H.eq(8, defaults.view.keep, "default view.keep")
H.eq(2000, defaults.view.lines, "default view.lines")
H.eq("<CR>", defaults.panel.keys.open, "default panel key")

-- Partial tables merge with the defaults; problems are one line each, with the default kept.
local options, problems = config.resolve({
  view = { keep = "eight", lines = 50 },
  panel = { keys = { send = "S", bogus = "x" } },
  permission_prompt = "popup",
  colour = "blue",
})
H.eq(8, options.view.keep, "a wrong type keeps the default")
H.eq(50, options.view.lines, "a valid sibling applies")
H.eq("S", options.panel.keys.send, "a key is overridden")
H.eq("c", options.panel.keys.cancel, "the other keys stay")
H.eq("notify", options.permission_prompt, "a value out of its set keeps the default")
table.sort(problems)
H.eq(4, #problems, "four problems: " .. table.concat(problems, " | "))
H.find_line(problems, "unknown option colour (ignored)", "unknown key")
H.find_line(problems, "unknown option panel.keys.bogus", "unknown action key")
H.find_line(problems, "option view.keep:", "wrong type")
H.find_line(problems, "option permission_prompt:", "not one of")
for _, problem in ipairs(problems) do
  H.eq(nil, problem:find("\n"), "one line: " .. problem)
end

-- setup(): warns once per problem, is safe twice, stays offline without a daemon.
local sessiond = require("sessiond")
H.eq("", sessiond.status(), "status before setup")
local offline = { socket = "/tmp/sessiond-test-nothing-here.sock", autostart = false, colour = "blue" }
H.truthy(sessiond.setup(offline), "setup returns true")
H.wait("the first connection attempt to fail", function()
  return sessiond.model.connection == "offline" and require("sessiond.client").state.last_error ~= nil
end)
H.eq("sessiond: offline", sessiond.status(), "offline status")
local generation = require("sessiond.client").state.generation
H.truthy(sessiond.setup(offline), "setup again")
H.eq(
  1,
  H.count_lines(
    vim.tbl_map(function(n)
      return n.message
    end, H.notes),
    "unknown option colour"
  ),
  "the unknown option is reported once"
)
H.eq(generation, require("sessiond.client").state.generation, "the same options do not reconnect")
H.eq(1, #vim.api.nvim_get_autocmds({ group = "sessiond", event = "VimLeavePre" }), "autocmds are not doubled")
H.truthy(
  sessiond.setup(vim.tbl_extend("force", offline, { socket = "/tmp/sessiond-test-elsewhere.sock" })),
  "setup with another socket"
)
H.truthy(require("sessiond.client").state.generation > generation, "another socket reconnects")

-- The statusline text works in a real statusline format.
vim.g.sessiond_status = nil
H.wait("g:sessiond_status", function()
  return vim.g.sessiond_status == "sessiond: offline"
end)
H.eq("sessiond: offline", vim.api.nvim_eval_statusline("%{%v:lua.require'sessiond'.status()%}", {}).str, "eval")

-- The help: generated part fresh, tags valid, :help sessiond opens.
local gendoc = dofile(H.repo .. "/clients/nvim/scripts/gendoc.lua")
local doc_path = H.repo .. "/clients/nvim/doc/sessiond.txt"
local doc = vim.fn.readfile(doc_path)
H.eq(
  gendoc.regenerate(doc, config.doc_lines()),
  doc,
  "doc/sessiond.txt is stale: run nvim --clean -l clients/nvim/scripts/gendoc.lua"
)
for i, line in ipairs(doc) do
  H.truthy(vim.fn.strdisplaywidth(line) <= 78, ("doc line %d is wider than 78 columns: %s"):format(i, line))
end
local docdir = vim.fn.tempname()
vim.fn.mkdir(docdir .. "/doc", "p")
vim.fn.writefile(doc, docdir .. "/doc/sessiond.txt")
vim.cmd("helptags " .. vim.fn.fnameescape(docdir .. "/doc"))
vim.opt.rtp:append(docdir)
for _, tag in ipairs({
  "sessiond",
  "sessiond-options",
  ":Sessiond-send",
  "g:sessiond_status",
  "sessiond-option-view.keep",
  ":Sessiond-side",
  ":Sessiond-tasks",
  ":Sessiond-restart",
  "sessiond-tasks",
  "sessiond-option-tasks.keys",
}) do
  vim.cmd("help " .. tag)
  H.truthy(vim.api.nvim_buf_get_name(0):match("sessiond%.txt$"), ":help " .. tag .. " opens sessiond.txt")
  vim.cmd("helpclose")
end
-- Every |link| in the doc points at a tag that exists (here or in Neovim's help).
for _, line in ipairs(doc) do
  for link in line:gmatch("|([^|%s]+)|") do
    H.truthy(vim.tbl_contains(vim.fn.getcompletion(link, "help"), link), "unknown help tag |" .. link .. "|")
  end
end

-- Completion.
local subcommands = vim.fn.getcompletion("Sessiond ", "cmdline")
for _, name in ipairs({
  "panel",
  "new",
  "send",
  "side",
  "tasks",
  "next",
  "prev",
  "cancel",
  "close",
  "open",
  "answer",
  "merge",
  "connect",
  "restart",
}) do
  H.truthy(vim.tbl_contains(subcommands, name), "completion offers " .. name)
end
H.eq({ "new", "next" }, vim.fn.getcompletion("Sessiond ne", "cmdline"), "completion by prefix")
H.truthy(vim.tbl_contains(vim.fn.getcompletion("Sessiond new ", "cmdline"), "here"), "placements complete")
H.eq({ "worktree" }, vim.fn.getcompletion("Sessiond new wo", "cmdline"), "placement by prefix")

-- :Sessiond send's prompt: the text, the selected lines, or both.
local commands = require("sessiond.commands")
vim.cmd("enew")
vim.api.nvim_buf_set_lines(0, 0, -1, false, { "local x = 1", "return x" })
vim.bo.filetype = "lua"
H.eq("say hi", commands.prompt_from({ args = "send say hi", range = 0 }), "text only")
H.eq("local x = 1\nreturn x", commands.prompt_from({ args = "send", range = 2, line1 = 1, line2 = 2 }), "lines only")
H.eq(
  "explain this\n\n[No Name]:2-2:\n```lua\nreturn x\n```",
  commands.prompt_from({ args = "send explain this", range = 1, line1 = 2, line2 = 2 }),
  "text and lines"
)

-- An unknown subcommand says so in one line.
vim.cmd("Sessiond frobnicate")
H.find_line(
  vim.tbl_map(function(n)
    return n.message
  end, H.notes),
  'no subcommand "frobnicate"',
  "unknown subcommand"
)

H.done("config")
