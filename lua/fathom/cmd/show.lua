-- fathom show FILE...: load input files and print them back (YAML or JSON),
-- the quickest check that a file reads as intended.
local analysis = require("fathom.analysis")
local args = require("fathom.args")
local config = require("fathom.config")
local errors = require("fathom.errors")
local output = require("fathom.output")

local M = {}

local spec = args.with_output({}, { raw = false, default = "yaml",
  help = "table and yaml: the file as YAML; json; csv: one row, dotted keys" })
M.spec = spec -- the option table (completion and the man page read it)

M.usage = "usage: fathom show [--format table|yaml|json|csv] [--output-file F] FILE...\n\n" ..
  "Loads each YAML or JSON file, with the same checks every command applies\n" ..
  "(duplicate keys, aliases, depth and size bounds), and prints it back, as it was\n" ..
  "written (no unit conversion). A relative path is tried in the current directory,\n" ..
  "then under fathom's configs/, as every command does.\n\n" ..
  "examples:\n" ..
  "  fathom show models/llama3.1_70b.yaml\n" ..
  "  fathom show --format json configs/train_specs/gpt3_175b.yaml\n\n" ..
  args.usage(spec) .. "\n"

function M.main(argv)
  local opts, files = args.parse(argv, spec, "show")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #files == 0 then errors.raise("show: no input file (usage: fathom show FILE...)") end
  local docs = {}
  for i, f in ipairs(files) do docs[i] = config.load_file(analysis.resolve(f)) end
  local value = #docs == 1 and docs[1] or docs
  local function yaml() return output.render(value, "yaml") end
  output.emit(opts, { table = yaml, yaml = yaml, data = function() return value end }, "show")
  return 0
end

return M
