-- A turn of the demo agent seen from Neovim: the status line before, during
-- and after it, LSP progress, the session view (plan, changed files,
-- transcript), the panel's line, :checkhealth, and the views kept.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local record = H.record_updates()
local sessiond = H.setup({})
H.eq("socket", require("sessiond.client").state.transport, "connected over the socket")

-- Before: nothing open.
H.wait("the snapshot's fleet", function()
  return H.status() == "0 open"
end)

-- :Sessiond new opens a session here and makes it current.
vim.cmd("Sessiond new")
H.wait("the new session in the status line", function()
  return H.status() == "1 open │ s1"
end)
local id = sessiond.model.current
H.eq("s1", id, "current session")
H.eq(vim.fn.getcwd(), H.session(id).root, "rooted at the working directory")
vim.cmd("only")

-- :[range]Sessiond send: the selected lines are the prompt (a demo script).
local script = vim.api.nvim_create_buf(true, false)
vim.api.nvim_set_current_buf(script)
vim.api.nvim_buf_set_lines(script, 0, -1, false, {
  "plan Read | Write",
  "progress 1 in_progress",
  "write f.txt hi",
  "usage 84000 200000 0.25",
  "say halfway there",
  "hang",
})
vim.cmd("1,6Sessiond send")

-- During: working, plan 0/2, 42 % of the context, one changed file; the session is named by its
-- first prompt's first line (the daemon's session.titled).
local during = "1 working · 1 open │ plan Read | Write: plan 0/2 · ctx 42% · 1 file"
H.wait("the status line during the turn", function()
  return H.status() == during
end)
H.wait("g:sessiond_status to follow", function()
  return vim.g.sessiond_status == during
end)
H.eq(1, vim.g.sessiond_status_dict.working, "g:sessiond_status_dict.working")
H.eq("0/2", vim.g.sessiond_status_dict.session.plan, "g:sessiond_status_dict.session.plan")
H.eq(during:gsub("%%", "%%%%"), sessiond.status(), "status() is escaped for a statusline format")
H.eq(
  during,
  vim.api.nvim_eval_statusline("%{%v:lua.require'sessiond'.status()%}", { maxwidth = 200 }).str,
  "in a statusline"
)
H.truthy(record.updates > 0, "User SessiondUpdate fired")

-- LSP progress: a begin from the "sessiond" client, titled with the session.
H.wait("LSP progress to begin", function()
  return #record.progress > 0
end)
H.eq({ client = "sessiond", kind = "begin", title = "sessiond s1" }, {
  client = record.progress[1].client,
  kind = record.progress[1].kind,
  title = record.progress[1].title,
}, "progress begin")

-- The session view: plan, changed file, transcript tail, live.
vim.cmd("Sessiond open s1")
local view_buf = vim.api.nvim_get_current_buf()
H.eq("sessiond://session/s1", vim.api.nvim_buf_get_name(view_buf), "view buffer")
H.lines_debug = view_buf
H.wait("the view's transcript", function()
  local lines = H.lines(view_buf)
  return H.count_exact(lines, "halfway there") == 1 and H.count_exact(lines, "* [edit] Write f.txt") == 1
end)
H.wait_lines(view_buf, {
  "Status: working",
  "Plan 0/2",
  "  [>] Read",
  "  [ ] Write",
  "Context: 42% (84,000 of 200,000 tokens) · 0.25 USD",
  "Changed files: 1 (+1 -0)",
  "  A f.txt  +1 -0",
}, "the view's header")
local lines = H.lines(view_buf)
H.find_line(lines, "> plan Read | Write", "the prompt in the transcript")
H.find_line(lines, " · 0 turns ended", "its first turn runs, none has ended")
H.eq(1, H.count_exact(lines, "> hang"), "each prompt line once")

