-- fathom route: draw MoE routings, show the load, and time the all-to-all three
-- ways (closed form, packet-level simulation, alpha-beta collective).
local args = require("fathom.args")
local config = require("fathom.config")
local errors = require("fathom.errors")
local names = require("fathom.names")
local output = require("fathom.output")
local route = require("fathom.route")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local M = {}

-- The mesh's defaults as --help shows them: the core's values (fathom.route.mesh_defaults).
local MD = route.mesh_defaults
local function dflt(help, shown)
  if type(shown) == "number" then shown = string.format("%g", shown) end
  return string.format("%s [default: %s]", help, shown)
end
local function bw(b)
  return string.format("%g = %s", b, units.bandwidth(b))
end

local spec = {
  { name = "config", arg = "FILE", help = "YAML with router: and mesh: sections (flags override it)" },
  { name = "tokens", arg = "N", number = true, help = "tokens routed" },
  { name = "experts", arg = "E", number = true, help = "experts" },
  { name = "top-k", arg = "K", number = true, help = "experts per token" },
  { name = "gpus", arg = "G", number = true, help = "GPUs (nodes of the mesh)" },
  { name = "distribution", arg = "D", choices = names.route_distribution, help = "routing" },
  { name = "hot-ratio", arg = "R", number = true, help = "fraction of experts that are hot, (0, 1]" },
  { name = "hot-weight", arg = "W", number = true, help = "fraction of routings they receive, [0, 1]" },
  { name = "zipf-s", arg = "S", number = true, help = "Zipf exponent" },
  { name = "placement", arg = "P", choices = names.route_placement,
    help = "experts on GPUs" },
  { name = "hot-replicas", arg = "N", number = true,
    help = "copies of each expert heavier than the mean (replicated_hot) [default: 2]" },
  { name = "redundant-experts", arg = "N", number = true,
    help = "extra expert copies in all, a multiple of --gpus (eplb) [default: 0]" },
  { name = "hidden", arg = "H", number = true, help = "d_model (payload per routed token)" },
  { name = "seed", arg = "N", number = true, help = "random seed" },
  { name = "scheduler", arg = "S", choices = names.route_scheduler,
    help = dflt("fair: max-min fair share of every port per round; round_robin: the seed's", MD.scheduler) },
  { name = "port-bw", arg = "B", number = true,
    help = dflt("bytes/s per GPU per direction inside a cluster, shared by its flows (0 = none)", bw(MD.port_bw)) },
  { name = "inter-port-bw", arg = "B", number = true,
    help = dflt("bytes/s per GPU per direction between clusters, its NIC (0 = none)", bw(MD.inter_port_bw)) },
  { name = "cluster-size", arg = "N", number = true,
    help = dflt("GPUs per cluster (scale-up domain); 0 = one cluster", MD.cluster_size) },
  { name = "links", arg = "N", number = true, help = dflt("links per pair of GPUs", MD.links) },
  { name = "link-bw", arg = "B", number = true,
    help = dflt("bytes/s per link: the most one flow reaches inside a cluster", bw(MD.link_bw)) },
  { name = "inter-bw", arg = "B", number = true,
    help = dflt("bytes/s per link between clusters", bw(MD.inter_bw)) },
  { name = "packet-size", arg = "BYTES", number = true, help = dflt("packet size", MD.packet_size) },
  { name = "packet-prep-delay", arg = "S", number = true,
    help = dflt("per-round packet preparation (s)", MD.packet_prep_delay) },
  { name = "base-delay", arg = "S", number = true, help = dflt("per-round delay (s)", MD.base_delay) },
  { name = "initial-cpu-delay", arg = "S", number = true, help = dflt("one-time delay (s)", MD.initial_cpu_delay) },
  { name = "nic-rate", arg = "BYTES", number = true,
    help = dflt("NIC send/receive cap per round (0 = none)", MD.nic_rate) },
  { name = "round-robin-max-packets", arg = "N", number = true,
    help = "packets to a destination before the next (round_robin) [default: links]" },
  { name = "overlap-prep", flag = true, help = "overlap packet preparation with sending" },
  { name = "seed-window", arg = "S", number = true,
    help = dflt("the seed closed form's round: a link moves link-bw x S a round (s)", MD.seed_window) },
  { name = "trace", arg = "FILE", help = "write the per-round trace here" },
  { name = "trace-format", arg = "FMT", choices = { "csv", "jsonl" }, default = "csv", help = "trace format" },
  { name = "help", flag = true, help = "this help" },
}
spec = args.with_output(spec)
M.spec = spec -- the option table (completion and the man page read it)

