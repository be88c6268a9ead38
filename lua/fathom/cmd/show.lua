-- fathom show FILE...: load input files and print them back (YAML or JSON),
-- the quickest check that a file reads as intended.
local args = require("fathom.args")
local config = require("fathom.config")
local errors = require("fathom.errors")
local output = require("fathom.output")

local M = {}

local spec = {
  { name = "format", arg = "FMT", choices = { "yaml", "json" }, default = "yaml", help = "output format" },
  { name = "output-file", arg = "FILE", help = "write here (whole or not at all) instead of stdout" },
  { name = "help", flag = true, help = "this help" },
}

M.usage = "usage: fathom show [--format yaml|json] [--output-file F] FILE...\n\n" ..
  "Loads each YAML or JSON file, with the same checks every command applies\n" ..
  "(duplicate keys, aliases, depth and size bounds), and prints it back.\n\n" ..
  args.usage(spec) .. "\n"

function M.main(argv)
  local opts, files = args.parse(argv, spec, "show")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #files == 0 then errors.raise("show: no input file (usage: fathom show FILE...)") end
  local docs = {}
  for i, f in ipairs(files) do docs[i] = config.load_file(f) end
  local value = #docs == 1 and docs[1] or docs
  output.write(value, opts.format, opts.output_file)
  return 0
end

return M
