-- Windows on screens small and large, in a child Neovim with a UI attached (embed.lua) that this
-- script resizes as a terminal is (headless Neovim has no grid to resize: redraws after setting
-- 'columns' write past its end). A view opened from the panel has a view's window options (its
-- lines wrap), not the panel's; the panel takes at most its share of a small screen, and takes
-- it again when the screen is resized; `q` in a view that is the only window shows another
-- buffer; the panel's titles use the room their rows have.
if not vim.env.SESSIOND_UI_CHILD then
  local script = vim.fn.fnamemodify(arg[0], ":p")
  local embed = dofile(vim.fn.fnamemodify(script, ":h") .. "/embed.lua")
  local request = embed.child(script, 160, 40)
  local function child(code, ...)
    return request("nvim_exec_lua", code, { ... })
  end
  local function given(value)
    return value ~= nil and value ~= vim.NIL
  end
  local ready
  if not vim.wait(80000, function()
    ready = child("return _G.SESSIOND_TEST_READY")
    return given(ready)
  end, 50) or ready.err then
    pcall(request, "nvim_command", "qa!")
    error("the child did not set up: " .. tostring(given(ready) and ready.err or "(no answer)"), 0)
  end
  local failures = {}
  --- Run the child's step `name`; false when it failed (its error is kept).
  local function step(name, ...)
    local err = child("return _G.SESSIOND_STEP(...)", name, ...)
    if given(err) then
      failures[#failures + 1] = ("case %q failed: %s"):format(name, err)
    end
    return not given(err)
  end
  --- Resize the child's screen as a terminal would; false when it did not follow.
  local function resize(columns, lines)
    request("nvim_ui_try_resize", columns, lines)
    if not vim.wait(20000, function()
      return child("return vim.o.columns") == columns and child("return vim.o.lines") == lines
    end, 20) then
      failures[#failures + 1] = ("the child's screen did not become %dx%d"):format(columns, lines)
      return false
    end
    return true
  end

  step("a view opened from the panel wraps its lines and has none of the panel's options")
  if resize(80, 24) then
    step("the panel open on a screen made small takes its share of it")
    step("the panel opened on a small screen takes at most its share")
    if resize(200, 40) then
      step("the panel takes the width it was given again on a wide screen", 72)
    end
    if resize(100, 40) then
      step("the panel takes its share of a screen made narrower", 40)
    end
  end
  if resize(120, 40) then
    step("q in a view that is the only window shows another buffer")
  end
  if resize(200, 40) then
    step("panel titles use the room their rows have")
  end
  step("no globals")
  pcall(request, "nvim_command", "qa!")
  if #failures > 0 then
    error(table.concat(failures, "\n\n"), 0)
  end
  io.stdout:write("ok windows\n")
  return
end

-- The child: its stdout is the RPC channel; the parent runs the steps below one by one.
local H = dofile(os.getenv("SESSIOND_REPO") .. "/tests/nvim/helpers.lua")
local panel = require("sessiond.panel")
local ids, titled
local long_title = "bulk job (10 files, careful)"

--- One window again, showing a file (not a blank buffer, which a view would take).
local function one_window_with_a_file()
  panel.close()
  if #vim.api.nvim_tabpage_list_wins(0) > 1 then
    vim.cmd("only")
  end
  vim.cmd("edit notes.txt")
end

local function panel_win()
  return H.truthy(vim.fn.win_findbuf(panel.buffer())[1], "the panel is shown")
end

--- The panel's width is its share of the screen.
local function panel_width_is(wanted)
  H.wait(("the panel to be %d wide"):format(wanted), function()
    return vim.api.nvim_win_get_width(panel_win()) == wanted
  end)
end

local steps = {}

steps["a view opened from the panel wraps its lines and has none of the panel's options"] = function()
  one_window_with_a_file()
  vim.cmd("Sessiond panel")
  H.wait_lines(panel.buffer(), { " " .. ids[1] .. " " }, "the panel's rows")
  vim.api.nvim_win_set_cursor(0, { H.find_line(H.lines(panel.buffer()), " " .. ids[1] .. " ", "row"), 0 })
  H.press("<CR>")
  H.eq("sessiond://session/" .. ids[1], vim.api.nvim_buf_get_name(0), "<CR> opens the view")
  local win = vim.api.nvim_get_current_win()
  H.eq(
    { wrap = true, linebreak = true, cursorline = false, winfixwidth = false, winbar = "" },
    {
      wrap = vim.wo[win].wrap,
      linebreak = vim.wo[win].linebreak,
      cursorline = vim.wo[win].cursorline,
      winfixwidth = vim.wo[win].winfixwidth,
      winbar = vim.wo[win].winbar,
    },
    "the view's window options"
  )
end

-- (The panel of the step before, 64 columns of 160, on a screen made 80 wide.)
steps["the panel open on a screen made small takes its share of it"] = function()
  panel_width_is(32)
end

steps["the panel opened on a small screen takes at most its share"] = function()
  one_window_with_a_file()
  vim.cmd("Sessiond panel")
  local width = vim.api.nvim_win_get_width(panel_win())
  H.eq(32, width, "the panel at 80 columns")
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if win ~= panel_win() then
      H.eq(80 - width - 1, vim.api.nvim_win_get_width(win), "the file keeps the rest")
    end
  end
end

steps["the panel takes the width it was given again on a wide screen"] = function(wanted)
  H.eq(wanted, require("sessiond.config").options.panel.width, "panel.width")
  panel_width_is(wanted)
end

steps["the panel takes its share of a screen made narrower"] = function(wanted)
  panel_width_is(wanted)
end

steps["q in a view that is the only window shows another buffer"] = function()
  one_window_with_a_file()
  local file = vim.api.nvim_get_current_buf()
  local view = require("sessiond.view").show(ids[1])
  vim.cmd("only")
  H.eq(view.buf, vim.api.nvim_get_current_buf(), "the view, alone")
  H.press("q")
  H.eq(1, #vim.api.nvim_list_wins(), "still one window")
  H.eq(file, vim.api.nvim_get_current_buf(), "showing the file shown before (the alternate buffer)")
  -- With no alternate buffer to go to: an empty one.
  vim.api.nvim_set_current_buf(view.buf)
  vim.api.nvim_buf_delete(file, { force = true })
  H.press("q")
  H.eq(1, #vim.api.nvim_list_wins(), "one window")
  H.truthy(vim.api.nvim_get_current_buf() ~= view.buf, "another buffer")
  H.eq("", vim.api.nvim_buf_get_name(0), "an empty one")
end

steps["panel titles use the room their rows have"] = function()
  one_window_with_a_file()
  vim.cmd("Sessiond panel")
  H.wait_lines(panel.buffer(), { " " .. titled .. " " }, "the titled session's row")
  local lines = H.lines(panel.buffer())
  local _, line = H.find_line(lines, " " .. titled .. " ", "the titled row")
  H.truthy(line:find(titled .. " " .. long_title, 1, true), "the whole title: " .. line)
  -- The columns after the title stay aligned.
  local columns = {}
  for _, id in ipairs({ ids[1], ids[2], titled }) do
    local _, text = H.find_line(lines, " " .. id .. " ", "row of " .. id)
    columns[#columns + 1] = vim.fn.strdisplaywidth(text:sub(1, text:find(" idle ", 1, true)))
  end
  H.eq({ columns[1], columns[1] }, { columns[2], columns[3] }, "the status column lines up")
end

steps["no globals"] = function()
  H.eq({}, H.globals, "globals set by the plugin")
end

_G.SESSIOND_STEP = function(name, ...)
  local args = { ... }
  local ok, err = xpcall(function()
    steps[name](unpack(args))
  end, debug.traceback)
  return not ok and tostring(err) or nil
end

local ok, err = pcall(function()
  H.setup({})
  ids = H.open_sessions(2)
  titled = H.open_sessions(1, nil, long_title)[1]
end)
_G.SESSIOND_TEST_READY = ok and { ok = true } or { err = tostring(err) .. "\n" .. H.debug() }
