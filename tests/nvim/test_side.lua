-- Side chats and suggested tasks: :Sessiond side beside a session that ran
-- turns (its answer in the side chat's view, its line under the main session
-- in the panel, closed with C); tasks suggested with task/suggest, listed by
-- :Sessiond tasks and kept current by task.changed events, accepted (running,
-- then done, its session under the suggesting one) and dismissed with a reason.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({})
local model = sessiond.model

-- A main session with two turns.
local main = H.open_sessions(1)[1]
model:set_current(main)
local first = H.send(main, "say hi")
H.wait("the first turn", function()
  return first.done
end)
local second = H.send(main, "plan a | b")
H.wait("the second turn", function()
  return second.done
end)
H.eq(nil, second.err, "the plan turn")

-- :Sessiond side asks beside the current session; the side chat's view shows the answer.
vim.cmd("Sessiond side history")
local side
H.wait("the side chat to open", function()
  for _, info in ipairs(model:ordered()) do
    if info.kind == "side" and info.parent == main then
      side = info.id
      return true
    end
  end
  return false
end)
H.wait("the side chat's view", function()
  return vim.api.nvim_buf_get_name(0) == "sessiond://session/" .. side
end)
local side_buf = vim.api.nvim_get_current_buf()
-- Forked at the agent, the side chat has the main session's turns; else an account of them.
H.wait_lines(side_buf, { "Side chat of " .. main, "> history" }, "the side chat's header and question")
H.wait("the side chat's answer", function()
  local lines = H.lines(side_buf)
  return H.count_lines(lines, "1. say hi") > 0 or H.count_lines(lines, "No earlier turns.") > 0
end)
H.wait_status(side, "idle")
H.eq(2, H.session(main).turns, "the main session is untouched")

-- The panel lists it under its main session, indented, named by its kind.
vim.cmd("Sessiond panel")
local panel = require("sessiond.panel").buffer()
H.wait_lines(panel, { "    ○ side " .. side }, "the side chat's line")
local lines = H.lines(panel)
local main_row = H.find_line(lines, "  ○ " .. main .. " ", "the main session's line")
local side_row = H.find_line(lines, "    ○ side " .. side, "the side chat's line")
H.eq(main_row + 1, side_row, "the side chat right under its main session")

-- C closes it like any session.
vim.api.nvim_win_set_cursor(0, { side_row, 0 })
H.press("C")
H.wait("the side chat to close", function()
  return H.session(side) == nil and H.count_lines(H.lines(panel), " side ") == 0
end)

-- The panel's S asks a side chat too (the question with vim.ui.input).
vim.ui.input = function(_, on_confirm)
  on_confirm("say from the panel's side")
end
vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(panel), "  ○ " .. main .. " ", "main"), 0 })
H.press("S")
local side2
H.wait("a second side chat", function()
  for _, info in ipairs(model:ordered()) do
    if info.kind == "side" and info.parent == main and info.id ~= side then
      side2 = info.id
      return true
    end
  end
  return false
end)
H.wait_lines(panel, { "side " .. side2 }, "the second side chat in the panel")
H.wait("its view to show the answer", function()
  local view = vim.fn.bufnr("sessiond://session/" .. side2)
  return view ~= -1 and H.count_lines(H.lines(view), "from the panel's side") > 0
end)

-- Tasks: suggested through the plugin's client; task.changed brings them in.
local function suggest(title, prompt)
  local task = H.request("task/suggest", { title = title, prompt = prompt, why = "a test", fromSession = main })
  H.wait("task " .. task.id .. " in the model", function()
    return model.tasks[task.id] ~= nil and model.tasks[task.id].status == "suggested"
  end)
  return task.id
end
local run = suggest("Run it", "say task started\nsleep 1.5\nsay task finished")
local skip = suggest("Skip it", "say never")
local later = suggest("Later", "say never either")

vim.cmd("Sessiond tasks")
local tasks = require("sessiond.tasks").buffer()
H.eq(tasks, vim.api.nvim_get_current_buf(), "the tasks list has the focus")
H.wait_lines(tasks, { "Tasks: 3 suggested", "? suggested " .. run .. "  Run it · a test" }, "the tasks list")
H.truthy(H.find_line(H.lines(tasks), later, "newest") < H.find_line(H.lines(tasks), run, "oldest"), "newest first")

-- Completion offers the verbs and the suggested tasks.
H.eq({ "accept", "dismiss" }, vim.fn.getcompletion("Sessiond tasks ", "cmdline"), "task verbs")
local ids = vim.fn.getcompletion("Sessiond tasks accept ", "cmdline")
table.sort(ids)
local wanted = { run, skip, later }
table.sort(wanted)
H.eq(wanted, ids, "suggested task ids complete")

-- a accepts the task under the cursor: it runs in a session of its own, then is done.
vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(tasks), run, "run's line"), 0 })
H.press("a")
H.wait_lines(tasks, { "● running   " .. run }, "the task running")
local task_session = model.tasks[run].session
H.truthy(task_session, "the running task has a session")
H.wait_lines(tasks, { "✓ done      " .. run .. "  Run it → " .. task_session }, "the task done")
H.eq("task", H.session(task_session).kind, "the task's session kind")
H.wait_lines(panel, { "    ○ task " .. task_session .. " Run it" }, "the task's session under its suggester")

-- :Sessiond tasks dismiss with a reason; d asks for one.
vim.cmd("Sessiond tasks dismiss " .. skip .. " not now, thanks")
H.wait_lines(tasks, { "· dismissed " .. skip .. "  Skip it (not now, thanks)" }, "dismissed by the command")
vim.ui.input = function(opts, on_confirm)
  H.truthy(opts.prompt:find(later, 1, true), "the input names the task: " .. opts.prompt)
  on_confirm("maybe later")
end
vim.api.nvim_set_current_win(vim.fn.win_findbuf(tasks)[1])
vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(tasks), later, "later's line"), 0 })
H.press("d")
H.wait_lines(tasks, { "· dismissed " .. later .. "  Later (maybe later)" }, "dismissed with the key")
H.eq("maybe later", model.tasks[later].reason, "the reason in the model")
H.wait_lines(tasks, { "Tasks: 1 done · 2 dismissed" }, "the summary")

-- A task no longer suggested is refused by the daemon, in one line.
vim.cmd("Sessiond tasks accept " .. skip)
H.wait("the refusal", function()
  for _, note in ipairs(H.notes) do
    if note.message:find("could not accept " .. skip, 1, true) then
      return true
    end
  end
  return false
end)

H.done("side")
