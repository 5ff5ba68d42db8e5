-- Regenerates the options list of doc/sessiond.txt from lua/sessiond/config.lua.
--
--   nvim --clean -l clients/nvim/scripts/gendoc.lua          rewrite the doc
--   nvim --clean -l clients/nvim/scripts/gendoc.lua --check  fail when it is stale
--
-- Loaded with dofile() (as the tests do) it only returns its functions.

local M = {}

M.MARK = "The list below is generated from lua/sessiond/config.lua"

--- The doc with its generated block replaced: from the blank line after the
--- MARK line to the next line of "=".
function M.regenerate(doc_lines, option_lines)
  local mark
  for i, line in ipairs(doc_lines) do
    if line:find(M.MARK, 1, true) then
      mark = i
      break
    end
  end
  assert(mark, "doc/sessiond.txt has no line with: " .. M.MARK)
  local stop
  for i = mark + 1, #doc_lines do
    if doc_lines[i]:match("^=+$") then
      stop = i
      break
    end
  end
  assert(stop, "doc/sessiond.txt has no section after the options")
  local out = {}
  for i = 1, mark do
    out[#out + 1] = doc_lines[i]
  end
  out[#out + 1] = ""
  vim.list_extend(out, option_lines)
  for i = stop, #doc_lines do
    out[#out + 1] = doc_lines[i]
  end
  return out
end

function M.paths(plugin_root)
  return { doc = plugin_root .. "/doc/sessiond.txt" }
end

local script = arg and arg[0] and arg[0]:match("gendoc%.lua$")
if script then
  local plugin_root = vim.fn.fnamemodify(arg[0], ":p:h:h")
  vim.opt.rtp:prepend(plugin_root)
  local doc = M.paths(plugin_root).doc
  local current = vim.fn.readfile(doc)
  local wanted = M.regenerate(current, require("sessiond.config").doc_lines())
  if vim.list_contains(arg, "--check") then
    if not vim.deep_equal(current, wanted) then
      io.stderr:write(doc .. " is stale: run nvim --clean -l clients/nvim/scripts/gendoc.lua\n")
      os.exit(1)
    end
  elseif not vim.deep_equal(current, wanted) then
    vim.fn.writefile(wanted, doc)
    io.stdout:write("wrote " .. doc .. "\n")
  end
end

return M
