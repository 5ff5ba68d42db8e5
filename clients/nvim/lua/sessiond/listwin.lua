--- A list in a window of its own: one scratch buffer, one line per item (a
--- session in the panel, a task in the tasks list), the cursor kept on the same
--- item across redraws, and keys that act on the item under the cursor.
--- The panel and the tasks list are each one of these.

local M = {}

local List = {}
List.__index = List

--- A list named `spec.name` (its buffer's name), of `spec.filetype`; `spec.item`
--- names what a line shows ("session", "task") in the hint given on any other
--- line; `spec.highlight(id)` gives an item's line highlight group, or nil;
--- `spec.on_buffer(buf)` adds what else the buffer needs (autocommands, keys).
function M.new(spec)
  local self = setmetatable({ spec = spec, buf = nil, line_item = {}, item_line = {} }, List)
  self.ns = vim.api.nvim_create_namespace(spec.name)
  return self
end

function List:valid()
  return self.buf ~= nil and vim.api.nvim_buf_is_valid(self.buf)
end

--- The window that shows the list, if any.
function List:win()
  if not self:valid() then
    return nil
  end
  return vim.fn.win_findbuf(self.buf)[1]
end

--- The id of the item under the cursor, if the list is shown and the cursor is on one.
function List:under_cursor()
  local win = self:win()
  if not win then
    return nil
  end
  return self.line_item[vim.api.nvim_win_get_cursor(win)[1]]
end

--- Put the cursor on `line`, unless it is there already (no CursorMoved for nothing).
function List:set_line(line)
  local win = self:win()
  if win and vim.api.nvim_win_get_cursor(win)[1] ~= line then
    vim.api.nvim_win_set_cursor(win, { line, 0 })
  end
end

--- Show `lines`, where `line_item` says which line shows which item; the cursor
--- stays on the item it was on. Lines that did not change are not written again.
function List:draw(lines, line_item)
  local keep = self:under_cursor()
  if not vim.deep_equal(lines, vim.api.nvim_buf_get_lines(self.buf, 0, -1, false)) then
    vim.bo[self.buf].modifiable = true
    vim.api.nvim_buf_set_lines(self.buf, 0, -1, false, lines)
    vim.bo[self.buf].modifiable = false
  end
  self.line_item, self.item_line = line_item, {}
  vim.api.nvim_buf_clear_namespace(self.buf, self.ns, 0, -1)
  for line, id in pairs(line_item) do
    self.item_line[id] = line
    local group = self.spec.highlight(id)
    if group then
      vim.api.nvim_buf_set_extmark(self.buf, self.ns, line - 1, 0, { line_hl_group = group })
    end
  end
  if keep and self.item_line[keep] then
    self:set_line(self.item_line[keep])
  end
end

--- The first line that shows an item, if any.
function List:first_item_line()
  local first = nil
  for line in pairs(self.line_item) do
    first = (first == nil or line < first) and line or first
  end
  return first
end

--- A key handler that calls `fn(id)` with the item under the cursor, or says where to put it.
function List:on_item(fn)
  return function()
    local id = self:under_cursor()
    if id then
      fn(id)
    else
      require("sessiond.notify").notify(("put the cursor on a %s line"):format(self.spec.item))
    end
  end
end

--- Map `keys` (action → key, or false) in the list's buffer to `bindings` (action → { fn, description }).
function List:map(keys, bindings)
  for action, binding in pairs(bindings) do
    if keys[action] then
      vim.keymap.set(
        "n",
        keys[action],
        binding[1],
        { buffer = self.buf, nowait = true, desc = "sessiond: " .. binding[2] }
      )
    end
  end
end

--- The list's buffer, made (again) when it is missing.
function List:ensure_buffer()
  if self:valid() then
    return self.buf
  end
  local stale = vim.fn.bufnr(self.spec.name)
  if stale ~= -1 then
    pcall(vim.api.nvim_buf_delete, stale, { force = true })
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, self.spec.name)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = self.spec.filetype
  self.buf = buf
  self.spec.on_buffer(buf)
  return buf
end

--- Show the list (splitting with `split`, a command, when it is not shown) and go to it.
--- `options` are window options beyond those every list has.
function List:open(split, options)
  self:ensure_buffer()
  local win = self:win()
  if not win then
    vim.cmd(split)
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, self.buf)
    local all = {
      number = false,
      relativenumber = false,
      wrap = false,
      cursorline = true,
      signcolumn = "no",
      foldcolumn = "0",
    }
    -- Local values only (:setlocal): a window split from this one keeps the user's as its
    -- global values, which a session view opened there goes back to.
    for option, value in pairs(vim.tbl_extend("force", all, options or {})) do
      vim.api.nvim_set_option_value(option, value, { scope = "local", win = win })
    end
  end
  vim.api.nvim_set_current_win(win)
  return win
end

--- Close the list's window, unless it is the last one.
function List:close()
  local win = self:win()
  if win and #vim.api.nvim_list_wins() > 1 then
    vim.api.nvim_win_close(win, false)
  end
end

--- Echo the list's keys: "sessiond keys: a answer, c cancel, …".
function M.show_keys(keys)
  local parts = {}
  for action, key in pairs(keys) do
    if key then
      parts[#parts + 1] = key .. " " .. action
    end
  end
  table.sort(parts)
  vim.api.nvim_echo({ { "sessiond keys: " .. table.concat(parts, ", ") } }, false, {})
end

return M
