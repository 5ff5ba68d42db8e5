--- Session views: one buffer per session with its header (status, plan,
--- context, changed files) and the tail of its transcript, updating live.
--- The last `view.keep` views are kept with the last `view.lines` lines each;
--- an older one is wiped and, when reopened, read again from the daemon.

local config = require("sessiond.config")
local client = require("sessiond.client")
local status = require("sessiond.status")

local M = {}

local ns = vim.api.nvim_create_namespace("sessiond.view")

--- session id -> view; `recent` lists ids, most recently shown last.
local views = {}
local recent = {}

local PREFIX = { user = "> ", agent = "", thought = "~ ", tool = "* " }
local HIGHLIGHT = { user = "SessiondUser", thought = "SessiondThought", tool = "SessiondTool" }
local MARK = { completed = "[x]", in_progress = "[>]", pending = "[ ]" }
local KIND = { added = "A", modified = "M", deleted = "D", renamed = "R" }
local KIND_NAME = { side = "Side chat", task = "Task", thread = "Thread" }
local SHARED_NAMED = 3 -- sessions named on a shared file's line; "+N" for the rest

local function model()
  return require("sessiond").model
end

--- "2026-11-29T10:41:50.1Z" (UTC) as the local time of day, "11:41:50".
local function clock(iso)
  local y, mo, d, h, mi, s = tostring(iso):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)")
  if not y then
    return "?"
  end
  local fields = { year = y, month = mo, day = d, hour = h, min = mi, sec = s, isdst = false }
  local as_if_local = os.time(fields)
  local utc_offset = os.time() - os.time(os.date("!*t") --[[@as osdateparam]])
  return os.date("%H:%M:%S", as_if_local + utc_offset)
end

local function thousands(n)
  local s = tostring(math.floor(n))
  return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

-- ------------------------------------------------------------------ header

