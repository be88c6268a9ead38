-- fathom trace: the execution trace of one training step (or inference iteration), from
-- analyze's inputs: Chakra ET per rank (ASTRA-sim) or a Perfetto timeline.
local analyze = require("fathom.cmd.analyze")
local args = require("fathom.args")
local errors = require("fathom.errors")
local trace = require("fathom.trace")

local M = {}

local spec = {}
for _, o in ipairs(analyze.input_spec) do spec[#spec + 1] = o end
for _, o in ipairs({
  { name = "format", arg = "FMT", choices = { "chakra", "perfetto" }, default = "chakra",
    help = "chakra: one protobuf file per rank (ASTRA-sim); perfetto: one JSON timeline" },
  { name = "output-dir", arg = "DIR", help = "chakra: write DIR/<prefix>.<rank>.et and DIR/<prefix>.comm_groups.json" },
  { name = "output-file", arg = "FILE", help = "perfetto: the timeline's file" },
  { name = "prefix", arg = "NAME", default = trace.DEFAULT_PREFIX, help = "chakra: file name prefix" },
  { name = "ranks", arg = "LIST", help = "chakra: only these ranks, e.g. 0,8-15 (0-based) [default: all]" },
  { name = "classes", flag = true,
    help = "chakra: one file per distinct rank class (pipeline stage) and DIR/<prefix>.classes.json, "
      .. "the rank -> class map" },
  { name = "astra-configs", flag = true,
    help = "chakra: also DIR/<prefix>.network.yml, .system.json and .remote_memory.json, ASTRA-sim's "
      .. "analytical-backend configuration for the topology" },
  { name = "memory-reserve", arg = "SIZE", bytes = true, help = "as for analyze" },
  { name = "help", flag = true, help = "this help" },
}) do spec[#spec + 1] = o end
M.spec = spec -- the option table (completion and the man page read it)

M.usage = "usage: fathom trace --hardware-lib F --physical-topology F --logical-topology F \\\n" ..
  "                    --workload-spec F --model-spec F [--pass-mode training] \\\n" ..
  "                    [--format chakra] --output-dir DIR [--prefix NAME] [--ranks LIST | --classes]\n" ..
  "       fathom trace ... --format perfetto --output-file F\n\n" ..
  "Writes the execution trace of one training step (or one prefill / decode iteration\n" ..
  "with --pass-mode inference_prefill / inference_decode): in Chakra's format, one file per\n" ..
  "rank with its compute nodes (FLOPs, bytes, duration from fathom's kernel model),\n" ..
  "collectives (type, size, communicator group) and pipeline sends and receives in the\n" ..
  "schedule's order, plus ASTRA-sim's comm-group file; or as a Perfetto timeline.\n\n" ..
  "examples:\n" ..
  "  fathom trace --hardware-lib tests/fixtures/tiny/hardware.yaml \\\n" ..
  "      --physical-topology tests/fixtures/chakra/physical.yaml \\\n" ..
  "      --logical-topology tests/fixtures/chakra/logical.yaml \\\n" ..
  "      --workload-spec tests/fixtures/chakra/train.yaml --model-spec tests/fixtures/chakra/model.yaml \\\n" ..
  "      --output-dir traces          # one DIR/fathom.<rank>.et per rank, plus the comm groups\n" ..
  "  (the same) --classes --output-dir traces       # one file per distinct rank class\n" ..
  "  (the same) --format perfetto --output-file step.json\n\n" ..
  args.usage(spec) .. "\n"

local function mib(b) return b / 2 ^ 20 end

function M.main(argv)
  for _, a in ipairs(argv) do
    if a == "--help" or a == "-h" then
      io.stdout:write(M.usage)
      return 0
    end
  end
  local opts, extra = args.parse(argv, spec, "trace")
  if #extra > 0 then errors.raise("trace: unexpected argument '%s' (see 'fathom trace --help')", extra[1]) end
  local chakra = opts.format == "chakra"
  if chakra and not opts.output_dir then errors.raise("trace: --format chakra needs --output-dir DIR") end
  if chakra and opts.output_file then
    errors.raise("trace: --output-file is for --format perfetto; use --output-dir")
  end
  if not chakra and not opts.output_file then errors.raise("trace: --format perfetto needs --output-file F") end
  if not chakra and (opts.output_dir or opts.ranks or opts.classes or opts.astra_configs) then
    errors.raise("trace: --output-dir, --ranks, --classes and --astra-configs are for --format chakra")
  end
  if opts.ranks and opts.classes then errors.raise("trace: --ranks and --classes exclude each other") end
  local tr, raw = trace.compile(analyze.inputs_of(opts))
  if not chakra then
    trace.write_perfetto(tr, raw, opts.output_file)
    io.stderr:write(string.format("fathom: wrote the Perfetto timeline to %s\n", opts.output_file))
    return 0
  end
  local ranks = opts.ranks and trace.parse_ranks(opts.ranks, tr:info().ranks) or nil
  local s = trace.write_chakra(tr, opts.output_dir, { prefix = opts.prefix, ranks = ranks, classes = opts.classes,
    astra_configs = opts.astra_configs })
  local what = opts.classes and "the comm groups and the rank -> class map" or "the comm groups"
  if opts.astra_configs then what = what .. " and ASTRA-sim's network, system and memory files" end
  io.stderr:write(string.format("fathom: wrote %d Chakra trace%s (%d nodes, %.1f MiB) and %s to %s\n", s.ranks,
    s.ranks == 1 and "" or "s", math.floor(s.nodes), mib(s.bytes), what, opts.output_dir))
  return 0
end

return M
