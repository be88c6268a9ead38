-- fathom scenario run fullflat: the FullFlat co-design study (Tithi et al. 2025), tables and findings.
-- Usage: fathom scenario run fullflat [--full] [--jobs N] [--svg DIR] [--format table|json]
--   --full     the study's size (more domains and factors, every schedule and ZeRO stage)
--   --jobs N   local processes (default: the core count; under mpirun: the ranks)
--   --svg DIR  also write DIR/fullflat_mfu.svg (heatmap) and DIR/fullflat_gain.svg (line plot)
local errors = require("fathom.errors")
local output = require("fathom.output")
local here = (arg and arg[0] or "scenarios/fullflat/compare.lua"):match("^(.*)/[^/]*$") or "."
local study = dofile(here .. "/study.lua")
local report = dofile(here .. "/report.lua")

local opts = { size = "default", format = "table" }
local i = 1
while arg[i] do
  local a = arg[i]
  if a == "--full" then
    opts.size = "full"
  elseif a == "--jobs" or a == "--svg" or a == "--format" then
    local v = arg[i + 1]
    if v == nil then errors.raise("fullflat: %s needs a value", a) end
    if a == "--jobs" then
      opts.jobs = math.tointeger(tonumber(v))
      if not opts.jobs or opts.jobs < 1 then errors.raise("fullflat: --jobs %s: expected a positive integer", v) end
    elseif a == "--svg" then
      opts.svg = v
    else
      if v ~= "table" and v ~= "json" then errors.raise("fullflat: --format %s: expected table or json", v) end
      opts.format = v
    end
    i = i + 1
  else
    errors.raise("fullflat: unknown argument '%s' (--full, --jobs N, --svg DIR, --format table|json)", a)
  end
  i = i + 1
end

local res = study.run({ size = opts.size, jobs = opts.jobs })
if opts.svg then
  for name, text in pairs(report.svgs(study, res)) do output.write_file(opts.svg .. "/" .. name, text) end
end
if opts.format == "json" then
  output.write({ size = res.size, points = res.points, results = res.results, findings = study.findings(res) }, "json")
else
  io.stdout:write(report.text(study, res))
end
