--- The plugin's messages: vim.notify with the "sessiond: " prefix, never taking the keyboard.
---
--- Neovim's own vim.notify echoes into the message area, and a message wider than that area
--- brings up the hit-enter prompt, which takes the next key a person types. Messages arrive
--- when the daemon says something (a permission request, a merge's outcome, a dropped
--- connection), often mid-typing. So while the person types (insert mode, the command line), a
--- message for Neovim's own vim.notify is cut in the middle to fit (the panel, the session view
--- and `:Sessiond answer` have it whole), and as the mode message ("-- INSERT --") covers it at
--- once, the last one is shown again when they are back in normal mode. In normal mode it is
--- shown whole; other notifiers (nvim-notify, noice, fidget) always get it whole.

local M = {}

--- Is the person typing (insert or replace mode, the command line, a prompt)?
function M.typing()
  local mode = vim.api.nvim_get_mode()
  return mode.blocking or not mode.mode:find("^n") or vim.fn.getcmdwintype() ~= ""
end

--- Whether vim.notify is Neovim's own, which echoes (and prompts when a message overflows).
local function echoes()
  local info = debug.getinfo(vim.notify, "S")
  return info ~= nil and info.source:find("vim/_editor%.lua$") ~= nil
end

--- `text` on one line of at most `width` cells: cut in the middle with "…" when longer, so
--- both who speaks (its start) and what to do (its end) stay.
function M.fit(text, width)
  text = text:gsub("%s*\n%s*", " ")
  if vim.fn.strdisplaywidth(text) <= width then
    return text
  end
  local chars = vim.fn.strchars(text)
  local tail = math.floor((width - 1) / 2)
  local head = width - 1 - tail
  local cut = vim.fn.strcharpart(text, 0, head) .. "…" .. vim.fn.strcharpart(text, chars - tail)
  -- Wide characters: take one more off each side until it fits.
  while vim.fn.strdisplaywidth(cut) > width and head + tail > 0 do
    if head >= tail then
      head = head - 1
    else
      tail = tail - 1
    end
    cut = vim.fn.strcharpart(text, 0, head) .. "…" .. vim.fn.strcharpart(text, chars - tail)
  end
  return cut
end

--- The cells a message may take without a hit-enter prompt: the echo area's free part of the
--- last line, and the lines above it when 'cmdheight' is more than one.
local function room()
  return math.max(vim.v.echospace + (math.max(vim.o.cmdheight, 1) - 1) * vim.o.columns, 20)
end

local HIGHLIGHTS = { [vim.log.levels.WARN] = "WarningMsg", [vim.log.levels.ERROR] = "ErrorMsg" }

--- The last message given while typing, to show again in normal mode (nil: none waits).
local held

local function show_again_in_normal_mode(text, level)
  local waiting = held ~= nil
  held = { text = text, hl = HIGHLIGHTS[level] }
  if waiting then
    return
  end
  vim.api.nvim_create_autocmd("ModeChanged", {
    pattern = "*:n",
    once = true,
    callback = function()
      -- After Neovim has cleared the mode message, or it would clear this one.
      vim.schedule(function()
        local again = held
        held = nil
        if again and not M.typing() then
          vim.api.nvim_echo({ { M.fit(again.text, room()), again.hl } }, false, {})
        end
      end)
    end,
  })
end

function M.notify(message, level)
  level = level or vim.log.levels.INFO
  local text = "sessiond: " .. message
  if M.typing() and echoes() then
    text = M.fit(text, room())
    show_again_in_normal_mode(text, level)
  end
  vim.notify(text, level)
end

return M
