-- Two sessions in one working copy (placement "here") whose commands ran at the same
-- time: which made which file cannot be told, so the daemon lists each file for both,
-- shared with the other, and the view says so on the file's line. A file a person
-- makes there between turns is neither's: the view counts it in "Others' changes here".
local H = dofile(vim.fn.fnamemodify(arg[0], ":p:h") .. "/helpers.lua")
H.setup({})
local view = require("sessiond.view")
local root = vim.fn.getcwd()

local opened = H.request("session/open", { root = root, count = 2, placement = "here" })
local one, two = opened.sessions[1].id, opened.sessions[2].id
H.wait("the sessions to reach the model", function()
  return H.session(one) ~= nil and H.session(two) ~= nil
end)
local function both(prompt_one, prompt_two)
  local turns = { H.send(one, prompt_one), H.send(two, prompt_two) }
  H.wait("both turns", function()
    return turns[1].done and turns[2].done
  end)
  H.eq({ nil, nil }, { turns[1].err, turns[2].err }, "both turns answered")
end
both("say ready", "say ready")

-- Each command (run in the agent's own process, announced after it ran) waits until the
-- other has started: both ran before either was announced.
local wait_for = "while [ ! -f %s ]; do sleep 0.02; done"
both(
  ("shell sh -c 'touch one-up; %s; echo 1 > one.txt'"):format(wait_for:format("two-up")),
  ("shell sh -c 'touch two-up; %s; echo 2 > two.txt'"):format(wait_for:format("one-up"))
)

-- Changes are counted in the background after a turn: wait for them in the model.
local made = { "one-up", "one.txt", "two-up", "two.txt" }
local function paths(id)
  local info = H.session(id)
  local found = {}
  for _, file in ipairs(info and type(info.changes) == "table" and info.changes.files or {}) do
    found[file.path] = file
  end
  return found
end
for _, id in ipairs({ one, two }) do
  H.wait(id .. "'s shared changes", function()
    local found = paths(id)
    for _, path in ipairs(made) do
      if not (found[path] and found[path].shared) then
        return false
      end
    end
    return true
  end)
end

-- The view: each file's line names the other session.
local shown = view.show(one)
H.wait_lines(shown.buf, {
  "Changed files: 4 (+2 -0)",
  "  A one-up  +0 -0 (shared with " .. two .. ")",
  "  A one.txt  +1 -0 (shared with " .. two .. ")",
  "  A two-up  +0 -0 (shared with " .. two .. ")",
  "  A two.txt  +1 -0 (shared with " .. two .. ")",
}, one .. "'s view")
local header = vim.list_slice(H.lines(shown.buf), 1, shown.header_len)
H.eq(0, H.count_lines(header, "Others' changes"), "no others' changes yet")
H.log(("%s's view:\n%s"):format(one, table.concat(header, "\n")))
local other = view.show(two)
H.wait_lines(other.buf, { "  A one.txt  +1 -0 (shared with " .. one .. ")" }, two .. "'s view")
-- <CR> on a shared file's line opens it as on any other.
H.eq("one.txt", other.files[H.find_line(H.lines(other.buf), "  A one.txt", "one.txt's line")].path, "the line's file")

-- A person's file between turns: neither session's; counted apart, after the files when
-- the session's changes are counted again (after a turn that wrote or ran something).
local file = assert(io.open(root .. "/person.txt", "w"))
file:write("mine\n")
file:close()
local writing = H.send(one, "write mine.txt mine")
H.wait("the writing turn", function()
  return writing.done
end)
-- Its count after the turn (one taken while the turn ran may have person.txt as others' but not
-- mine.txt yet).
H.wait(one .. "'s changes to count mine.txt as its own and person.txt as others'", function()
  local changes = H.session(one).changes
  if paths(one)["mine.txt"] == nil then
    return false
  end
  for _, change in ipairs(type(changes) == "table" and type(changes.others) == "table" and changes.others or {}) do
    if change.path == "person.txt" then
      return true
    end
  end
  return false
end)
H.eq(nil, paths(one)["person.txt"], "person.txt is not among its own files")
local count = #H.session(one).changes.others
shown = view.show(one)
-- The view redraws at most every refresh_ms: until then it may show an earlier count.
H.wait_lines(
  shown.buf,
  { "Changed files: 5", "Others' changes here: " .. count .. " file" },
  "the files' count and the others' line"
)
header = vim.list_slice(H.lines(shown.buf), 1, shown.header_len)
local files_line = H.find_line(header, "Changed files: 5", "the files' count")
H.find_line(header, "  A mine.txt  +1 -0", "its own file, not shared")
H.eq(files_line + 6, (H.find_line(header, "Others' changes here", "the others' line")), "right after the files")
H.log(table.concat(header, "\n"))

-- Past three sessions: the first three, then "+N".
local lines = view.header({
  id = "s9",
  changes = {
    files = {
      {
        path = "a",
        kind = "modified",
        added = 1,
        removed = 0,
        shared = true,
        sharedWith = { "s1", "s2", "s3", "s4", "s5" },
      },
      { path = "b", kind = "added", added = 2, removed = 0, shared = true, sharedWith = { "s1", "s2", "s3" } },
      { path = "c", kind = "renamed", oldPath = "d", added = 0, removed = 0, shared = true, sharedWith = { "s1" } },
      { path = "e", kind = "deleted", added = 0, removed = 3, shared = false, sharedWith = vim.NIL },
    },
    added = 3,
    removed = 3,
    others = { { path = "x", kind = "added" } },
  },
})
for _, wanted in ipairs({
  "  M a  +1 -0 (shared with s1, s2, s3 +2)",
  "  A b  +2 -0 (shared with s1, s2, s3)",
  "  R c  +0 -0 (was d) (shared with s1)",
  "  D e  +0 -3",
  "Others' changes here: 1 file",
}) do
  H.eq(1, H.count_exact(lines, wanted), "the header line " .. wanted)
end

H.done("shared")
