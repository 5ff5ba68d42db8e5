-- A hit-enter prompt (the user's own :echo of several lines) comes up while the plugin connects,
-- in Neovim with a UI attached (embed.lua), and stays longer than the connect timeout (15 s).
-- The daemon answered in time, but its answers wait behind the prompt with the timeout's
-- callback: once the prompt is dismissed the plugin goes on with that connection (no teardown,
-- no second connection, no error message) and catches up at once.
--
-- The child connects through a proxy in this process (a unix socket in front of the daemon's),
-- which holds the daemon's bytes until the prompt is up, so the answers come while it blocks.
local CONNECT_TIMEOUT_MS = 15000 -- client.lua's

if not vim.env.SESSIOND_UI_CHILD then
  local script = vim.fn.fnamemodify(arg[0], ":p")
  local embed = dofile(vim.fn.fnamemodify(script, ":h") .. "/embed.lua")
  local daemon_socket = assert(os.getenv("SESSIOND_SOCKET"), "SESSIOND_SOCKET is not set")
  local proxy_path = assert(os.getenv("SESSIOND_TEST_SIGNALS")) .. "/proxy.sock"

  -- The proxy: every connection relayed to the daemon; the daemon's side held while `hold`.
  local proxy = { hold = true, held = {}, talked = 0 }
  local server = vim.uv.new_pipe(false)
  assert(server:bind(proxy_path))
  server:listen(16, function()
    local down, up = vim.uv.new_pipe(false), vim.uv.new_pipe(false)
    server:accept(down)
    local conn = { down = down, talked = false }
    local function close()
      for _, pipe in ipairs({ down, up }) do
        if not pipe:is_closing() then
          pipe:close()
        end
      end
    end
    up:connect(daemon_socket, function(err)
      if err then
        return close()
      end
      up:read_start(function(_, data)
        if not data then
          return close()
        elseif proxy.hold then
          proxy.held[#proxy.held + 1] = { conn = conn, data = data }
        elseif not down:is_closing() then
          down:write(data)
        end
      end)
      down:read_start(function(_, data)
        if not data then
          return close()
        end
        if not conn.talked then -- a probe connects and closes without a word
          conn.talked = true
          proxy.talked = proxy.talked + 1
        end
        if not up:is_closing() then
          up:write(data)
        end
      end)
    end)
  end)
  local function release()
    proxy.hold = false
    for _, piece in ipairs(proxy.held) do
      if not piece.conn.down:is_closing() then
        piece.conn.down:write(piece.data)
      end
    end
    proxy.held = {}
  end

  vim.env.SESSIOND_TEST_PROXY = proxy_path
  local request, screen = embed.child(script, 80, 24)
  local function quit()
    pcall(request, "nvim_command", "qa!")
  end
  local function fail(message)
    quit()
    error(("%s\n--- the child's screen:\n%s"):format(message, screen.text()), 0)
  end
  local child, wait = embed.helpers(request, fail)

  -- The child sent `initialize` (its LSP client is up); the daemon's answer is held.
  wait("the child to connect through the proxy", function()
    local ready = child("return _G.SESSIOND_TEST_READY")
    if type(ready) == "table" and ready.err then
      fail(ready.err)
    end
    return ready ~= nil and ready ~= vim.NIL and proxy.talked == 1 and #proxy.held > 0
  end, 60000)
  local client_id = child("return require('sessiond.client').state.client_id")
  -- The user's own :echo of several lines: a hit-enter prompt blocks the child.
  request("nvim_input", [[:echo "one\ntwo\nthree"<CR>]])
  wait("the hit-enter prompt", function()
    return request("nvim_get_mode").blocking and screen.text():find("Press ENTER", 1, true) ~= nil
  end)
  release()
  -- Longer than the connect timeout: only fast requests reach the child meanwhile.
  local done_at = vim.uv.now() + CONNECT_TIMEOUT_MS + 2000
  wait("the connect timeout to pass under the prompt", function()
    return vim.uv.now() >= done_at
  end, CONNECT_TIMEOUT_MS + 30000)
  if not request("nvim_get_mode").blocking then
    fail("the hit-enter prompt went away by itself")
  end
  request("nvim_input", "<CR>")
  wait("the child to be subscribed", function()
    return child("return require('sessiond.client').connected()")
  end)
  local after = child([[
    local client = require("sessiond.client")
    local errors = vim.tbl_filter(function(note)
      return (note.level or 0) >= vim.log.levels.WARN
    end, _G.SESSIOND_TEST_NOTES)
    return {
      client_id = client.state.client_id,
      last_error = client.state.last_error or "",
      connection = require("sessiond").model.connection,
      errors = vim.tbl_map(function(note) return note.message end, errors),
    }
  ]])
  local wanted = { client_id = client_id, last_error = "", connection = "online", errors = {} }
  if not vim.deep_equal(wanted, after) or proxy.talked ~= 1 then
    fail(
      ("the connection was given up on after the prompt (%d connections):\n  expected %s\n  got      %s"):format(
        proxy.talked,
        vim.inspect(wanted),
        vim.inspect(after)
      )
    )
  end
  quit()
  server:close()
  io.stdout:write("ok hit-enter connect\n")
  return
end

-- The child. Its stdout is the RPC channel: it only leaves state behind for the parent.
local H = dofile(os.getenv("SESSIOND_REPO") .. "/tests/nvim/helpers.lua")
_G.SESSIOND_TEST_NOTES = H.notes
local ok, err = pcall(function()
  H.truthy(require("sessiond").setup({ socket = vim.env.SESSIOND_TEST_PROXY }), "setup")
  _G.SESSIOND_TEST_READY = true
end)
if not ok then
  _G.SESSIOND_TEST_READY = { err = tostring(err) .. "\n" .. H.debug() }
end
