-- fathom: the Lua API for scenario scripts (require "fathom").
local config = require("fathom.config")
local errors = require("fathom.errors")
local output = require("fathom.output")

local M = {}

M.core = require("fathom.core")
M.version = M.core.version
M.errors = errors

-- load(path) -> table: any YAML or JSON input file, positions kept for errors.
M.load = config.load_file

-- render(value, format) -> text in "yaml", "json", "csv" or "table".
M.render = output.render

return M