-- :Sessiond cancel. After: idle counts, the insight stays.
vim.cmd("Sessiond cancel")
local after = "1 open │ plan Read | Write: plan 0/2 · ctx 42% · 1 file"
H.wait("the status line after the turn", function()
  return H.status() == after
end)
H.wait("LSP progress to end", function()
  return record.progress[#record.progress].kind == "end"
end)
H.eq("cancelled", record.progress[#record.progress].message, "progress ends with the stop reason")
H.wait_status(id, "stopped")

-- A second turn, live into the open view: the plan completes.
local turn = H.send(id, "progress 1 completed\nsay first\nprogress 2 completed\nthink pondering\nsay all done")
H.wait("the second turn", function()
  return turn.done
end)
H.eq(nil, turn.err, "second turn error")
H.eq("end_turn", turn.result.stopReason, "second turn stop reason")
-- (A turn without `usage` ends with the demo agent's own estimate: 44 tokens, 0 %.)
H.wait("plan 2/2 in the status line", function()
  return H.status() == "1 open │ plan Read | Write: plan 2/2 · ctx 0% · 1 file"
end)
H.wait("the view to show the end of the second turn", function()
  local now = H.lines(view_buf)
  return H.count_exact(now, "all done") == 1 and H.count_lines(now, "[x] Write") == 1
end)
H.eq(1, H.count_exact(H.lines(view_buf), "halfway there"), "no line twice in the live view")
H.eq(1, H.count_exact(H.lines(view_buf), "~ pondering"), "the agent's thought")
local shown_now = H.lines(view_buf)
local said_at = vim.fn.index(shown_now, "all done") + 1 -- the reply's line, not the prompt's
-- The words after the thought are a new message (the daemon puts a paragraph break before them).
H.eq("~ pondering", shown_now[said_at - 1], "no empty line between a thought and the next words")

-- A tool call named by its tool first and by what it does once its input has streamed (as
-- claude-agent-acp and opencode do; the demo agent does not): its line takes the later title.
local function tool_event(call, title, first)
  require("sessiond.view").on_event({
    kind = "turn.tool",
    session = id,
    turn = "t-retitled",
    data = { toolCallId = call, title = title, toolKind = "execute", first = first },
  })
end
tool_event("c1", "Terminal", true)
H.wait("the call's first title", function()
  return H.count_exact(H.lines(view_buf), "* [execute] Terminal") == 1
end)
tool_event("c1", "pwd > where.txt", false)
tool_event("c2", "Terminal", true) -- another call: the first one's line is done
tool_event("c1", "pwd (too late)", false)
tool_event("c2", "ls", false)
H.wait("the calls' later titles", function()
  return H.count_exact(H.lines(view_buf), "* [execute] ls") == 1
end)
local retitled = H.lines(view_buf)
H.eq(1, H.count_exact(retitled, "* [execute] pwd > where.txt"), "the first call retitled")
H.eq(0, H.count_exact(retitled, "* [execute] Terminal"), "no line keeps the tool's name")
H.eq(0, H.count_exact(retitled, "* [execute] pwd (too late)"), "nor takes a title after the next call")
require("sessiond.view").on_event({ kind = "turn.ended", session = id, turn = "t-retitled", data = {} })

-- The panel's line for the session.
vim.cmd("Sessiond panel")
local panel_lines = H.lines(require("sessiond.panel").buffer())
H.find_line(panel_lines, "demo · running · 1 session", "agent line")
local _, line = H.find_line(panel_lines, "s1", "session line")
H.truthy(line:find("all done", 1, true), "the 32-column panel's line says the last line: " .. line)
-- A panel with the room shows every column.
_, line = H.find_line(require("sessiond.panel").lines(require("sessiond").model, 100), "s1", "a wide line")
H.truthy(
  line:find("idle", 1, true)
    and line:find("plan 2/2", 1, true)
    and line:find("0%", 1, true)
    and line:find("1 file", 1, true)
    and line:find("all done", 1, true),
  "session line content: " .. line
)
vim.cmd("close")

-- Enter on the changed file (the root is not in git: the file itself opens).
vim.api.nvim_set_current_buf(view_buf)
local file_row = H.find_line(H.lines(view_buf), "  A f.txt", "file line")
vim.api.nvim_win_set_cursor(0, { file_row, 0 })
H.press("<CR>")
H.wait("f.txt to open", function()
  return vim.api.nvim_buf_get_name(0):match("/f%.txt$") ~= nil
end)
H.eq({ "hi" }, H.lines(0), "the agent's file")
vim.cmd("tabclose")

-- :checkhealth sessiond
vim.cmd("checkhealth sessiond")
local health = table.concat(H.lines(0), "\n")
for _, wanted in ipairs({ "OK Neovim 0.11", "connected over socket to sessiond", "OK socket: ", "OK demo: running" }) do
  H.truthy(health:find(wanted, 1, true), ("checkhealth shows %q in:\n%s"):format(wanted, health))
end
vim.cmd("bwipeout")
vim.cmd("only | enew") -- no view on screen: views on screen are never wiped

-- The views kept: the last eight, each with at most view.lines transcript lines.
sessiond.setup({ view = { lines = 5 } })
local ids = H.open_sessions(9)
local view = require("sessiond.view")
for _, other in ipairs(ids) do
  view.get(other)
end
local kept = vim.tbl_map(function(v)
  return v.session
end, view.list())
H.eq(8, #kept, "eight views kept")
H.eq(vim.list_slice(ids, 2), kept, "the oldest was wiped")
local long = H.send(ids[9], "say 1\nsay 2\nsay 3\nsay 4\nsay 5\nsay 6\nsay 7")
H.wait("the long turn", function()
  return long.done
end)
local last_view = view.list()[8]
H.wait("the last lines in the view", function()
  local now = H.lines(last_view.buf)
  return now[#now] == "7"
end)
local tail = H.lines(last_view.buf)
H.eq({ "3", "4", "5", "6", "7" }, vim.list_slice(tail, #tail - 4), "the last five lines")
H.eq(5, #tail - last_view.header_len, "no more than view.lines transcript lines")

-- A resync (the daemon's answer to a client that fell too far behind)
-- replaces the model with its snapshot and reads the views' transcripts again.
local client = require("sessiond.client")
local lsp_client = client.lsp_client()
local function deliver(params)
  params.subscription = client.state.subscription
  lsp_client.handlers["events/notify"](nil, params, { method = "events/notify" })
end
local probe = H.request("events/subscribe", { snapshot = true, kinds = { "agent.removed" } })
H.request("events/unsubscribe", { subscription = probe.subscription })
local before_ghost = H.status()
sessiond.model:merge_sessions({ { id = "ghost", agent = "demo", status = "working", createdAt = "z" } })
H.eq(true, H.status():find("^1 working") ~= nil, "the ghost counts")
deliver({ events = {}, resync = probe.snapshot, through = probe.snapshot.head })
H.eq(nil, sessiond.model:session("ghost"), "the resync dropped what the daemon does not have")
H.eq(before_ghost, H.status(), "the status line as before")
H.wait("the view to be read again", function()
  return not last_view.loading and H.lines(last_view.buf)[#H.lines(last_view.buf)] == "7"
end)
H.eq(1, H.count_exact(H.lines(last_view.buf), "7"), "the transcript once after the resync")

-- An overflow: subscribe again from the last seq applied.
local subscribed = {}
local request = client.request
client.request = function(method, params, callback)
  if method == "events/subscribe" then
    subscribed[#subscribed + 1] = params
  end
  return request(method, params, callback)
end
local seq = sessiond.model.seq
deliver({ events = {}, overflow = "this client fell 10000 events behind", through = seq })
H.wait("a new subscription", function()
  return #subscribed == 1 and client.state.subscription ~= nil
end)
H.eq({ since = seq }, subscribed[1], "resubscribed from the last seq")
local again = H.send(ids[1], "say still here")
H.wait("a turn after resubscribing", function()
  return again.done and H.session(ids[1]).lastLine == "still here"
end)

H.done("turn")
