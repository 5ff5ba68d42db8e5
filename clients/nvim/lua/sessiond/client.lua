--- The connection to the daemon: a Neovim LSP client (so `$/progress` reaches
--- Neovim's own progress UI) over the daemon's unix socket
--- (vim.lsp.rpc.connect) or over `sessiond stdio`. It subscribes to the event
--- log, holds notifications until the subscription is answered, and
--- reconnects with a growing delay when the daemon goes away, resubscribing
--- from the last seq it saw; after daemon/stop (:Sessiond restart) that
--- reconnect starts a new daemon. What the events mean is not its business:
--- it hands them to the hooks that init.lua sets.

local config = require("sessiond.config")

local M = {}

local NOT_CONNECTED = -32099
M.NOT_CONNECTED = NOT_CONNECTED
local CONNECT_TIMEOUT_MS = 15000
-- After daemon/stop closed the connection: how long a new daemon may take to answer.
local RESTART_TIMEOUT_MS = 30000
-- A timeout's callback this late ran after the editor was blocked (see defer_timeout).
local LATE_MS = 1000

--- @class sessiond.ConnectionState
local state = {
  client_id = nil, -- the LSP client's id while connected
  generation = 0, -- bumped by every connection attempt; late callbacks of older ones are ignored
  subscription = nil, -- the live subscription's id
  subscribing = false, -- true until events/subscribe is answered
  held = {}, -- notifications that came before that answer
  server_info = nil, -- serverInfo from initialize
  daemon = nil, -- the last daemon/status answer
  socket = nil, -- where the daemon was found (learnt from daemon/status over stdio)
  transport = nil, -- "socket" | "stdio"
  retry_ms = nil,
  retry_timer = nil,
  stopping = false, -- Neovim exits, or :Sessiond disconnect: do not reconnect
  pending = {}, -- requests of this connection not answered yet
  last_error = nil,
  restart = nil, -- after daemon/stop, until a new daemon answers: { pid, cancelled, callback, closed }
}
M.state = state

local hooks = {
  seq = function()
    return 0
  end,
  on_state = function(_) end,
  on_subscribed = function(_, _) end,
  on_notify = function(_) end,
  on_permission_request = function(_)
    return nil, { code = -32601, message = "not ready" }
  end,
}

--- init.lua wires the client to the model and the UI.
function M.set_hooks(new_hooks)
  hooks = vim.tbl_extend("force", hooks, new_hooks)
end

--- Where the daemon listens by default; mirrors sessiond.protocol.paths.
function M.default_socket()
  local env = vim.env
  if env.SESSIOND_SOCKET and env.SESSIOND_SOCKET ~= "" then
    return env.SESSIOND_SOCKET
  end
  if env.SESSIOND_HOME and env.SESSIOND_HOME ~= "" then
    return env.SESSIOND_HOME .. "/run/sessiond.sock"
  end
  local runtime = env.XDG_RUNTIME_DIR
  if runtime and runtime ~= "" and vim.fn.isdirectory(runtime) == 1 then
    return runtime .. "/sessiond/sessiond.sock"
  end
  return (vim.uv.os_tmpdir() or "/tmp") .. "/sessiond-" .. vim.uv.getuid() .. "/sessiond.sock"
end

function M.socket()
  return state.socket or config.options.socket or M.default_socket()
end

function M.lsp_client()
  return state.client_id and vim.lsp.get_client_by_id(state.client_id) or nil
end

function M.connected()
  return state.subscription ~= nil and M.lsp_client() ~= nil
end

--- Sends a request; `callback(err, result)` runs in the main loop.
--- Never blocks. Errors are tables with `code` and `message`; `unsent` when
--- the request never left (not connected).
function M.request(method, params, callback)
  callback = callback or function() end
  local client = M.lsp_client()
  if not client then
    vim.schedule(function()
      callback({ code = NOT_CONNECTED, message = "not connected to the sessiond daemon", unsent = true })
    end)
    return nil
  end
  if params == nil or next(params) == nil then
    params = vim.empty_dict() -- `{}` would be sent as a JSON array
  end
  -- Answered once: by the daemon, or with an error when the connection ends first.
  local pending = state.pending
  local key = {}
  local function settle(err, result)
    if pending[key] then
      pending[key] = nil
      callback(err, result)
    end
  end
  pending[key] = settle
  -- The raw RPC client: no LspRequest autocmds, no buffer, no change tracking.
  local ok, id = client.rpc.request(method, params, settle)
  if not ok then
    vim.schedule(function()
      settle({ code = NOT_CONNECTED, message = "the connection to the sessiond daemon is closed", unsent = true })
    end)
  end
  return id
end

--- The connection ended: its unanswered requests get an error now.
local function fail_pending()
  local pending = state.pending
  state.pending = {}
  for _, settle in pairs(pending) do
    settle({
      code = NOT_CONNECTED,
      message = "the connection to the sessiond daemon was lost before it answered",
    })
  end
end

--- A request answered before returning; only for :checkhealth, which may wait.
function M.request_sync(method, params, timeout_ms)
  local done, err, result = false, nil, nil
  M.request(method, params, function(e, r)
    done, err, result = true, e, r
  end)
  if not vim.wait(timeout_ms or 2000, function()
    return done
  end, 10) then
    return nil, { message = ("no answer to %s within %d ms"):format(method, timeout_ms or 2000) }
  end
  return result, err
end

local function stop_client(client, force)
  if not client then
    return
  elseif vim.fn.has("nvim-0.11") == 1 then
    client:stop(force)
  else
    client.stop(force) -- 0.10 binds methods to the client
  end
end

local function cancel_retry()
  if state.retry_timer then
    state.retry_timer:stop()
    state.retry_timer:close()
    state.retry_timer = nil
  end
end

local function schedule_retry()
  cancel_retry()
  if state.stopping then
    return
  end
  local options = config.options.reconnect
  state.retry_ms = state.retry_ms and math.min(state.retry_ms * 2, options.max_ms) or options.min_ms
  state.retry_timer = vim.uv.new_timer()
  state.retry_timer:start(
    state.retry_ms,
    0,
    vim.schedule_wrap(function()
      cancel_retry()
      -- During a restart a failed attempt starts a daemon again: the user asked for a new one.
      M.connect({ start = state.restart ~= nil })
    end)
  )
end

--- Does anything accept connections at `path`? (vim.lsp.rpc.connect only warns when not.)
local function probe(path, callback)
  local pipe = vim.uv.new_pipe(false)
  local ok, err = pcall(pipe.connect, pipe, path, function(connect_err)
    pipe:close()
    vim.schedule(function()
      callback(connect_err == nil, connect_err)
    end)
  end)
  if not ok then
    pipe:close()
    vim.schedule(function()
      callback(false, err)
    end)
  end
end

--- `fn` after `ms` in which the editor could run callbacks. While a prompt blocks Neovim (a
--- hit-enter prompt, a confirm()) the daemon's answers wait in the same queue as this
--- timeout's callback, so a callback that runs late would give up on answers that came in
--- time: it waits `ms` again instead, for the held answers and the requests they lead to.
local function defer_timeout(fn, ms)
  local due = vim.uv.now() + ms
  vim.defer_fn(function()
    if vim.uv.now() - due > LATE_MS then
      defer_timeout(fn, ms)
    else
      fn()
    end
  end, ms)
end

-- ------------------------------------------------------------------ restart

--- The restart is over: tell whoever asked for it, once.
local function end_restart(err, restarted)
  local restart = state.restart
  state.restart = nil
  if restart then
    restart.callback(err, restarted)
  end
end

--- Subscribed to the new daemon: ask its pid here rather than wait for the
--- daemon/status that on_initialized sent, which may still be on its way.
local function finish_restart()
  local restart = state.restart
  M.request("daemon/status", {}, function(_, status)
    if state.restart ~= restart then
      return
    end
    state.daemon = status or state.daemon
    end_restart(nil, { old_pid = restart.pid, new_pid = status and status.pid, cancelled = restart.cancelled })
  end)
end

--- The stopped daemon closes its connections last, once it has let go of its
--- store, socket and lock: connect now (starting a new daemon), and give up on
--- the restart if none answers in time.
local function reconnect_after_stop()
  local restart = state.restart
  defer_timeout(function()
    if state.restart == restart then
      end_restart({
        stage = "start",
        pid = restart.pid,
        message = state.last_error or ("no daemon answered within %d ms"):format(RESTART_TIMEOUT_MS),
      })
    end
  end, RESTART_TIMEOUT_MS)
  state.retry_ms = nil
  M.connect({ start = true })
end

-- ------------------------------------------------------------------ events

local function handle_notify(params)
  if state.subscribing then
    state.held[#state.held + 1] = params
    return
  end
  if not params or params.subscription ~= state.subscription then
    return -- a subscription of an earlier connection
  end
  hooks.on_notify(params)
  if params.overflow then
    -- We fell too far behind: carry on from the last seq applied.
    M.subscribe()
  end
end

local function on_notify(_, params)
  -- Neovim's RPC layer already runs handlers through vim.schedule; stay safe if it ever does not.
  if vim.in_fast_event() then
    vim.schedule(function()
      handle_notify(params)
    end)
  else
    handle_notify(params)
  end
end

--- (Re)subscribe: with a snapshot the first time, from the last seq seen after that.
function M.subscribe(fresh)
  local seq = hooks.seq()
  local params = (not fresh and seq > 0) and { since = seq } or { snapshot = true }
  local generation = state.generation
  if state.subscription then
    M.request("events/unsubscribe", { subscription = state.subscription })
  end
  state.subscription = nil
  state.subscribing = true
  state.held = {}
  M.request("events/subscribe", params, function(err, result)
    if generation ~= state.generation then
      return
    end
    state.subscribing = false
    if err then
      state.last_error = "events/subscribe failed: " .. tostring(err.message)
      require("sessiond.notify").notify(state.last_error, vim.log.levels.ERROR)
      return
    end
    if params.since and (result.head or 0) < params.since then
      -- Not the event log we saw (another daemon home): start over from a snapshot.
      M.request("events/unsubscribe", { subscription = result.subscription })
      M.subscribe(true)
      return
    end
    state.subscription = result.subscription
    state.retry_ms = nil
    hooks.on_subscribed(result, params)
    local held = state.held
    state.held = {}
    for _, notify_params in ipairs(held) do
      handle_notify(notify_params)
    end
    if state.restart then
      finish_restart()
    end
  end)
end

-- ------------------------------------------------------------------ lifecycle

--- Said once when a connection that was up ends by itself (the daemon stopped or died): not
--- after :Sessiond disconnect or restart, nor as Neovim exits, nor for attempts that fail.
local function announce_lost()
  require("sessiond.notify").notify(
    "lost the connection to the daemon; reconnecting when it is back (:Sessiond connect starts one)",
    vim.log.levels.WARN
  )
end

local function on_exit(client_id)
  if client_id ~= state.client_id then
    return
  end
  local was_up = state.subscription ~= nil
  state.client_id = nil
  state.subscription = nil
  state.subscribing = false
  fail_pending()
  hooks.on_state("offline")
  if state.restart and not state.restart.closed then
    -- The daemon we asked to stop is going: the first close starts its successor.
    state.restart.closed = true
    reconnect_after_stop()
  else
    if was_up and not state.stopping then
      announce_lost()
    end
    schedule_retry()
  end
end

local function on_initialized(client, result, generation)
  if generation ~= state.generation then
    return
  end
  state.server_info = result and result.serverInfo or nil
  M.request("daemon/status", {}, function(err, status)
    if not err and status then
      state.daemon = status
      state.socket = status.socket or state.socket
    end
  end)
  M.subscribe()
end

local function start_lsp(cmd, transport)
  local generation = state.generation
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  capabilities.window = capabilities.window or {}
  capabilities.window.workDoneProgress = config.options.progress
  local client_config = {
    name = "sessiond",
    cmd = cmd,
    -- `sessiond stdio` relays to (and starts a daemon at) the socket the user chose.
    cmd_env = config.options.socket and { SESSIOND_SOCKET = config.options.socket } or nil,
    capabilities = capabilities,
    init_options = {
      answersPermissions = config.options.answer_permissions,
      clientName = "nvim",
    },
    handlers = {
      ["events/notify"] = on_notify,
      ["session/requestPermission"] = function(_, params)
        return hooks.on_permission_request(params, generation)
      end,
      -- The daemon cancels a permission request another client answered; the
      -- `permission.answered` event settles it here (handlers get no request id).
      ["$/cancelRequest"] = function() end,
    },
    on_init = function(client, result)
      vim.schedule(function()
        on_initialized(client, result, generation)
      end)
    end,
    on_exit = function(_, _, client_id)
      vim.schedule(function()
        on_exit(client_id)
      end)
    end,
    -- A broken connection (reset, unreadable) does not always end the client: end it here.
    on_error = function(code)
      local errors = vim.lsp.rpc.client_errors
      if code == errors.READ_ERROR or code == errors.INVALID_SERVER_MESSAGE then
        vim.schedule(function()
          if generation == state.generation and state.client_id then
            local broken = state.client_id
            stop_client(M.lsp_client(), true)
            on_exit(broken)
          end
        end)
      end
    end,
  }
  local client_id
  if vim.fn.has("nvim-0.11") == 1 then
    client_id = vim.lsp.start(client_config, {
      attach = false,
      silent = true,
      reuse_client = function()
        return false
      end,
    })
  else
    client_id = vim.lsp.start_client(client_config)
  end
  if not client_id then
    state.last_error = "could not start the LSP client for " .. vim.inspect(cmd)
    hooks.on_state("offline")
    schedule_retry()
    return
  end
  state.client_id = client_id
  state.transport = transport
  -- A connection that never gets to a subscription (a socket that accepted and
  -- went silent) is given up on, so the retry loop carries on.
  defer_timeout(function()
    if generation == state.generation and state.client_id == client_id and not state.subscription then
      state.last_error = "the daemon did not answer within " .. CONNECT_TIMEOUT_MS .. " ms"
      stop_client(M.lsp_client(), true)
      state.client_id = nil
      fail_pending()
      hooks.on_state("offline")
      schedule_retry()
    end
  end, CONNECT_TIMEOUT_MS)
end

--- Connect, unless connected. With `start`, a daemon is started through
--- `cmd` when nothing answers at the socket (and `autostart` allows it).
function M.connect(opts)
  opts = opts or {}
  if state.client_id then
    return
  end
  cancel_retry()
  state.stopping = false
  state.generation = state.generation + 1
  local generation = state.generation
  hooks.on_state("connecting")
  local socket = M.socket()
  probe(socket, function(ok, err)
    if generation ~= state.generation or state.client_id then
      return
    end
    if ok then
      state.socket = socket
      start_lsp(vim.lsp.rpc.connect(socket), "socket")
      return
    end
    state.last_error = ("nothing accepts connections at %s (%s)"):format(socket, tostring(err))
    local cmd = config.options.cmd
    -- A restart starts one whatever `autostart` says: the user asked for a new daemon.
    if opts.start and (config.options.autostart or state.restart) then
      if vim.fn.executable(cmd[1]) == 1 then
        start_lsp(cmd, "stdio")
        return
      end
      state.last_error = state.last_error
        .. ("; and %s is not executable, so no daemon can be started (see :help sessiond-option-cmd)"):format(cmd[1])
      require("sessiond.notify").notify(state.last_error, vim.log.levels.WARN)
    end
    hooks.on_state("offline")
    schedule_retry()
  end)
end

--- Close the connection; `reconnect` makes a new one at once.
function M.disconnect(reconnect)
  cancel_retry()
  state.stopping = not reconnect
  state.generation = state.generation + 1
  local client = M.lsp_client()
  state.client_id = nil
  state.subscription = nil
  state.subscribing = false
  fail_pending()
  stop_client(client)
  hooks.on_state("offline")
  if reconnect then
    state.retry_ms = nil
    M.connect({ start = true })
  else
    end_restart({ stage = "start", message = "disconnected before a new daemon answered" })
  end
end

--- Stop the daemon (daemon/stop) and connect again once it is gone, which
--- starts a new one through `cmd`; the reconnect resubscribes from the last
--- seq as after any restart. `callback(err, restarted)` runs once, with
--- { old_pid, new_pid, cancelled } or with an error whose `stage` says how far
--- it got: "busy", "connect", "cmd", "stop" or "start".
function M.restart(callback)
  local function refuse(err)
    vim.schedule(function()
      callback(err)
    end)
  end
  if state.restart then
    return refuse({ stage = "busy", message = "a restart of the daemon is already under way" })
  end
  if not M.connected() then
    return refuse({ stage = "connect", code = NOT_CONNECTED, message = "not connected to the sessiond daemon" })
  end
  -- Checked before the stop: a daemon stopped with no way to start another stays down.
  local cmd = config.options.cmd
  if vim.fn.executable(cmd[1]) ~= 1 then
    return refuse({ stage = "cmd", message = ("%s is not executable"):format(cmd[1]) })
  end
  local pid = state.daemon and state.daemon.pid
  M.request("daemon/stop", {}, function(err, stopping)
    if err then
      callback({ stage = "stop", code = err.code, message = tostring(err.message), pid = pid })
      return
    end
    -- The connection closes after this answer; on_exit takes it from there.
    state.restart = { pid = stopping.pid, cancelled = stopping.cancelledTurns or 0, callback = callback }
  end)
end

--- Neovim is exiting: let the LSP client close, and do not come back.
function M.on_vim_leave()
  state.stopping = true
  cancel_retry()
end

return M
