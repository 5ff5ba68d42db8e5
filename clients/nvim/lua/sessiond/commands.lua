--- :Sessiond {subcommand} [args], with completion. Each subcommand calls
--- one action (actions.lua), the same one the panel's and views' keys call.

local M = {}

--- Where a session's work lands; the daemon says which it offers (and why not).
M.PLACEMENTS = { "here", "worktree", "sandbox", "container", "ssh" }

local function actions()
  return require("sessiond.actions")
end

local function model()
  return require("sessiond").model
end

local function session_ids(arglead)
  local ids = {}
  for _, info in ipairs(model():ordered()) do
    if vim.startswith(info.id, arglead) then
      ids[#ids + 1] = info.id
    end
  end
  return ids
end

local function agent_names()
  return vim.deepcopy(model().agent_order)
end

--- The prompt of :Sessiond send: the text, the selected lines, or both
--- (the text as the request, the lines quoted with where they come from).
function M.prompt_from(opts)
  local text = opts.args:gsub("^%s*send%s*", "", 1)
  if opts.range == 0 then
    return text
  end
  local lines = vim.api.nvim_buf_get_lines(0, opts.line1 - 1, opts.line2, false)
  local selection = table.concat(lines, "\n")
  if not text:find("%S") then
    return selection
  end
  local name = vim.api.nvim_buf_get_name(0)
  local where = name ~= "" and vim.fn.fnamemodify(name, ":.") or "[No Name]"
  return ("%s\n\n%s:%d-%d:\n```%s\n%s\n```"):format(text, where, opts.line1, opts.line2, vim.bo.filetype, selection)
end

M.subcommands = {
  panel = {
    summary = "open the panel of agents and sessions",
    run = function()
      require("sessiond.panel").open()
    end,
  },
  new = {
    summary = "open a session at the working directory: [placement] [agent]",
    run = function(args)
      local opts = {}
      local agents = model().agent_order
      for _, word in ipairs(args) do
        if vim.tbl_contains(M.PLACEMENTS, word) then
          opts.placement = word
        elseif #agents == 0 or vim.tbl_contains(agents, word) then
          opts.agent = word
        else
          require("sessiond.notify").notify(
            ("%q is neither a placement (%s) nor an agent (%s); :Sessiond new [placement] [agent]"):format(
              word,
              table.concat(M.PLACEMENTS, ", "),
              table.concat(agents, ", ")
            ),
            vim.log.levels.ERROR
          )
          return
        end
      end
      actions().new(opts)
    end,
    complete = function(arglead)
      return vim.list_extend(vim.deepcopy(M.PLACEMENTS), agent_names())
    end,
  },
  send = {
    summary = "send {text}, or the selected lines, to the current session",
    run = function(_, opts)
      local prompt = M.prompt_from(opts)
      if not prompt:find("%S") and opts.range == 0 then
        actions().ask_and_send() -- the compose buffer (or one line, `compose = "input"`)
        return
      end
      actions().send(prompt)
    end,
  },
  next = {
    summary = "go to the next working session",
    run = function()
      actions().step(1)
    end,
  },
  prev = {
    summary = "go to the previous working session",
    run = function()
      actions().step(-1)
    end,
  },
  cancel = {
    summary = "cancel the running and queued turns of [session] (default: current)",
    run = function(args)
      actions().cancel(args[1])
    end,
    complete = session_ids,
  },
  rename = {
    summary = "name [session] (default: current) {title}; with no title, asks",
    run = function(args)
      -- A first word that is a session's id names the session; the rest is the title. One that
      -- looks like an id ("s" and digits) but names no open session is a mistake, not a title.
      local first = args[1]
      if first and not model():session(first) and first:match("^s%d+$") then
        require("sessiond.notify").notify(
          ("no session %s; :Sessiond panel lists the open sessions"):format(first),
          vim.log.levels.ERROR
        )
        return
      end
      local session = first and model():session(first) and table.remove(args, 1) or nil
      actions().rename(session, #args > 0 and table.concat(args, " ") or nil)
    end,
    complete = session_ids,
  },
  close = {
    summary = "close [session] (default: current)",
    run = function(args)
      actions().close(args[1])
    end,
    complete = session_ids,
  },
  reopen = {
    summary = "open closed [session] again, as it was (default: pick one of those closed last)",
    run = function(args)
      actions().reopen(args[1])
    end,
  },
  open = {
    summary = "open the view of {session} (default: current)",
    run = function(args)
      actions().open(args[1] or model().current)
    end,
    complete = session_ids,
  },
  merge = {
    summary = "merge [session]'s worktree branch into its base (default: current)",
    run = function(args)
      actions().merge(args[1])
    end,
    complete = session_ids,
  },
  side = {
    summary = "ask {question} in a side chat beside the current session",
    run = function(_, opts)
      actions().side((opts.args:gsub("^%s*side%s*", "", 1)))
    end,
  },
  tasks = {
    summary = "the tasks list; or: accept {task}, dismiss {task} [reason]",
    run = function(args, opts)
      local verb, id = args[1], args[2]
      if not verb then
        require("sessiond.tasks").open()
      elseif verb == "accept" then
        actions().accept_task(id)
      elseif verb == "dismiss" then
        local reason = opts.args:match("^%s*tasks%s+dismiss%s+%S+%s+(.-)%s*$")
        actions().dismiss_task(id, reason)
      else
        require("sessiond.notify").notify(
          (":Sessiond tasks takes accept {task} or dismiss {task} [reason], not %q"):format(verb),
          vim.log.levels.ERROR
        )
      end
    end,
    complete = function(_, words)
      if #words <= 2 then
        return { "accept", "dismiss" }
      elseif #words == 3 and (words[2] == "accept" or words[2] == "dismiss") then
        return vim.tbl_map(function(task)
          return task.id
        end, model():task_list({ suggested = true }))
      end
      return {}
    end,
  },
  answer = {
    summary = "answer the oldest permission request of [session] (none named: the current one's, or any)",
    run = function(args)
      -- A session named is the one meant: its request only, never another's.
      actions().answer(args[1], args[1] ~= nil)
    end,
    complete = session_ids,
  },
  connect = {
    summary = "connect again now (starting a daemon when none runs and autostart allows)",
    run = function()
      require("sessiond.client").disconnect(true)
    end,
  },
  restart = {
    summary = "stop the daemon (its running turns end cancelled) and start a fresh one",
    run = function()
      actions().restart()
    end,
  },
  timeline = {
    summary = "write [run]'s timeline (default: the current run, else the last hour) as HTML and open it",
    run = function(args)
      require("sessiond.timeline").open(args[1])
    end,
    complete = function(arglead)
      return require("sessiond.timeline").complete(arglead)
    end,
  },
}

function M.names()
  local names = vim.tbl_keys(M.subcommands)
  table.sort(names)
  return names
end

--- <Plug> mappings, one per action (defined by plugin/sessiond.lua; they set
--- up with the defaults when setup() was not called, like :Sessiond).
M.PLUGS = {
  panel = "Sessiond panel",
  new = "Sessiond new",
  send = "Sessiond send",
  side = "Sessiond side",
  tasks = "Sessiond tasks",
  next = "Sessiond next",
  prev = "Sessiond prev",
  cancel = "Sessiond cancel",
  close = "close",
  open = "Sessiond open",
  answer = "Sessiond answer",
  merge = "Sessiond merge",
  connect = "Sessiond connect",
}

function M.define_plug_mappings()
  for name, command in pairs(M.PLUGS) do
    local lhs = ("<Plug>(sessiond-%s)"):format(name)
    local rhs = "<Cmd>" .. command .. "<CR>"
    if name == "close" then
      -- Asks first when the session works, as the panel's `C` does.
      rhs = function()
        if require("sessiond").ensure_setup() then
          actions().close(nil, { confirm = true })
        end
      end
    end
    vim.keymap.set("n", lhs, rhs, { desc = "sessiond: " .. name })
  end
  -- The selected lines as the prompt.
  vim.keymap.set("x", "<Plug>(sessiond-send)", ":Sessiond send<CR>", { desc = "sessiond: send the selection" })
end

--- :Sessiond with the user command's opts.
function M.run(opts)
  if not require("sessiond").ensure_setup() then
    return
  end
  local args = vim.split(vim.trim(opts.args), "%s+", { trimempty = true })
  local name = table.remove(args, 1) or "panel"
  local subcommand = M.subcommands[name]
  if not subcommand then
    require("sessiond.notify").notify(
      ("no subcommand %q; try one of %s"):format(name, table.concat(M.names(), ", ")),
      vim.log.levels.ERROR
    )
    return
  end
  subcommand.run(args, opts)
end

--- Completion of :Sessiond: subcommands first, then their arguments.
function M.complete(arglead, cmdline, cursorpos)
  local before = cmdline:sub(1, cursorpos)
  local rest = before:match("Sessiond!?%s+(.*)$") or ""
  local words = vim.split(rest, "%s+", { trimempty = false })
  local candidates
  if #words <= 1 then
    candidates = M.names()
  else
    local subcommand = M.subcommands[words[1]]
    if not subcommand or not subcommand.complete or not require("sessiond").model then
      return {}
    end
    candidates = subcommand.complete(arglead, words)
  end
  return vim.tbl_filter(function(candidate)
    return vim.startswith(candidate, arglead)
  end, candidates)
end

return M
