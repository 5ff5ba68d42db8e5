--- The options of setup(): one schema (type, default, description) that
--- validates the user's table, warns once about unknown keys, and generates
--- the options section of doc/sessiond.txt (a test fails when it is stale).

local M = {}

local keys_doc = "Keys of the %s; each a string, or false to leave the action unmapped."

--- Ordered, so the help lists the options in a sensible order.
--- `name` may be dotted: "view.keep" is `view = { keep = ... }`.
M.schema = {
  {
    name = "socket",
    type = "string",
    default = nil,
    doc_default = "where the daemon puts it: $SESSIOND_SOCKET, else\n"
      .. "$SESSIOND_HOME/run/sessiond.sock, else\n"
      .. "$XDG_RUNTIME_DIR/sessiond/sessiond.sock, else\n"
      .. "/tmp/sessiond-$UID/sessiond.sock",
    description = "The daemon's unix socket.",
  },
  {
    name = "cmd",
    type = "table",
    default = { "sessiond", "stdio" },
    description = "Spawned when nothing answers at `socket`: it relays stdio to the "
      .. "daemon and starts one when none runs.",
  },
  {
    name = "autostart",
    type = "boolean",
    default = true,
    description = "At setup and |:Sessiond-connect|, start a daemon through `cmd` when none "
      .. "runs. Reconnecting after the daemon went away never starts one: the plugin waits "
      .. "for it to come back. |:Sessiond-restart| starts one whatever this says.",
  },
  {
    name = "agent",
    type = "string",
    default = nil,
    doc_default = "the daemon's",
    description = "Agent of the sessions |:Sessiond-new| opens (the daemon's default is `demo`).",
  },
  {
    name = "answer_permissions",
    type = "boolean",
    default = true,
    description = "Tell the daemon this editor answers permission requests, so it sends "
      .. "them here (`session/requestPermission`). When false the plugin still shows "
      .. "requests from the event log and answers them with `permission/answer`.",
  },
  {
    name = "permission_prompt",
    type = "string",
    one_of = { "notify", "select" },
    default = "notify",
    description = "`notify`: a notification, and the status line and panel mark the "
      .. "session; answer when ready with `a` in the panel or a session view, or "
      .. "|:Sessiond-answer|. `select`: also open |vim.ui.select()| at once, but only "
      .. "in normal mode: while you type (insert mode, the command line) it waits "
      .. "until you are back in normal mode.",
  },
  {
    name = "compose",
    type = "string",
    one_of = { "buffer", "input" },
    default = "buffer",
    description = "How `s` (panel, view) and |:Sessiond-send| with no text ask for a "
      .. "prompt. `buffer`: a buffer to write it in, like a commit message: `:w` or "
      .. "`ZZ` sends it, an empty buffer or `:q!` sends nothing. `input`: one line "
      .. "with |vim.ui.input()|.",
  },
  {
    name = "progress",
    type = "boolean",
    default = true,
    description = "Report turns through LSP `$/progress`, so |vim.lsp.status()| and "
      .. "fidget-style plugins show them.",
  },
  {
    name = "refresh_ms",
    type = "number",
    default = 100,
    description = "Redraw the status line, panel and views at most this often.",
  },
  {
    name = "reconnect.min_ms",
    type = "number",
    default = 250,
    description = "First delay before reconnecting to a daemon that went away.",
  },
  {
    name = "reconnect.max_ms",
    type = "number",
    default = 5000,
    description = "The delay doubles up to this.",
  },
  {
    name = "panel.position",
    type = "string",
    one_of = { "left", "right" },
    default = "left",
    description = "Side of the panel window.",
  },
  {
    name = "panel.width",
    type = "number",
    default = 72,
    description = "Width of the panel window, at most: it takes no more than 40% of the "
      .. "screen's columns (but 30 at least), and takes its share again when the screen is resized.",
  },
  {
    name = "panel.keys",
    type = "table",
    default = {
      open = "<CR>",
      send = "s",
      cancel = "c",
      close = "C",
      rename = "R",
      new = "n",
      answer = "a",
      merge = "m",
      side = "S",
      tasks = "t",
      next = "]w",
      prev = "[w",
      quit = "q",
      help = "g?",
    },
    description = keys_doc:format("panel"),
  },
  {
    name = "view.keep",
    type = "number",
    default = 8,
    description = "Session views kept; the least recently opened beyond these is wiped "
      .. "(reopening it reads the transcript again from the daemon).",
  },
  {
    name = "view.lines",
    type = "number",
    default = 2000,
    description = "Transcript lines kept in each session view.",
  },
  {
    name = "view.split",
    type = "string",
    default = "botright vsplit",
    description = "Command that makes the window of a session view, used when no window "
      .. "shows a session view or an empty, unnamed buffer (a view takes such a window).",
  },
  {
    name = "view.keys",
    type = "table",
    default = {
      open_file = "<CR>",
      send = "s",
      cancel = "c",
      answer = "a",
      merge = "m",
      side = "S",
      next = "]w",
      prev = "[w",
      quit = "q",
      help = "g?",
    },
    description = keys_doc:format("session view"),
  },
  {
    name = "tasks.split",
    type = "string",
    default = "botright 12split",
    description = "Command that makes the window of the tasks list (|:Sessiond-tasks|).",
  },
  {
    name = "tasks.keys",
    type = "table",
    default = {
      accept = "a",
      dismiss = "d",
      open = "<CR>",
      refresh = "R",
      quit = "q",
      help = "g?",
    },
    description = keys_doc:format("tasks list"),
  },
}

