-- fathom search-worker FILE I N: one worker of a parallel search (internal; started
-- by fathom.search). Reads the search definition as JSON, evaluates the strategies
-- with index % N == I, prints the result as JSON.
local core = require("fathom.core")
local json = require("fathom.format.json")

local M = {}

function M.main(argv)
  local f = assert(io.open(argv[1], "r"))
  local def = json.decode(f:read("a"))
  f:close()
  def.worker = tonumber(argv[2])
  def.workers = tonumber(argv[3])
  io.stdout:write(json.encode(core.search(def)))
  return 0
end

return M
