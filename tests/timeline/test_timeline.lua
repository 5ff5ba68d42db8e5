-- :Sessiond timeline in headless Neovim (run by test_timeline_real.py with
-- `nvim --clean -l`). A headless Neovim has no browser to open the page in, so
-- vim.ui.open is stubbed: the test checks that it is called with the page the
-- `sessiond` command wrote. SESSIOND_TEST_RUN names the run the daemon holds.
local H = dofile(os.getenv("SESSIOND_REPO") .. "/tests/nvim/helpers.lua")
local run = assert(os.getenv("SESSIOND_TEST_RUN"), "SESSIOND_TEST_RUN is not set")
H.setup({})

local opened = {}
vim.ui.open = function(path)
  opened[#opened + 1] = path
  return nil, nil
end

local function page_of(path)
  local f = assert(io.open(path, "r"), "the page was written: " .. path)
  local text = f:read("*a")
  f:close()
  return text
end

-- A named run: `sessiond runs RUN --html ...`, then opened.
vim.cmd("Sessiond timeline " .. run)
H.wait("vim.ui.open with the run's page", function()
  return #opened == 1
end, 60000)
H.eq(require("sessiond.timeline").path(run), opened[1], "the run's page")
H.truthy(page_of(opened[1]):find("window.sessiondTimeline", 1, true), "the page draws the timeline")
H.truthy(page_of(opened[1]):find(run, 1, true), "the page is the run's")

-- No run named, no current session and no run still going: the last hour of the log.
vim.cmd("Sessiond timeline")
H.wait("vim.ui.open with the last hour's page", function()
  return #opened == 2
end, 60000)
H.eq(require("sessiond.timeline").path("last-hour"), opened[2], "the last hour's page")
H.truthy(page_of(opened[2]):find("window.sessiondTimeline", 1, true), "the page draws the timeline")

-- The command completes run ids.
H.truthy(vim.tbl_contains(vim.fn.getcompletion("Sessiond timeline ", "cmdline"), run), "run ids complete")
H.truthy(vim.tbl_contains(vim.fn.getcompletion("Sessiond ", "cmdline"), "timeline"), "the subcommand completes")

H.done("timeline")
