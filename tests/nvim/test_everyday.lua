-- What a day in Neovim turned up (issue 15): permission requests that never
-- take the keyboard, `a` answering the row's own request, one label rule,
-- `C` asking first, the compose buffer, sentences instead of protocol hints,
-- <Plug> mappings, and marks for cancelled and failed turns in the view.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local picks = H.capture_select()
local sessiond = H.setup({})
local function notes()
  return vim.tbl_map(function(n)
    return n.message
  end, H.notes)
end
local function last_note()
  return H.notes[#H.notes] and H.notes[#H.notes].message or ""
end

-- <Plug> mappings for the actions.
for _, name in ipairs({ "panel", "new", "send", "side", "tasks", "next", "prev", "cancel", "close", "open", "answer", "merge" }) do
  H.truthy(vim.fn.maparg(("<Plug>(sessiond-%s)"):format(name), "n") ~= "", "<Plug>(sessiond-" .. name .. ")")
end
H.truthy(vim.fn.maparg("<Plug>(sessiond-send)", "x") ~= "", "<Plug>(sessiond-send) in visual mode")

-- Clear sentences.
vim.cmd("Sessiond open")
H.truthy(last_note():find("which session? :Sessiond open {session}", 1, true), ":Sessiond open alone: " .. last_note())
H.eq(nil, last_note():find("nil", 1, true), "no nil")
H.wait("the agents", function()
  return #sessiond.model.agent_order > 0
end)
vim.cmd("Sessiond new badplacement")
H.truthy(last_note():find('"badplacement" is neither a placement (here, worktree', 1, true), last_note())
vim.cmd("Sessiond cancel s99")
H.wait("the daemon's answer", function()
  return last_note():find("could not cancel s99", 1, true) ~= nil
end)
H.truthy(last_note():find(":Sessiond panel lists the open sessions", 1, true), last_note())
H.eq(nil, last_note():find("session/list", 1, true), "no protocol hint: " .. last_note())
H.eq(
  "no agent named 'x' (known: demo); add it to /c/agents.toml (read when the daemon starts)",
  require("sessiond.actions").humane(
    "no agent named 'x' (known: demo); add it to /c/agents.toml (read when the daemon starts), "
      .. "or create it with agent/create"
  ),
  "agent/create"
)
H.eq(
  "session 's3' is closed; reopen it with :Sessiond reopen s3, or open a new one with :Sessiond new",
  require("sessiond.actions").humane(
    "session 's3' is closed; reopen it with session/reopen (`sessiond reopen s3`), "
      .. "or open a new one with session/open (`sessiond new`)"
  ),
  "session/reopen, session/open"
)

-- A permission request: a notification and marks, no picker (the default).
local ids = H.open_sessions(2)
H.request("session/open", { root = vim.fn.getcwd(), title = "job 7" })
local titled
H.wait("the titled session", function()
  for _, info in pairs(sessiond.model.sessions) do
    if info.title == "job 7" then
      titled = info.id
      return true
    end
  end
end)
vim.cmd("Sessiond panel")
local panel_buf = require("sessiond.panel").buffer()
local asking = H.send(titled, "ask may I?\nsay after")
H.wait("needs you", function()
  return H.status():find("1 needs you", 1, true) ~= nil
end)
H.wait("the notification", function()
  return H.count_lines(notes(), ("job 7 (%s) asks: may I? (:Sessiond answer)"):format(titled)) == 1
end)
H.eq(0, #picks, "no picker by default")
H.wait_lines(panel_buf, { "asks: may I? (a answers)" }, "the panel marks the row")
local function row(id)
  return (H.find_line(H.lines(panel_buf), " " .. id .. " ", "row of " .. id))
end
-- `a` on a row without a request: says so, answers nothing.
vim.api.nvim_win_set_cursor(0, { row(ids[1]), 0 })
H.press("a")
H.eq(ids[1] .. " has no permission request waiting", last_note():gsub("^sessiond: ", ""), "a on another row")
H.eq(0, #picks, "no picker for another session's request")
-- `a` on its row: the picker, labelled by the one rule.
vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(panel_buf), "asks: may I?", "the asking row"), 0 })
H.press("a")
H.eq(1, #picks, "a on the asking row")
H.truthy(picks[1].opts.prompt:find(("job 7 (%s) asks: may I?"):format(titled), 1, true), picks[1].opts.prompt)
picks[1].on_choice(picks[1].items[1])
H.wait("the turn", function()
  return asking.done
end)

-- select: not while typing; once back in normal mode.
sessiond.setup({ permission_prompt = "select" })
local get_mode = vim.api.nvim_get_mode
vim.api.nvim_get_mode = function()
  return { mode = "i", blocking = false }
end
asking = H.send(ids[2], "ask now?")
H.wait("needs you again", function()
  return H.status():find("1 needs you", 1, true) ~= nil
end)
vim.wait(300)
H.eq(1, #picks, "no picker while typing")
vim.api.nvim_get_mode = get_mode
vim.api.nvim_exec_autocmds("ModeChanged", { pattern = "i:n" })
H.wait("the picker in normal mode", function()
  return #picks == 2
end)
picks[2].on_choice(picks[2].items[2])
H.wait("the second turn", function()
  return asking.done
end)
sessiond.setup({})

-- C asks before closing a working session.
local hang = H.send(ids[2], "say busy\nhang")
H.wait_status(ids[2], "working")
local asked
vim.fn.confirm = function(question)
  asked = question
  return 2
end
vim.api.nvim_win_set_cursor(0, { row(ids[2]), 0 })
H.press("C")
H.truthy(asked and asked:find("Close ask now? (" .. ids[2] .. ")? It is working", 1, true), "asked: " .. tostring(asked))
vim.wait(300)
H.truthy(H.session(ids[2]), "kept when the answer is no")
local view = require("sessiond.view").show(ids[2])
vim.cmd("Sessiond cancel " .. ids[2])
H.wait("the hanging turn", function()
  return hang.done
end)
H.wait_lines(view.buf, { "── cancelled ──" }, "a cancelled turn's mark")
local failing = H.send(ids[2], "say trying\nfail it broke")
H.wait("the failing turn", function()
  return failing.done
end)
H.wait_lines(view.buf, { "── failed: ", "it broke ──" }, "a failed turn's mark")
asked = nil
vim.cmd("Sessiond panel")
vim.api.nvim_win_set_cursor(0, { row(ids[1]), 0 })
H.press("C")
H.eq(nil, asked, "an idle session closes without asking")
H.wait("the idle session to close", function()
  return H.session(ids[1]) == nil
end)

-- s: a compose buffer; :w sends it (several lines), an empty one sends nothing.
vim.api.nvim_win_set_cursor(0, { row(ids[2]), 0 })
H.press("s")
vim.cmd("stopinsert")
local compose = vim.api.nvim_get_current_buf()
H.eq("sessiond://compose/" .. ids[2], vim.api.nvim_buf_get_name(compose), "the compose buffer")
vim.api.nvim_buf_set_lines(compose, 0, -1, false, { "say first line", "say second line" })
vim.cmd("write")
H.wait("the compose buffer to go", function()
  return not vim.api.nvim_buf_is_valid(compose)
end)
H.wait_lines(view.buf, { "first line", "second line" }, "both lines sent as one prompt")
H.wait("the composed turn to end", function()
  return H.session(ids[2]).turns == 4
end)
local turns = H.session(ids[2]).turns
vim.cmd("Sessiond panel")
vim.api.nvim_win_set_cursor(0, { row(ids[2]), 0 })
H.press("s")
vim.cmd("stopinsert")
vim.cmd("write")
H.truthy(last_note():find("nothing sent to " .. ids[2], 1, true), last_note())
vim.wait(300)
H.eq(turns, H.session(ids[2]).turns, "an empty prompt is not sent")

-- <Plug> mappings on keys of the person's own, run: the panel, the selected lines sent as one
-- prompt to the current session, and `answer` with nothing waiting.
vim.keymap.set("n", "gsp", "<Plug>(sessiond-panel)")
vim.keymap.set("x", "gss", "<Plug>(sessiond-send)")
vim.keymap.set("n", "gsa", "<Plug>(sessiond-answer)")
vim.cmd("enew")
local scratch = vim.api.nvim_get_current_buf()
H.press("gsp")
H.eq(require("sessiond.panel").buffer(), vim.api.nvim_get_current_buf(), "<Plug>(sessiond-panel) opens the panel")
vim.api.nvim_set_current_buf(scratch)
vim.api.nvim_buf_set_lines(scratch, 0, -1, false, { "say mapped one", "say mapped two", "not this line" })
sessiond.model:set_current(ids[2])
H.press("ggVjgss")
H.wait("the selection's turn", function()
  return H.session(ids[2]).turns == turns + 1 and H.session(ids[2]).status == "idle"
end)
H.wait_lines(view.buf, { "mapped one", "mapped two" }, "both selected lines, as one turn")
H.eq(0, H.count_lines(H.lines(view.buf), "not this line"), "the line outside the selection")
H.press("gsa")
H.truthy(last_note():find("no permission request is waiting", 1, true), "<Plug>(sessiond-answer): " .. last_note())

-- Renaming: :Sessiond rename with a title, and the panel's R asking for one (its title to edit).
vim.cmd("Sessiond rename " .. ids[2] .. " The careful one")
H.wait("the rename", function()
  return H.session(ids[2]).title == "The careful one"
end)
local asked_default
vim.ui.input = function(opts, on_confirm)
  asked_default = opts.default
  on_confirm("Renamed from the panel")
end
vim.cmd("Sessiond panel")
vim.api.nvim_win_set_cursor(0, { row(ids[2]), 0 })
H.press("R")
H.eq("The careful one", asked_default, "R offers the title to edit")
H.wait_lines(require("sessiond.panel").buffer(), { ids[2] .. " Renamed from t" }, "the panel's line (its label cut)")
H.eq("Renamed from the panel", H.session(ids[2]).title, "the daemon's title")
asked_default = nil
vim.cmd("Sessiond rename " .. ids[2] .. "   ")
H.eq("Renamed from the panel", asked_default, "blanks for a title: asked, not blanked")

-- Reopening: a closed session leaves the model; :Sessiond reopen {id} brings it back as it was
-- (its turns, its title) and shows it; with no id it offers those closed last to pick from.
local before = H.session(ids[2]).turns
local notes_before_close = #H.notes
vim.cmd("Sessiond close " .. ids[2])
H.wait("the close", function()
  return H.session(ids[2]) == nil
end)
-- Said, with the way back (`C` in the panel is one key).
H.wait_note(
  ("closed Renamed from the panel (%s) (:Sessiond reopen %s brings it back)"):format(ids[2], ids[2]),
  notes_before_close + 1
)
vim.cmd("Sessiond reopen " .. ids[2])
H.wait("the reopen", function()
  return H.session(ids[2]) ~= nil
end)
H.eq({ "idle", before, "Renamed from the panel" }, {
  H.session(ids[2]).status,
  H.session(ids[2]).turns,
  H.session(ids[2]).title,
}, "as it was")
H.truthy(last_note():find("reopened Renamed from the panel", 1, true), last_note())
H.eq(ids[2], sessiond.model.current, "and current")
local offered
vim.ui.select = function(items, opts, on_choice)
  offered = vim.tbl_map(opts.format_item, items)
  on_choice(items[1])
end
vim.cmd("Sessiond close " .. ids[1])
H.wait("the close", function()
  return H.session(ids[1]) == nil
end)
vim.cmd("Sessiond reopen")
H.wait("the reopen picked", function()
  return H.session(ids[1]) ~= nil
end)
H.truthy(offered[1]:find("^" .. ids[1] .. " "), "the one closed last first: " .. vim.inspect(offered))
vim.cmd("Sessiond close " .. ids[2])
H.wait("the close", function()
  return H.session(ids[2]) == nil
end)
require("sessiond.actions").send("say again", ids[2])
H.wait("the refusal", function()
  return last_note():find("is closed", 1, true) ~= nil
end)
H.truthy(last_note():find("reopen it with :Sessiond reopen " .. ids[2], 1, true), last_note())

H.done("everyday")
