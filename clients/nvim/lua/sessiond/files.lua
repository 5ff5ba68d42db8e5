--- Opening a session's changed file: as a diff against the session's base
--- (the git tree the daemon recorded when the session first ran), else the
--- file itself, in a new tab page (a diff shown already: its tab page).

local client = require("sessiond.client")

local M = {}

local notify = require("sessiond.notify").notify

local function open_plain(path)
  vim.cmd("tabedit " .. vim.fn.fnameescape(path))
end

--- The window on `path` in a tab page that shows the diff of the base buffer `base` against it.
local function diff_window(base, path)
  for _, base_win in ipairs(vim.fn.win_findbuf(base)) do
    local tab = vim.api.nvim_win_get_tabpage(base_win)
    for _, win in ipairs(vim.api.nvim_tabpage_list_wins(tab)) do
      local name = vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win))
      if win ~= base_win and vim.wo[win].diff and vim.fs.normalize(name) == vim.fs.normalize(path) then
        return win
      end
    end
  end
end

local function show_diff(info, file, path, base_text)
  local base_name = ("sessiond://base/%s/%s"):format(info.id, file.oldPath or file.path)
  local existing = require("sessiond.view").buffer_named(base_name)
  -- Its diff shown already: go to its tab page (once more is no second tab page).
  local shown = existing and diff_window(existing, path)
  if shown then
    vim.api.nvim_set_current_win(shown)
    vim.cmd("diffupdate")
    return
  end
  vim.cmd("tabedit " .. vim.fn.fnameescape(path))
  local file_win = vim.api.nvim_get_current_win()
  vim.cmd("leftabove vnew")
  local buf = vim.api.nvim_get_current_buf()
  if existing and existing ~= buf and vim.api.nvim_buf_is_valid(existing) then
    pcall(vim.api.nvim_buf_delete, existing, { force = true })
  end
  pcall(vim.api.nvim_buf_set_name, buf, base_name)
  local lines = vim.split(base_text, "\n", { plain = true })
  if lines[#lines] == "" then
    lines[#lines] = nil
  end
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  local filetype = vim.filetype.match({ filename = path })
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  vim.cmd("diffthis")
  vim.api.nvim_set_current_win(file_win)
  vim.cmd("diffthis")
end

--- Where a session's changed file is on this machine (nil: on another host).
local function local_path(info, file)
  local where = type(info.where) == "table" and info.where or {}
  if where.host then
    return nil
  end
  local root = where.root or info.root
  return vim.fs.normalize(vim.startswith(file.path, "/") and file.path or (root .. "/" .. file.path))
end

--- Loaded file buffers whose names are among `paths` (a set).
local function buffers_on(paths)
  local found = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
      if paths[vim.fs.normalize(vim.api.nvim_buf_get_name(buf))] then
        found[#found + 1] = buf
      end
    end
  end
  return found
end

--- :checktime on `bufs`, once the person is not typing (a changed file may ask what to do).
local function checktime(bufs)
  if require("sessiond.notify").typing() then
    vim.api.nvim_create_autocmd("ModeChanged", {
      pattern = "*:n",
      once = true,
      callback = function()
        vim.schedule(function()
          checktime(bufs)
        end)
      end,
    })
    return
  end
  for _, buf in ipairs(bufs) do
    if vim.api.nvim_buf_is_loaded(buf) then
      vim.cmd.checktime(buf)
    end
  end
end

--- A session's changed files changed (`session.changes`): buffers loaded on them are checked
--- against the disk, so Neovim's own 'autoread' rules reload them (or say they changed).
function M.check_buffers(info)
  local changes = info and info.changes
  if type(changes) ~= "table" or type(changes.files) ~= "table" then
    return
  end
  local paths = {}
  for _, file in ipairs(changes.files) do
    local path = local_path(info, file)
    if path then
      paths[path] = true
    end
  end
  local bufs = buffers_on(paths)
  if #bufs > 0 then
    vim.schedule(function()
      checktime(bufs)
    end)
  end
end

--- Open a changed file: a diff against the session's base when the daemon
--- recorded a git tree for it, else the file itself. The file is where the
--- session's work lands (its worktree, for a worktree session), which the
--- daemon tells in session/get once the placement is up.
function M.open(info, file)
  client.request("session/get", { session = info.id }, function(err, fresh)
    info = (not err and fresh) or info
    local where = type(info.where) == "table" and info.where or {}
    if where.host then
      notify(("%s is on %s; open it there"):format(file.path, where.host), vim.log.levels.WARN)
      return
    end
    local root = where.root or info.root
    local path = vim.startswith(file.path, "/") and file.path or (root .. "/" .. file.path)
    local base = info.changes and info.changes.base
    if not base or base == "snapshot" or file.kind == "added" or file.outsideRoot then
      open_plain(path)
      return
    end
    local base_path = file.oldPath or file.path
    vim.system({ "git", "-C", root, "show", base .. ":./" .. base_path }, { text = true }, function(result)
      vim.schedule(function()
        if result.code ~= 0 then
          notify(
            ("no base version of %s (%s); opening the file"):format(base_path, vim.trim(result.stderr or "")),
            vim.log.levels.WARN
          )
          open_plain(path)
        else
          show_diff(info, file, path, result.stdout or "")
        end
      end)
    end)
  end)
end

return M
