-- Which session a prompt goes to, and saying so: the compose buffer gives the cursor back to
-- the window `s` was pressed in (not to the panel beside it, whose row would become current),
-- every send says "sent to sN", `s` on a closed session refuses at once, s1's buffers are not
-- taken for s10's, and :Sessiond rename with an id of no session says so rather than taking
-- the id into the title.
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
local sessiond = H.setup({})
local ids = H.open_sessions(3)

local function row(id)
  return (H.find_line(H.lines(require("sessiond.panel").buffer()), " " .. id .. " ", "row of " .. id))
end

--- `s` in the current window, `lines` written in the compose buffer; the buffer.
local function compose(lines)
  H.press("s")
  vim.cmd("stopinsert")
  local buf = vim.api.nvim_get_current_buf()
  H.truthy(vim.api.nvim_buf_get_name(buf):find("^sessiond://compose/"), "a compose buffer")
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  return buf
end

H.case("the compose buffer closes back to the view it was opened from", function()
  vim.cmd("Sessiond panel")
  H.wait_lines(require("sessiond.panel").buffer(), { " " .. ids[2] .. " " }, "the panel's rows")
  vim.api.nvim_win_set_cursor(0, { row(ids[2]), 0 })
  vim.cmd("Sessiond open " .. ids[1])
  local view_win = vim.api.nvim_get_current_win()
  H.eq("sessiond://session/" .. ids[1], vim.api.nvim_buf_get_name(0), "the view")
  local from = #H.notes + 1
  local buf = compose({ "say composed here" })
  vim.cmd("write")
  H.wait("the compose buffer to go, and the cursor back in the view", function()
    return not vim.api.nvim_buf_is_valid(buf) and vim.api.nvim_get_current_win() == view_win
  end)
  H.eq(ids[1], sessiond.model.current, "the view's session is still current")
  H.wait_note("sessiond: sent to " .. ids[1], from)
  -- :q! sends nothing, and goes back there too.
  buf = compose({ "say not this" })
  vim.cmd("quit!")
  H.wait("the cursor back in the view after :q!", function()
    return not vim.api.nvim_buf_is_valid(buf) and vim.api.nvim_get_current_win() == view_win
  end)
end)

H.case(":Sessiond send says where the prompt went", function()
  sessiond.model:set_current(ids[1])
  local from = #H.notes + 1
  vim.cmd("Sessiond send say plainly")
  H.wait_note("sessiond: sent to " .. ids[1], from)
end)

H.case("s on a closed session refuses at once, with the reopen hint", function()
  local view = require("sessiond.view").show(ids[2])
  vim.cmd("Sessiond close " .. ids[2])
  H.wait("the close", function()
    return H.session(ids[2]) == nil
  end)
  vim.api.nvim_set_current_buf(view.buf)
  local from = #H.notes + 1
  H.press("s")
  local refused = H.wait_note(ids[2] .. " is closed", from)
  H.truthy(refused.message:find(":Sessiond reopen " .. ids[2], 1, true), refused.message)
  H.eq(-1, vim.fn.bufnr("sessiond://compose/" .. ids[2]), "no compose buffer")
  H.eq(view.buf, vim.api.nvim_get_current_buf(), "the cursor stays in the view")
end)

H.case("a compose buffer whose session closed meanwhile keeps its prompt", function()
  local view = require("sessiond.view").show(ids[3])
  vim.api.nvim_set_current_buf(view.buf)
  local buf = compose({ "say too late" })
  vim.cmd("Sessiond close " .. ids[3])
  H.wait("the close", function()
    return H.session(ids[3]) == nil
  end)
  local from = #H.notes + 1
  vim.cmd("write")
  local refused = H.wait_note(ids[3] .. " is closed: nothing sent", from)
  H.truthy(refused.message:find(":Sessiond reopen " .. ids[3], 1, true), refused.message)
  H.eq({ "say too late" }, H.lines(buf), "the prompt stays")
  vim.cmd("quit!")
end)

H.case("s1's view and compose buffer leave s10's alone", function()
  local ten = H.open_sessions(7)[7]
  H.eq("s10", ten, "the tenth session")
  local view = require("sessiond.view")
  view.close("s1")
  local ten_view = view.show(ten)
  local view_win = vim.api.nvim_get_current_win()
  local ten_compose = compose({ "say for ten" })
  vim.api.nvim_set_current_win(view_win)
  local one_view = view.show("s1")
  H.truthy(vim.api.nvim_buf_is_valid(ten_view.buf), "s10's view stays")
  local one_compose = compose({ "say for one" })
  H.truthy(one_compose ~= ten_compose, "a compose buffer of s1's own")
  H.truthy(vim.api.nvim_buf_is_valid(ten_compose), "s10's compose buffer stays")
  H.eq({ "say for ten" }, H.lines(ten_compose), "with its text")
  for _, buf in ipairs({ one_compose, ten_compose }) do
    vim.api.nvim_buf_delete(buf, { force = true })
  end
  H.eq(one_view.buf, vim.api.nvim_win_get_buf(view_win), "s1's view")
end)

H.case(":Sessiond rename with an id of no session says so", function()
  sessiond.model:set_current(ids[1])
  local from = #H.notes + 1
  vim.cmd("Sessiond rename s999 foo")
  local refused = H.wait_note("no session s999", from)
  H.eq(vim.log.levels.ERROR, refused.level, "an error")
  H.truthy(H.request("session/get", { session = ids[1] }).title ~= "s999 foo", "the current session keeps its title")
end)

H.done("compose")
