-- Shared by the test scripts, which run as `nvim --clean -l tests/nvim/SCRIPT.lua`
-- (a Lua error ends nvim with a non-zero exit and the error on stderr; pytest
-- shows it). Environment: SESSIOND_REPO (the checkout), SESSIOND_SOCKET and
-- SESSIOND_HOME (the daemon under test), SESSIOND_TEST_SIGNALS (a folder for
-- handshakes with pytest).
--
-- Waiting is always on a condition (vim.wait with a predicate), never a sleep.

local H = {}

H.repo = assert(os.getenv("SESSIOND_REPO"), "SESSIOND_REPO is not set: run these through tests/nvim/test_nvim.py")
H.signals = os.getenv("SESSIOND_TEST_SIGNALS")

vim.opt.rtp:prepend(H.repo .. "/clients/nvim")

--- Globals the plugin sets (it must set none): recorded, checked by H.done().
H.globals = {}
setmetatable(_G, {
  __newindex = function(globals, name, value)
    local info = debug.getinfo(2, "S")
    if info and info.source:find("/clients/nvim/", 1, true) then
      H.globals[#H.globals + 1] = ("%s (%s:%d)"):format(tostring(name), info.short_src, info.linedefined)
    end
    rawset(globals, name, value)
  end,
})

vim.cmd.runtime("plugin/sessiond.lua")

--- Every vim.notify message, kept for assertions and failure reports.
H.notes = {}
vim.notify = function(message, level)
  H.notes[#H.notes + 1] = { message = tostring(message), level = level }
end

function H.log(...)
  io.stdout:write(table.concat(vim.tbl_map(tostring, { ... }), " ") .. "\n")
end

--- What the plugin knows, for failure messages.
function H.debug()
  local lines = {}
  local ok, sessiond = pcall(require, "sessiond")
  if ok and sessiond.model then
    local m = sessiond.model
    lines[#lines + 1] = ("status: %q; connection %s; seq %d; current %s"):format(
      sessiond.status({ raw = true }),
      m.connection,
      m.seq,
      tostring(m.current)
    )
    for _, info in ipairs(m:ordered()) do
      lines[#lines + 1] = ("  %s %s plan=%s files=%s last=%q"):format(
        info.id,
        info.status,
        info.plan and (tostring(info.plan.done) .. "/" .. tostring(info.plan.total)) or "-",
        info.changes and #info.changes.files or "-",
        info.lastLine or ""
      )
    end
    lines[#lines + 1] = "client: " .. tostring(require("sessiond.client").state.last_error)
  end
  if H.lines_debug and vim.api.nvim_buf_is_valid(H.lines_debug) then
    lines[#lines + 1] = "buffer " .. vim.api.nvim_buf_get_name(H.lines_debug) .. ":"
    vim.list_extend(lines, vim.api.nvim_buf_get_lines(H.lines_debug, 0, -1, false))
  end
  for _, note in ipairs(H.notes) do
    lines[#lines + 1] = "notify: " .. note.message
  end
  return table.concat(lines, "\n")
end

function H.wait(what, predicate, timeout_ms)
  if not vim.wait(timeout_ms or 20000, predicate, 10) then
    error(("timed out waiting for %s\n%s"):format(what, H.debug()), 2)
  end
end

function H.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error(
      ("%s:\n  expected %s\n  got      %s\n%s"):format(what, vim.inspect(expected), vim.inspect(actual), H.debug()),
      2
    )
  end
end

function H.truthy(value, what)
  if not value then
    error(what .. "\n" .. H.debug(), 2)
  end
  return value
end

--- The first line of `lines` containing `needle` (plain text), else an error.
function H.find_line(lines, needle, what)
  for i, line in ipairs(lines) do
    if line:find(needle, 1, true) then
      return i, line
    end
  end
  error(("%s: no line contains %q in:\n%s\n%s"):format(what, needle, table.concat(lines, "\n"), H.debug()), 2)
end

function H.count_lines(lines, needle)
  local n = 0
  for _, line in ipairs(lines) do
    if line:find(needle, 1, true) then
      n = n + 1
    end
  end
  return n
end

function H.count_exact(lines, wanted)
  return #vim.tbl_filter(function(line)
    return line == wanted
  end, lines)
end

--- Wait until every needle is in a line of `buf` (state events are throttled).
function H.wait_lines(buf, needles, what)
  H.lines_debug = buf
  H.wait(what, function()
    local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    for _, needle in ipairs(needles) do
      local found = false
      for _, line in ipairs(lines) do
        if line:find(needle, 1, true) then
          found = true
          break
        end
      end
      if not found then
        return false
      end
    end
    return true
  end)
end

function H.lines(buf)
  return vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false)
end

function H.status()
  return require("sessiond").status({ raw = true })
end

--- setup() and wait until subscribed.
function H.setup(opts)
  local sessiond = require("sessiond")
  H.truthy(sessiond.setup(opts or {}), "setup() returned false")
  H.wait("the plugin to connect", function()
    return sessiond.model.connection == "online"
  end)
  return sessiond
end

--- A request answered synchronously (tests only; the plugin never waits).
function H.request(method, params)
  local result, err = require("sessiond.client").request_sync(method, params, 20000)
  if err or not result then
    error(("%s failed: %s\n%s"):format(method, err and err.message or "no answer", H.debug()), 2)
  end
  return result
end

--- Sessions opened at `root` (default: the working directory), their ids.
function H.open_sessions(count, root, title)
  local result = H.request("session/open", { root = root or vim.fn.getcwd(), count = count or 1, title = title })
  local ids = vim.tbl_map(function(info)
    return info.id
  end, result.sessions)
  local model = require("sessiond").model
  H.wait("the sessions to reach the model", function()
    for _, id in ipairs(ids) do
      if not model:session(id) then
        return false
      end
    end
    return true
  end)
  return ids
end

--- Send a prompt to `session`; the returned table fills in when the turn ends.
function H.send(session, prompt)
  local turn = { done = false }
  require("sessiond.actions").send(prompt, session, function(err, result)
    turn.done, turn.err, turn.result = true, err, result
  end)
  return turn
end

function H.session(id)
  return require("sessiond").model:session(id)
end

function H.wait_status(id, wanted)
  H.wait(("%s to be %s"):format(id, wanted), function()
    local info = H.session(id)
    return info and info.status == wanted
  end)
end

--- Replace vim.ui.select: record each call; the test answers when it wants.
function H.capture_select()
  local calls = {}
  vim.ui.select = function(items, opts, on_choice)
    calls[#calls + 1] = { items = items, opts = opts, on_choice = on_choice }
  end
  return calls
end

--- Press keys in normal mode, with the buffer's mappings.
function H.press(keys)
  vim.cmd("normal " .. vim.keycode(keys))
end

--- Handshakes with pytest through files in SESSIOND_TEST_SIGNALS.
function H.signal(name)
  local file = assert(io.open(H.signals .. "/" .. name, "w"))
  file:close()
end

function H.await_signal(name, timeout_ms)
  H.wait("pytest's signal " .. name, function()
    return vim.uv.fs_stat(H.signals .. "/" .. name) ~= nil
  end, timeout_ms)
end

--- Record `User SessiondUpdate` and LSP progress.
function H.record_updates()
  local record = { updates = 0, progress = {} }
  vim.api.nvim_create_autocmd("User", {
    pattern = "SessiondUpdate",
    callback = function()
      record.updates = record.updates + 1
    end,
  })
  vim.api.nvim_create_autocmd("LspProgress", {
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      local value = args.data.params.value
      record.progress[#record.progress + 1] = {
        client = client and client.name,
        kind = value.kind,
        title = value.title,
        message = value.message,
      }
    end,
  })
  return record
end

--- Cases that failed (H.case), reported together by H.done.
H.failures = {}

--- Run `fn` as one case of a script: a failure is kept with its traceback and the next case
--- runs, so one script tells every case that fails. Each case sets up what it needs.
function H.case(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    H.failures[#H.failures + 1] = ("case %q failed: %s"):format(name, tostring(err))
  end
end

--- The notes from index `from` on whose message contains `needle`.
function H.notes_with(needle, from)
  local found = {}
  for i = from or 1, #H.notes do
    if H.notes[i].message:find(needle, 1, true) then
      found[#found + 1] = H.notes[i]
    end
  end
  return found
end

--- Wait for a note from index `from` on that contains `needle`; it.
function H.wait_note(needle, from, timeout_ms)
  H.wait(("a message with %q"):format(needle), function()
    return #H.notes_with(needle, from) > 0
  end, timeout_ms)
  return H.notes_with(needle, from)[1]
end

function H.done(name)
  if #H.failures > 0 then
    error(table.concat(H.failures, "\n\n"), 0)
  end
  H.eq({}, H.globals, "globals set by the plugin")
  H.log("ok " .. name)
end

return H