local by_name = {}
for _, option in ipairs(M.schema) do
  by_name[option.name] = option
end

local function get_path(tbl, dotted)
  local value = tbl
  for part in dotted:gmatch("[^.]+") do
    if type(value) ~= "table" then
      return nil
    end
    value = value[part]
  end
  return value
end

local function set_path(tbl, dotted, value)
  local parts = vim.split(dotted, ".", { plain = true })
  for i = 1, #parts - 1 do
    tbl[parts[i]] = tbl[parts[i]] or {}
    tbl = tbl[parts[i]]
  end
  tbl[parts[#parts]] = value
end

--- Checks one value with vim.validate (the 0.11 form, or the 0.10 table form).
local function check(name, value, option)
  local validator = option.type
  if option.one_of then
    validator = function(v)
      return type(v) == "string" and vim.tbl_contains(option.one_of, v)
    end
  end
  local message = option.one_of and ("one of " .. table.concat(option.one_of, ", ")) or nil
  return pcall(function()
    if vim.fn.has("nvim-0.11") == 1 then
      vim.validate(name, value, validator, true, message)
    else
      vim.validate({ [name] = { value, validator, message or true } })
    end
  end)
end

local function is_group(prefix)
  for name in pairs(by_name) do
    if vim.startswith(name, prefix .. ".") then
      return true
    end
  end
  return false
end

--- Every dotted key the user gave, to find the unknown ones (keys tables included).
local function given_keys(tbl, prefix, out)
  for key, value in pairs(tbl) do
    local name = prefix .. tostring(key)
    local option = by_name[name]
    if option and type(option.default) == "table" and not vim.islist(option.default) and type(value) == "table" then
      for sub in pairs(value) do
        if option.default[sub] == nil then
          out[#out + 1] = name .. "." .. tostring(sub)
        end
      end
    elseif option then
      out[#out + 1] = name
    elseif type(value) == "table" and is_group(name) then
      given_keys(value, name .. ".", out)
    else
      out[#out + 1] = name
    end
  end
  return out
end

local warned = {}

local function warn_once(message)
  if not warned[message] then
    warned[message] = true
    require("sessiond.notify").notify(message, vim.log.levels.WARN)
  end
end

--- The effective options: defaults, then the user's valid ones.
--- Problems are reported in one line each and the default is kept.
--- @param user table|nil
--- @return table options, string[] problems
function M.resolve(user)
  user = user or {}
  local problems = {}
  if type(user) ~= "table" then
    problems[1] = "setup() takes a table of options, got " .. type(user) .. "; using the defaults"
    user = {}
  end
  local options = {}
  for _, option in ipairs(M.schema) do
    local value = get_path(user, option.name)
    local ok, err = check(option.name, value, option)
    if value == nil or not ok then
      if not ok then
        problems[#problems + 1] = ("option %s: %s; using the default"):format(
          option.name,
          tostring(err):gsub("^.-:%d+: ", "")
        )
      end
      value = vim.deepcopy(option.default)
    elseif option.type == "table" and type(option.default) == "table" and not vim.islist(option.default) then
      value = vim.tbl_extend("force", vim.deepcopy(option.default), value)
    end
    set_path(options, option.name, value)
  end
  for _, name in ipairs(given_keys(user, "", {})) do
    if not by_name[name] then
      problems[#problems + 1] = ("unknown option %s (ignored); see :help sessiond-options"):format(name)
    end
  end
  return options, problems
end

M.options = M.resolve({})

--- Sets the options from setup(); warns once per problem.
function M.apply(user)
  local options, problems = M.resolve(user)
  for _, problem in ipairs(problems) do
    warn_once(problem)
  end
  M.options = options
  return options
end

local function show_default(option)
  if option.doc_default then
    return option.doc_default
  end
  if option.default == nil then
    return "nil"
  end
  return vim.inspect(option.default)
end

--- The options section of doc/sessiond.txt, generated from the schema.
--- @return string[]
function M.doc_lines()
  local lines = {}
  for _, option in ipairs(M.schema) do
    local tag = "*sessiond-option-" .. option.name .. "*"
    lines[#lines + 1] = (option.name .. " (" .. option.type .. ")"):gsub("%s+$", "")
    lines[#lines] = lines[#lines] .. string.rep(" ", math.max(1, 78 - #lines[#lines] - #tag)) .. tag
    local words = vim.split(option.description, " ", { plain = true })
    local line = "    "
    for _, word in ipairs(words) do
      if #line + #word + 1 > 78 and line ~= "    " then
        lines[#lines + 1] = line:gsub("%s+$", "")
        line = "    "
      end
      line = line .. (line == "    " and "" or " ") .. word
    end
    lines[#lines + 1] = line
    local default_lines = vim.split(show_default(option), "\n", { plain = true })
    lines[#lines + 1] = "    Default: " .. default_lines[1]
    for i = 2, #default_lines do
      lines[#lines + 1] = "    " .. default_lines[i]
    end
    lines[#lines + 1] = ""
  end
  return lines
end

return M
