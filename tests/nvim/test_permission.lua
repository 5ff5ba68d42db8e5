-- Permission requests: "needs you" in the status line until answered; the
-- answer through the daemon's session/requestPermission, through
-- permission/answer, later with :Sessiond answer, and one answered elsewhere.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local picks = H.capture_select()
local sessiond = H.setup({ permission_prompt = "select" })
local client = require("sessiond.client")

-- Spy on the requests the plugin sends.
local sent = {}
local request = client.request
client.request = function(method, params, callback)
  sent[#sent + 1] = method
  return request(method, params, callback)
end

local function transcript_has(id, text)
  local lines = H.request("session/transcript", { session = id, limit = 50 }).lines
  for _, line in ipairs(lines) do
    if line.text == text then
      return true
    end
  end
  return false
end

local function ask(id, question)
  local before = #picks
  local turn = H.send(id, "ask " .. question .. "\nsay after " .. question)
  H.wait("the picker for " .. question, function()
    return #picks > before
  end)
  return picks[#picks], turn
end

-- 1. Through session/requestPermission (answer_permissions is on by default).
local id = H.open_sessions(1)[1]
sessiond.model:set_current(id)
local pick, turn = ask(id, "first?")
H.eq(
  { "Allow", "Reject" },
  vim.tbl_map(function(o)
    return pick.opts.format_item(o)
  end, pick.items),
  "the agent's options"
)
H.truthy(pick.opts.prompt:find("asks: first?", 1, true), "the question in the prompt: " .. pick.opts.prompt)
H.wait("needs you in the status line", function()
  return H.status():find("^1 needs you · 1 open") ~= nil
end)
local view = require("sessiond.view").show(id)
H.wait_lines(view.buf, { "Needs you: first?" }, "the request in the view")
pick.on_choice(pick.items[1])
H.wait("the turn to finish", function()
  return turn.done
end)
H.eq(nil, turn.err, "turn error")
H.eq(true, transcript_has(id, 'Asked "first?": Allow'), "the agent heard Allow")
H.eq(false, vim.tbl_contains(sent, "permission/answer"), "answered as the request's response")
H.wait("needs you to go", function()
  return not H.status():find("needs you", 1, true)
end)

-- 2. Through the event log and permission/answer (answer_permissions off: a new connection).
local generation = client.state.generation
sessiond.setup({ answer_permissions = false, permission_prompt = "select" })
H.wait("the new connection", function()
  return client.state.generation > generation and sessiond.model.connection == "online"
end)
pick, turn = ask(id, "second?")
pick.on_choice(pick.items[2])
H.wait("the second turn", function()
  return turn.done
end)
H.eq(true, transcript_has(id, 'Asked "second?": Reject'), "the agent heard Reject")
H.eq(true, vim.tbl_contains(sent, "permission/answer"), "answered with permission/answer")

-- 3. permission_prompt = "notify": no picker until :Sessiond answer.
sessiond.setup({ answer_permissions = false, permission_prompt = "notify" })
local before = #picks
turn = H.send(id, "ask third?\nsay after third")
H.wait("needs you", function()
  return H.status():find("^1 needs you") ~= nil
end)
H.wait("the notification", function()
  return H.count_lines(
    vim.tbl_map(function(n)
      return n.message
    end, H.notes),
    "asks: third? (:Sessiond answer)"
  ) == 1
end)
H.eq(before, #picks, "no picker in notify mode")
-- A session named is the one meant: not another's request.
local other = H.open_sessions(1)[1]
local function said(text)
  return H.count_lines(
    vim.tbl_map(function(n)
      return n.message
    end, H.notes),
    text
  ) > 0
end
vim.cmd("Sessiond answer s999")
H.truthy(said("there is no open session s999"), "an unknown session is said")
vim.cmd("Sessiond answer " .. other)
H.truthy(said(other .. " has no permission request waiting"), "another session's is not answered")
H.eq(before, #picks, "no picker for either")
vim.cmd("Sessiond answer")
H.eq(before + 1, #picks, ":Sessiond answer opens the picker")
picks[#picks].on_choice(picks[#picks].items[1])
H.wait("the third turn", function()
  return turn.done
end)
H.eq(true, transcript_has(id, 'Asked "third?": Allow'), "answered through :Sessiond answer")

-- 4. Answered elsewhere while the picker is open: picking later says so.
sessiond.setup({ answer_permissions = false, permission_prompt = "select" })
pick, turn = ask(id, "fourth?")
local waiting = sessiond.model:pending_permissions(id)
H.eq(1, #waiting, "one request waits")
H.request("permission/answer", { permission = waiting[1].id, optionId = "reject_once" })
H.wait("the fourth turn", function()
  return turn.done
end)
pick.on_choice(pick.items[1])
H.find_line(
  vim.tbl_map(function(n)
    return n.message
  end, H.notes),
  "that permission request was already answered",
  "a late pick is refused"
)
H.eq(true, transcript_has(id, 'Asked "fourth?": Reject'), "the first answer won")

-- 5. A request that waited before this Neovim connected: the daemon asks the newcomer, and the
-- panel's row says so (its permission.asked event came before the snapshot, not replayed).
sessiond.setup({ answer_permissions = false, permission_prompt = "notify" })
H.send(id, "ask fifth?\nsay after fifth")
H.wait("needs you", function()
  return H.status():find("^1 needs you") ~= nil
end)
sessiond.model.permissions = {} -- (as a Neovim started now knows none)
generation = client.state.generation
sessiond.setup({ answer_permissions = true, permission_prompt = "notify" })
H.wait("asked again on the new connection", function()
  return client.state.generation > generation and #sessiond.model:pending_permissions(id) == 1
end)
local row = require("sessiond.panel").session_line(sessiond.model:session(id), 0, sessiond.model)
H.truthy(row:find("asks: fifth? (a answers)", 1, true), "the panel's row: " .. row)
before = #picks
vim.cmd("Sessiond answer")
H.eq(before + 1, #picks, ":Sessiond answer opens the picker")
picks[#picks].on_choice(picks[#picks].items[1])
-- (The turn goes on in the daemon: the request that sent it went with the old connection.)
H.wait("the agent to hear Allow", function()
  return transcript_has(id, 'Asked "fifth?": Allow')
end)

H.done("permission")
