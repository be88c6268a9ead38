-- fathom scenario list | run NAME [ARGS]: the canned scenarios shipped in scenarios/.
-- A scenario is scenarios/NAME.lua or scenarios/NAME/compare.lua; its first comment
-- line is its description.
local args = require("fathom.args")
local errors = require("fathom.errors")
local output = require("fathom.output")
local util = require("fathom.format.util")

local M = {}

local list_spec = args.with_output({}, { raw = false })
M.spec = list_spec -- the options of `scenario list` (completion and the man page read it)

M.usage = [[
usage: fathom scenario list [--format table|yaml|json|csv] [--output-file F]
       fathom scenario run NAME [ARGS...]

Canned scenarios reproduce published studies; run one, then copy and change its
configs. Scenarios run with the current directory set to fathom's configs/ on the
search path, so their relative config paths resolve wherever fathom is installed.
A scenario's own flags (hoti25: --format json) follow its name.

examples:
  fathom scenario list --format json
  fathom scenario run hoti25

options of list:
]] .. args.usage(list_spec) .. "\n"

local function data_dir()
  local paths = package.loaded["fathom.paths"]
  return paths and paths.data_dir or "."
end

local function exists(p)
  local f = io.open(p, "r")
  if f then f:close() end
  return f ~= nil
end

local function script_of(name)
  local base = data_dir() .. "/scenarios/"
  for _, p in ipairs({ base .. name .. "/compare.lua", base .. name .. ".lua" }) do
    if exists(p) then return p end
  end
end

local function description(path)
  local f = io.open(path, "r")
  if not f then return "" end
  for line in f:lines() do
    local d = line:match("^%-%-%s*(.+)$")
    if d then
      f:close()
      return (d:gsub("^fathom scenario run %S+:%s*", ""))
    end
  end
  f:close()
  return ""
end

-- list() -> sorted list of {name, path, description}.
function M.list()
  local out = {}
  local base = data_dir() .. "/scenarios"
  local p = io.popen('ls -1 "' .. base .. '" 2>/dev/null')
  if p then
    for entry in p:lines() do
      local name = entry:gsub("%.lua$", "")
      local script = script_of(name)
      if script then out[#out + 1] = { name = name, path = script, description = description(script) } end
    end
    p:close()
  end
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end

function M.main(argv)
  local sub = argv[1]
  if sub == "--help" or sub == "-h" then
    io.stdout:write(M.usage)
    return 0
  end
  if sub == nil then errors.raise("scenario: missing subcommand (list or run NAME; see 'fathom scenario --help')") end
  if sub == "list" then
    local opts, extra = args.parse({ table.unpack(argv, 2) }, list_spec, "scenario list")
    if #extra > 0 then errors.raise("scenario list: unexpected argument '%s'", extra[1]) end
    local list = M.list()
    output.emit(opts, {
      table = function()
        local out = {}
        for _, s in ipairs(list) do out[#out + 1] = string.format("%-12s %s\n", s.name, s.description) end
        return table.concat(out)
      end,
      data = function() return util.array(list) end,
    }, "scenario list")
    return 0
  end
  if sub == "run" then
    local name = argv[2]
    if not name then errors.raise("scenario run: missing NAME (see 'fathom scenario list')") end
    local script = script_of(name)
    if not script then
      local names = {}
      for _, s in ipairs(M.list()) do names[#names + 1] = s.name end
      errors.raise("scenario run: no scenario '%s'%s", name,
        errors.suggest(name, names) ~= "" and errors.suggest(name, names) or
        (" (known: " .. table.concat(names, ", ") .. ")"))
    end
    require("fathom.cli").run_script(script, { table.unpack(argv, 3) })
    return 0
  end
  errors.raise("scenario: unknown subcommand '%s' (list or run)", sub)
end

return M