--- " (shared with s2, s3)" for a file that changed while another session's
--- command ran in the same working copy (it may be theirs too); past
--- SHARED_NAMED sessions, "+N" for the rest. "" for a file of its own.
local function shared_note(file)
  if not file.shared then
    return ""
  end
  local ids = type(file.sharedWith) == "table" and file.sharedWith or {}
  if #ids == 0 then
    return " (shared)"
  end
  local named = table.concat(vim.list_slice(ids, 1, SHARED_NAMED), ", ")
  if #ids > SHARED_NAMED then
    named = named .. (" +%d"):format(#ids - SHARED_NAMED)
  end
  return " (shared with " .. named .. ")"
end

--- The header lines of a session, and which line shows which changed file.
--- @return string[] lines, table<integer, table> files (1-based line -> ChangedFile)
function M.header(info)
  local lines, files = {}, {}
  local function add(line)
    lines[#lines + 1] = line
  end
  add(info.title and info.title ~= "" and ("%s  [%s]"):format(status.label(info, 60), info.id) or info.id)
  local where = type(info.where) == "table"
    and (info.where.description ~= "" and info.where.description or info.where.root)
  add(("%s · %s · %s"):format(info.agent or "?", info.placement or "?", where or info.root or "?"))
  if info.kind and info.kind ~= "main" then
    add((KIND_NAME[info.kind] or info.kind) .. (info.parent and (" of " .. info.parent) or ""))
  end
  -- "ended": a working session's first turn read "0 turns" while it ran.
  local state = ("Status: %s since %s · %d turn%s ended"):format(
    (info.status or "?"):gsub("_", " "),
    clock(info.statusSince),
    info.turns or 0,
    (info.turns or 0) == 1 and "" or "s"
  )
  if (info.queuedTurns or 0) > 0 then
    state = state .. (" · %d queued"):format(info.queuedTurns)
  end
  add(state)
  if type(info.statusDetail) == "string" then
    add("  " .. info.statusDetail) -- why it waits: a limit it is queued on, an agent silent
  end
  for _, ask in ipairs(model():pending_permissions(info.id)) do
    add(
      ("Needs you: %s (press %s)"):format(
        ask.toolCall.title or "a permission",
        config.options.view.keys.answer or ":Sessiond answer"
      )
    )
  end
  if info.lastError then
    add("Last error: " .. tostring(info.lastError))
  end
  if type(info.merge) == "table" and info.merge.step then
    local merge = ("Merge: %s %s"):format(info.merge.branch or "", info.merge.step)
    if info.merge.reason then
      merge = merge .. " (" .. tostring(info.merge.reason) .. ")"
    end
    add(merge)
  end
  local plan = info.plan
  if type(plan) == "table" and type(plan.entries) == "table" and #plan.entries > 0 then
    add(("Plan %d/%d"):format(plan.done or 0, plan.total or #plan.entries))
    for _, entry in ipairs(plan.entries) do
      add(("  %s %s"):format(MARK[entry.status] or "[?]", entry.content))
    end
  end
  local context = info.context
  if type(context) == "table" and context.size then
    local line = ("Context: %d%% (%s of %s tokens%s)"):format(
      status.context_percent(info) or 0,
      thousands(context.used or 0),
      thousands(context.size),
      context.estimated and ", estimated" or ""
    )
    if type(context.cost) == "table" and context.cost.amount then
      line = line .. (" · %.2f %s"):format(context.cost.amount, context.cost.currency or "")
    end
    add(line)
  end
  local changes = info.changes
  if type(changes) == "table" and type(changes.files) == "table" then
    add(("Changed files: %d (+%d -%d)"):format(#changes.files, changes.added or 0, changes.removed or 0))
    for _, file in ipairs(changes.files) do
      local line = ("  %s %s  +%d -%d"):format(KIND[file.kind] or "?", file.path, file.added or 0, file.removed or 0)
      if file.oldPath then
        line = line .. " (was " .. file.oldPath .. ")"
      end
      add(line .. shared_note(file))
      files[#lines] = file
    end
    -- The rest of the root's changes (other sessions', people's): not in the counts above.
    local others = type(changes.others) == "table" and #changes.others or 0
    if others > 0 then
      add(("Others' changes here: %d file%s"):format(others, others == 1 and "" or "s"))
    end
  end
  add(("── transcript (last %d lines) ──"):format(config.options.view.lines))
  return lines, files
end

-- ------------------------------------------------------------------ buffer

local function with_modifiable(buf, fn)
  vim.bo[buf].modifiable = true
  fn()
  vim.bo[buf].modifiable = false
end

local function render_line(item)
  return (PREFIX[item.role] or "") .. item.text
end

local function highlight_lines(view, first, items)
  vim.api.nvim_buf_clear_namespace(view.buf, ns, first, first + #items)
  for i, item in ipairs(items) do
    local group = item.hl or HIGHLIGHT[item.role]
    if group then
      vim.api.nvim_buf_set_extmark(view.buf, ns, first + i - 1, 0, { line_hl_group = group })
    end
  end
end

--- Lines of the transcript shown now: the complete ones and the growing one.
local function shown(view)
  return #view.items + (view.partial and view.partial.text ~= "" and 1 or 0)
end

--- Replace what follows the header with the transcript.
local function render_transcript(view)
  local items = vim.list_extend({}, view.items)
  if view.partial and view.partial.text ~= "" then
    items[#items + 1] = view.partial
  end
  local lines = vim.tbl_map(render_line, items)
  if view.loading then
    lines = { "(reading the transcript…)" }
    items = {}
  end
  with_modifiable(view.buf, function()
    vim.api.nvim_buf_set_lines(view.buf, view.header_len, -1, false, lines)
  end)
  highlight_lines(view, view.header_len, items)
  view.shown = #lines
end

local function render_header(view)
  local info = model():session(view.session)
  if not info then
    info = view.last_info or { id = view.session, status = "closed" }
    info.status = "closed"
  end
  view.last_info = info
  local lines, files = M.header(info)
  with_modifiable(view.buf, function()
    vim.api.nvim_buf_set_lines(view.buf, 0, view.header_len, false, lines)
  end)
  view.header_len = #lines
  view.files = files
end

--- Keep at most view.lines transcript lines, the growing one included.
local function trim(view)
  local excess = math.min(shown(view) - config.options.view.lines, #view.items)
  if excess > 0 then
    for _ = 1, excess do
      table.remove(view.items, 1)
    end
    if not view.loading then
      with_modifiable(view.buf, function()
        vim.api.nvim_buf_set_lines(view.buf, view.header_len, view.header_len + excess, false, {})
      end)
      view.shown = view.shown - excess
    end
  end
end

--- Append a piece of the transcript: pieces of one role and turn join until a
--- line break; a new role or turn ends the line in progress (as the daemon does).
--- A tool call's line (`call` its id) stays open, and its call's later updates
--- retitle it, until anything else comes. (The daemon's transcript does the same.)
local function feed(view, role, turn, text, call)
  local before = shown(view)
  local partial = view.partial
  local complete = {}
  if partial and (partial.role ~= role or partial.turn ~= turn or partial.call ~= call) then
    if partial.text ~= "" then
      complete[#complete + 1] = partial
    end
    partial = nil
  end
  local fresh = not partial
  if fresh then
    -- A new line drops the line breaks before its first words (the daemon's paragraph break
    -- between an agent's messages), as the daemon's transcript does.
    text = text:gsub("^\n+", "")
  end
  partial = partial or { role = role, turn = turn, text = "", call = call }
  if call then
    partial.text = ""
  end
  local pieces = vim.split(partial.text .. text, "\n", { plain = true })
  for i = 1, #pieces - 1 do
    complete[#complete + 1] = { role = role, turn = turn, text = pieces[i] }
  end
  partial.text = pieces[#pieces]
  view.partial = partial
  if fresh and text == "" then
    view.partial = nil -- only line breaks: no line opens, the next words start one
  end
  for _, item in ipairs(complete) do
    view.items[#view.items + 1] = item
  end
  if view.loading then
    return
  end
  local old_last = vim.api.nvim_buf_line_count(view.buf)
  -- Rewrite from the line that was growing: complete lines, then the new growing one.
  local first = view.header_len + #view.items - #complete
  local growing_before = before - (#view.items - #complete)
  local lines, items = {}, {}
  for _, item in ipairs(complete) do
    lines[#lines + 1] = render_line(item)
    items[#items + 1] = item
  end
  if partial.text ~= "" then
    lines[#lines + 1] = render_line(partial)
    items[#items + 1] = partial
  end
  with_modifiable(view.buf, function()
    vim.api.nvim_buf_set_lines(view.buf, first, first + growing_before, false, lines)
  end)
  highlight_lines(view, first, items)
  view.shown = shown(view)
  trim(view)
  M.follow(view, old_last)
end

local function end_line(view)
  if view.partial then
    if view.partial.text ~= "" then
      view.items[#view.items + 1] = view.partial
    end
    view.partial = nil
    trim(view)
  end
end

--- Windows whose cursor was on the last line (`old_last`) stay at the end.
function M.follow(view, old_last)
  local last = vim.api.nvim_buf_line_count(view.buf)
  for _, win in ipairs(vim.fn.win_findbuf(view.buf)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= (old_last or last) then
      vim.api.nvim_win_set_cursor(win, { last, 0 })
    end
  end
end

--- Apply one event to the view of its session, if there is one.
function M.on_event(event)
  local view = event.session and views[event.session]
  if not view then
    return
  end
  if view.loading then
    view.held[#view.held + 1] = event
    return
  end
  local kind, data = event.kind, event.data or {}
  if kind == "turn.queued" then
    feed(view, "user", event.turn, (data.prompt or "") .. "\n")
  elseif kind == "turn.chunk" then
    feed(view, "agent", event.turn, data.text or "")
  elseif kind == "turn.thought" then
    feed(view, "thought", event.turn, data.text or "")
  elseif kind == "turn.tool" and data.title then
    -- Some agents name a call by its tool first ("Terminal"), by what it does once its input
    -- has streamed: an update of the call whose line is open retitles it.
    local open = view.partial and view.partial.call == data.toolCallId and view.partial.turn == event.turn
    if data.first or open then
      feed(view, "tool", event.turn, ("[%s] %s"):format(data.toolKind or "tool", data.title), data.toolCallId)
    end
  elseif kind == "turn.ended" then
    end_line(view)
    local mark, group = M.end_mark(data)
    if mark then
      feed(view, "end", event.turn, mark .. "\n")
      local last = view.items[#view.items]
      if last and last.role == "end" then
        last.hl = group
        highlight_lines(view, view.header_len + #view.items - 1, { last })
      end
    end
  end
end

--- The transcript's mark for a turn that did not simply finish: cancelled,
--- failed, or cut off by a daemon that stopped (outcome "interrupted").
--- @return string|nil mark, string|nil highlight group
function M.end_mark(data)
  if data.outcome == "interrupted" then
    local why = tostring(data.error or "the daemon stopped during this turn")
    return "── " .. (why:find("^interrupted") and why or ("interrupted: " .. why)) .. " ──", "SessiondFailed"
  elseif data.error then
    return "── failed: " .. tostring(data.error) .. " ──", "SessiondFailed"
  elseif data.stopReason == "cancelled" then
    return "── cancelled ──", "SessiondThought"
  elseif data.stopReason and data.stopReason ~= "end_turn" then
    return "── ended: " .. tostring(data.stopReason) .. " ──", "SessiondThought"
  end
  return nil
end

-- ------------------------------------------------------------------ transcript

--- Read the transcript's tail from the daemon (a new view, or after a resync).
local function load(view)
  view.loading = true
  view.held = {}
  view.items, view.partial = {}, nil
  render_transcript(view)
  client.request(
    "session/transcript",
    { session = view.session, limit = config.options.view.lines },
    function(err, result)
      if views[view.session] ~= view then
        return
      end
      view.loading = false
      if err then
        view.items = { { role = "tool", text = "(the transcript could not be read: " .. tostring(err.message) .. ")" } }
      else
        for _, line in ipairs(result.lines or {}) do
          local item = { role = line.role, turn = line.turn, text = line.text }
          if (line.n or 0) >= (result.total or math.huge) then
            view.partial = item -- still growing
          else
            view.items[#view.items + 1] = item
          end
        end
      end
      -- Events that came while reading: with `head`, those after it; without, the
      -- transcript already holds them.
      local held = view.held
      view.held = {}
      local old_last = vim.api.nvim_buf_line_count(view.buf)
      render_transcript(view)
      if result and result.head then
        for _, event in ipairs(held) do
          if (event.seq or 0) > result.head then
            M.on_event(event)
          end
        end
      end
      M.follow(view, old_last)
    end
  )
end

-- ------------------------------------------------------------------ views

local function remember(id)
  recent = vim.tbl_filter(function(other)
    return other ~= id
  end, recent)
  recent[#recent + 1] = id
  -- Wipe the oldest views beyond `keep`, except those on screen.
  local keep = config.options.view.keep
  local i = 1
  while #recent > keep and i <= #recent - keep do
    local old = views[recent[i]]
    if old and #vim.fn.win_findbuf(old.buf) == 0 then
      M.close(recent[i])
    else
      i = i + 1
    end
  end
end

--- Is `win` the last window (floating ones aside) of the last tab page, which :close refuses?
local function last_window(win)
  if #vim.api.nvim_list_tabpages() > 1 then
    return false
  end
  for _, other in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if other ~= win and vim.api.nvim_win_get_config(other).relative == "" then
      return false
    end
  end
  return true
end

--- `q`: close the view's window; the last window shows another buffer instead (the
--- alternate one, else a new empty one), as Neovim will not close it.
local function quit(view)
  local win = vim.api.nvim_get_current_win()
  if not last_window(win) then
    vim.cmd("close")
    return
  end
  local alternate = vim.fn.bufnr("#")
  local shown_before = alternate > 0 and alternate ~= view.buf and vim.api.nvim_buf_is_valid(alternate)
  if shown_before and vim.bo[alternate].buflisted then
    vim.api.nvim_win_set_buf(win, alternate)
  else
    vim.cmd("enew")
  end
end

--- A window showing a view: long reply lines wrap at word boundaries, and options a list's
--- window has (the panel's, copied by a split made from it) are set back to the global ones.
local function set_window_options(win)
  vim.api.nvim_win_call(win, function()
    vim.cmd("setlocal number< relativenumber< cursorline< signcolumn< foldcolumn< winfixwidth< winbar<")
    vim.cmd("setlocal wrap linebreak")
  end)
end

local function map_keys(view)
  local actions = require("sessiond.actions")
  local keys = config.options.view.keys
  local function map(action, fn, desc)
    if keys[action] then
      vim.keymap.set("n", keys[action], fn, { buffer = view.buf, nowait = true, desc = "sessiond: " .. desc })
    end
  end
  map("open_file", function()
    local file = view.files and view.files[vim.api.nvim_win_get_cursor(0)[1]]
    local info = model():session(view.session) or view.last_info
    if file and info then
      require("sessiond.files").open(info, file)
    end
  end, "open the changed file under the cursor (a diff against the base)")
  map("send", function()
    actions.ask_and_send(view.session)
  end, "send a prompt")
  map("cancel", function()
    actions.cancel(view.session)
  end, "cancel the running turn")
  map("answer", function()
    actions.answer(view.session, true)
  end, "answer a permission request")
  map("merge", function()
    actions.merge(view.session)
  end, "merge the worktree session's branch")
  map("side", function()
    actions.side(nil, view.session)
  end, "ask a question in a side chat beside the session")
  map("next", function()
    actions.step(1)
  end, "next working session")
  map("prev", function()
    actions.step(-1)
  end, "previous working session")
  map("quit", function()
    quit(view)
  end, "close the window")
  map("help", function()
    require("sessiond.listwin").show_keys(keys)
  end, "show the keys")
end

--- The buffer named exactly `name`, if any (bufnr() takes ".../s1" for ".../s10").
function M.buffer_named(name)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf) == name then
      return buf
    end
  end
end

local function create(id)
  local name = "sessiond://session/" .. id
  local stale = M.buffer_named(name)
  if stale then
    pcall(vim.api.nvim_buf_delete, stale, { force = true })
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, name)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "sessiond-session"
  local view = { session = id, buf = buf, header_len = 0, items = {}, held = {}, shown = 0 }
  views[id] = view
  vim.api.nvim_create_autocmd("BufEnter", {
    buffer = buf,
    callback = function()
      if model():session(id) and model():set_current(id) then
        require("sessiond").changed(id)
      end
    end,
  })
  vim.api.nvim_create_autocmd("BufWinEnter", {
    buffer = buf,
    callback = function()
      set_window_options(vim.api.nvim_get_current_win())
    end,
  })
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    callback = function()
      if views[id] == view then
        views[id] = nil
      end
    end,
  })
  map_keys(view)
  render_header(view)
  load(view)
  return view
end

--- The view of session `id`, made when needed (no window).
function M.get(id)
  local view = views[id]
  if not view or not vim.api.nvim_buf_is_valid(view.buf) then
    view = create(id)
  end
  remember(id)
  return view
end

--- A window of this tab that shows nothing: an empty, unnamed, unchanged
--- buffer (the one Neovim starts with). A view takes it before splitting.
local function blank_window()
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local buf = vim.api.nvim_win_get_buf(win)
    if
      vim.api.nvim_buf_get_name(buf) == ""
      and vim.bo[buf].buftype == ""
      and not vim.bo[buf].modified
      and vim.api.nvim_buf_line_count(buf) == 1
      and vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] == ""
      and vim.api.nvim_win_get_config(win).relative == ""
    then
      return win
    end
  end
end

--- Show session `id`: in the window that shows a session view, else in one
--- that shows nothing, else in a new split (`view.split`).
--- With `beside` (a side chat's main session): when a window shows that
--- session's view, the side chat goes in a split under it, so both stay in sight.
--- @param opts? { beside?: string }
function M.show(id, opts)
  local view = M.get(id)
  local target
  local beside = opts and opts.beside and views[opts.beside]
  local beside_win = beside and vim.api.nvim_buf_is_valid(beside.buf) and vim.fn.win_findbuf(beside.buf)[1]
  if beside_win and beside.buf ~= view.buf then
    local shown = vim.fn.win_findbuf(view.buf)[1]
    if shown then
      target = shown
    else
      vim.api.nvim_win_call(beside_win, function()
        vim.cmd("belowright split")
        target = vim.api.nvim_get_current_win()
      end)
    end
  end
  for _, win in ipairs(target and {} or vim.api.nvim_tabpage_list_wins(0)) do
    local buf = vim.api.nvim_win_get_buf(win)
    if vim.bo[buf].filetype == "sessiond-session" then
      target = win
      break
    end
  end
  target = target or blank_window()
  if not target then
    vim.cmd(config.options.view.split)
    target = vim.api.nvim_get_current_win()
  end
  vim.api.nvim_win_set_buf(target, view.buf)
  set_window_options(target)
  vim.api.nvim_set_current_win(target)
  vim.api.nvim_win_set_cursor(target, { vim.api.nvim_buf_line_count(view.buf), 0 })
  return view
end

function M.close(id)
  local view = views[id]
  views[id] = nil
  recent = vim.tbl_filter(function(other)
    return other ~= id
  end, recent)
  if view and vim.api.nvim_buf_is_valid(view.buf) then
    pcall(vim.api.nvim_buf_delete, view.buf, { force = true })
  end
end

--- Redraw the headers of views whose session changed (`dirty`: id -> true, or nil: all).
function M.refresh(dirty)
  for id, view in pairs(views) do
    if (not dirty or dirty[id]) and vim.api.nvim_buf_is_valid(view.buf) then
      local old_last = vim.api.nvim_buf_line_count(view.buf)
      render_header(view)
      M.follow(view, old_last)
    end
  end
end

--- After a snapshot (the events in between are not replayed): read every transcript again.
function M.reload_all()
  for _, view in pairs(views) do
    if vim.api.nvim_buf_is_valid(view.buf) then
      render_header(view)
      load(view)
    end
  end
end

--- For tests and :checkhealth: the views kept, oldest first.
function M.list()
  local list = {}
  for _, id in ipairs(recent) do
    if views[id] then
      list[#list + 1] = views[id]
    end
  end
  return list
end

return M