M.usage = "usage: fathom route [--config FILE] [--experts E --top-k K --tokens N --gpus G]\n" ..
  "                    [--distribution uniform|hot|zipf|histogram ...] [mesh options]\n" ..
  "                    [--trace FILE [--trace-format csv|jsonl]] [--format table|yaml|json|csv]\n" ..
  "                    [--output-file F] [--raw-output]\n\n" ..
  "Routes tokens to experts from a seeded distribution, places experts on GPUs, and\n" ..
  "times the resulting all-to-all four ways: fathom's closed form (the busiest port or\n" ..
  "link in whole rounds), the seed's closed form (moe_comms, as written), a round-based\n" ..
  "packet simulation (GPU ports shared max-min fairly by their flows, or the seed's\n" ..
  "round robin; links per pair, packet size, per-round delays, NIC caps, clusters), and\n" ..
  "the alpha-beta direct all-to-all. The defaults are an H100-class fabric: a 450 GB/s\n" ..
  "NVLink port per GPU in clusters of 8, a 400 Gb/s NIC per GPU between them.\n\n" ..
  "examples:\n" ..
  "  fathom route --experts 256 --top-k 8 --gpus 64 --distribution hot --hot-ratio 0.25 --hot-weight 0.8\n" ..
  "  fathom route --experts 64 --top-k 2 --gpus 8 --format json --output-file route.json\n\n" ..
  args.usage(spec) .. "\n"

local router_flags = { tokens = "tokens", experts = "experts", top_k = "top_k", gpus = "gpus",
  distribution = "distribution", hot_ratio = "hot_ratio", hot_weight = "hot_weight", zipf_s = "zipf_s",
  placement = "placement", hot_replicas = "hot_replicas", redundant_experts = "redundant_experts", hidden = "hidden",
  seed = "seed" }
local mesh_flags = { links = "links", link_bw = "link_bw", packet_size = "packet_size",
  packet_prep_delay = "packet_prep_delay", base_delay = "base_delay", initial_cpu_delay = "initial_cpu_delay",
  nic_rate = "nic_rate", round_robin_max_packets = "round_robin_max_packets", overlap_prep = "overlap_prep",
  cluster_size = "cluster_size", inter_bw = "inter_bw", port_bw = "port_bw", inter_port_bw = "inter_port_bw",
  scheduler = "scheduler", seed_window = "seed_window" }

local function text(res, router, mesh)
  local rows = {}
  for g, load in ipairs(res.gpu_load) do
    rows[#rows + 1] = { g - 1, string.format("%.0f", load), string.format("%.3f", load / res.mean_gpu_load) }
  end
  local place = router.placement
  if res.replicas > 0 then place = string.format("%s, %d extra copies", place, res.replicas) end
  local out = { string.format("%d tokens x top-%d over %d experts (%s), %d GPUs (%s)\n\n", router.tokens,
    router.top_k, router.experts, router.distribution, router.gpus, place) }
  out[#out + 1] = tablefmt.render({ "GPU", "pairs received", "load / mean" }, rows)
  local sim, cf, sc = res.simulation, res.closed_form, res.seed_closed_form
  out[#out + 1] = string.format([[

imbalance: experts max/mean %.3f, GPUs max/mean %.3f
bytes: %s routed, %s between GPUs (%s per routed token-expert pair)

all-to-all time                           rounds      time
  %-31s %10d  %s
  %-31s %10s  %s
  %-31s %10d  %s
  %-31s %10s  %s
]], res.expert_imbalance, res.gpu_imbalance, units.bytes(res.total_bytes), units.bytes(res.offnode_bytes),
    units.bytes(res.bytes_per_pair), "closed form (busiest GPU)", math.tointeger(cf.rounds) or cf.rounds,
    units.time(cf.time_s), "seed closed form (moe_comms)", string.format("%.3g", sc.rounds), units.time(sc.time_s),
    "packet simulation (" .. mesh.scheduler .. ")", sim.rounds, units.time(sim.time_s), "alpha-beta (direct)", "",
    units.time(res.alpha_beta_s))
  return table.concat(out)
end

function M.main(argv)
  local opts, extra = args.parse(argv, spec, "route")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #extra > 0 then errors.raise("route: unexpected argument '%s'", extra[1]) end
  local doc = opts.config and config.load_mapping(opts.config, "route config") or {}
  doc.router = doc.router or {}
  doc.mesh = doc.mesh or {}
  for flag, key in pairs(router_flags) do
    if opts[flag] ~= nil then doc.router[key] = math.tointeger(opts[flag]) or opts[flag] end
  end
  for flag, key in pairs(mesh_flags) do
    if opts[flag] ~= nil then doc.mesh[key] = math.tointeger(opts[flag]) or opts[flag] end
  end
  local router, mesh = route.config(doc, "")
  local res = route.run(router, mesh, opts.trace and { path = opts.trace, format = opts.trace_format })
  res.matrix = nil
  output.emit(opts, { table = function() return text(res, router, mesh) end, data = function() return res end },
    "route")
  return 0
end

return M
