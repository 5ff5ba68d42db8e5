-- A child `nvim --embed` with a UI attached, as a person has Neovim in a terminal: the
-- child's main loop runs as there (CursorMoved, redraws, the hit-enter prompt; headless
-- `nvim -l` has none of them). Raw msgpack-rpc over the child's stdio: an rpc job would answer
-- the child's `redraw` notifications with error events, which make an embedded nvim exit.
--
-- embed(cmd, env) returns `request(method, ...)` (waits for the answer, raises its error) and a
-- `screen` kept from the redraw events (ext_linegrid): screen.lines() is the text on grid 1,
-- screen.flushes counts the redraws the child finished.

local M = {}

--- The screen of grid 1 from `grid_*` events.
local function new_screen()
  local screen = { rows = {}, width = 0, height = 0, flushes = 0 }

  local function blank_row()
    local row = {}
    for col = 1, screen.width do
      row[col] = " "
    end
    return row
  end

  function screen.lines()
    local lines = {}
    for r = 1, screen.height do
      lines[r] = table.concat(screen.rows[r] or {})
    end
    return lines
  end

  function screen.text()
    return table.concat(screen.lines(), "\n")
  end

  local handlers = {
    grid_resize = function(grid, width, height)
      if grid ~= 1 then
        return
      end
      screen.width, screen.height = width, height
      for r = 1, height do
        screen.rows[r] = screen.rows[r] or blank_row()
        for c = #screen.rows[r] + 1, width do
          screen.rows[r][c] = " "
        end
        for c = #screen.rows[r], width + 1, -1 do
          screen.rows[r][c] = nil
        end
      end
    end,
    grid_clear = function(grid)
      if grid == 1 then
        for r = 1, screen.height do
          screen.rows[r] = blank_row()
        end
      end
    end,
    grid_line = function(grid, row, col_start, cells)
      local line = grid == 1 and screen.rows[row + 1]
      if not line then
        return
      end
      local col = col_start + 1
      for _, cell in ipairs(cells) do
        local text, repeats = cell[1], cell[3] or 1
        for _ = 1, repeats do
          line[col] = text
          col = col + 1
        end
      end
    end,
    grid_scroll = function(grid, top, bot, left, right, rows)
      if grid ~= 1 then
        return
      end
      -- Rows top..bot-1, columns left..right-1 move up by `rows` (down when negative).
      local first, last, step = top + 1, bot, 1
      if rows < 0 then
        first, last, step = bot, top + 1, -1
      end
      for r = first, last, step do
        local from = screen.rows[r + rows]
        if r + rows >= top + 1 and r + rows <= bot and from then
          for c = left + 1, right do
            screen.rows[r][c] = from[c]
          end
        end
      end
    end,
    flush = function()
      screen.flushes = screen.flushes + 1
    end,
  }

  function screen.apply(events)
    for _, event in ipairs(events) do
      local handler = handlers[event[1]]
      if handler then
        for i = 2, #event do
          handler(unpack(event[i]))
        end
      end
    end
  end

  return screen
end

function M.embed(cmd, env)
  local stdin, stdout = vim.uv.new_pipe(false), vim.uv.new_pipe(false)
  local options = { args = vim.list_slice(cmd, 2), stdio = { stdin, stdout, 2 }, env = env }
  local handle = vim.uv.spawn(cmd[1], options, function() end)
  assert(handle, "could not start nvim --embed")
  local responses, next_id = {}, 0
  local screen = new_screen()
  local unpack_stream = vim.mpack.Unpacker() -- streaming: it keeps a partial message between chunks
  stdout:read_start(function(_, data)
    local pos = 1
    while data and pos <= #data do
      local msg
      msg, pos = unpack_stream(data, pos)
      if msg == nil then
        break
      end
      if type(msg) == "table" and msg[1] == 1 then
        responses[msg[2]] = { err = msg[3], result = msg[4] }
      elseif type(msg) == "table" and msg[1] == 2 and msg[2] == "redraw" then
        screen.apply(msg[3])
      end
    end
  end)
  local function request(method, ...)
    next_id = next_id + 1
    local id = next_id
    stdin:write(vim.mpack.encode({ 0, id, method, { ... } }))
    assert(vim.wait(20000, function()
      return responses[id] ~= nil
    end, 10), "the child Neovim did not answer " .. method)
    local answer = responses[id]
    responses[id] = nil
    if answer.err ~= nil and answer.err ~= vim.NIL then
      error(vim.inspect(answer.err), 2)
    end
    return answer.result
  end
  return request, screen
end

--- Run `script` in a child Neovim with a UI of `columns` x `lines`, its environment plus
--- SESSIOND_UI_CHILD=1 (the script's child half checks it). Returns request and screen.
function M.child(script, columns, lines)
  local env = { "SESSIOND_UI_CHILD=1" }
  for name, value in pairs(vim.fn.environ()) do
    env[#env + 1] = name .. "=" .. value
  end
  local request, screen = M.embed({ vim.v.progpath, "--embed", "--clean", "-c", "luafile " .. script }, env)
  request("nvim_ui_attach", columns, lines, { ext_linegrid = true })
  return request, screen
end

--- What a test does with a child through its `request`: `child(code, ...)` runs Lua there and
--- answers what it returns; `wait(what, predicate, timeout_ms)` waits (30 s by default) for
--- `predicate`, else calls `fail` with "timed out waiting for <what>".
function M.helpers(request, fail)
  local function child(code, ...)
    return request("nvim_exec_lua", code, { ... })
  end
  local function wait(what, predicate, timeout_ms)
    if not vim.wait(timeout_ms or 30000, predicate, 20) then
      fail("timed out waiting for " .. what)
    end
  end
  return child, wait
end

return M
