-- fathom run FILE [ARGS]: run a scenario script (arg[0] = FILE, as lua.c does).
local errors = require("fathom.errors")

local M = {}

M.usage = [[
usage: fathom run SCRIPT.lua [ARGS...]

Runs a Lua scenario script with fathom's library on the path
(require "fathom" for the API). Inside the script, arg[0] is SCRIPT
and arg[1..] its arguments, as with the lua interpreter.

examples:
  fathom run scenarios/gpt3_tp.lua
  fathom scenarios/kv_offload.lua
]]

function M.main(argv)
  if argv[1] == "--help" or argv[1] == "-h" then
    io.stdout:write(M.usage)
    return 0
  end
  if argv[1] == nil then errors.raise("run: missing script (usage: fathom run SCRIPT.lua [ARGS])") end
  local script = argv[1]
  local rest = { table.unpack(argv, 2) }
  require("fathom.cli").run_script(script, rest)
  return 0
end

return M
