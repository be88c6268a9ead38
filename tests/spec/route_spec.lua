local core = require("fathom.core")
local route = require("fathom.route")
local h = require("helpers")
local json = require("fathom.format.json")

describe("fathom.core route and mesh", function()
  it("route() counts every (token, expert) pair once and fills the byte matrix", function()
    local res, m = core.route({ tokens = 1000, experts = 8, top_k = 2, gpus = 4, hidden = 16, act_bytes = 2,
      weight_bytes = 4, expert_id_bytes = 2, id_bytes = 4 })
    local sum = 0
    for _, v in ipairs(res.expert_load) do sum = sum + v end
    assert.are.equal(2000, sum)
    -- 16 x 2 + 4 + 2 + 2 x 4 = 46 bytes per pair
    assert.are.equal(46, res.bytes_per_pair)
    local total = 0
    for s = 1, 4 do for d = 1, 4 do total = total + m:get(s, d) end end
    assert.are.equal(2000 * 46, total)
    assert.are.equal(4, m:size())
  end)

  it("mesh_simulate() of an even exchange equals mesh_closed_form()", function()
    local _, m = core.route({ tokens = 4096, experts = 4, top_k = 1, gpus = 4, distribution = "histogram",
      histogram = { 1, 1, 1, 1 }, placement = "round_robin", hidden = 1024 })
    local sim = core.mesh_simulate({ links = 1, link_bw = 50e9, packet_size = 4096 }, m)
    assert.is_true(sim.rounds > 0 and sim.time_s > 0)
  end)

  it("mesh_closed_form() is the round formula", function()
    -- 1 MiB per pair, 4 KiB packets, 2 links: 128 rounds of (0.2 + 0.1 + 0.08192) us, + 5 us
    local t, rounds = core.mesh_closed_form({ links = 2, link_bw = 50e9, packet_size = 4096, port_bw = 0,
      packet_prep_delay = 1e-7, base_delay = 2e-7, initial_cpu_delay = 5e-6 }, 1048576)
    assert.are.equal(128, rounds)
    h.near(5e-6 + 128 * 3.8192e-7, t, 1e-12, "closed form")
  end)

  it("mesh_busiest() is the closed form's bound for any load; mesh_defaults are the core's", function()
    local d = core.mesh_defaults
    assert.are.equal(450e9, d.port_bw)
    assert.are.equal(50e9, d.inter_port_bw)
    assert.are.equal(8, d.cluster_size)
    assert.are.equal("fair", d.scheduler)
    -- 3 GPUs behind 450 GB/s ports: 1 and 2 each send 9 MB to 0; 0's ingress carries
    -- 18 MB = 4394.53 packets of 4096 B, one a round: 4395 rounds of 4096 / 450e9 s
    local m = core.byte_matrix({ { 0, 0, 0 }, { 9e6, 0, 0 }, { 9e6, 0, 0 } })
    local t, rounds = core.mesh_busiest({}, m)
    assert.are.equal(4395, rounds)
    h.near(4395 * 4096 / 450e9, t, 1e-12, "busiest")
    local sim = core.mesh_simulate({}, m)
    assert.are.equal(4395, sim.rounds)
    assert.has_error(function() core.byte_matrix({ { 0, 1 }, { 1 } }) end)
  end)

  it("collective() exposes the core's cost model", function()
    local level = { group_size = 8, bw_bytes_per_s = 1e11, latency_s = 1e-6 }
    local r = core.collective("all_reduce", "ring", 1e9, { level })
    h.near(2 * 7 / 8 * 1e9 / 1e11 + 14e-6, r.time_s, 1e-12, "ring")
    assert.are.equal("ring", r.algorithm)
    assert.has_error(function() core.collective("all_reduce", "ring", 1e9, { { group_size = 8 } }) end)
  end)

  it("goodput() follows Young's interval and the first-order expected time", function()
    -- system MTBF 18,000 s, checkpoints of 10 s: tau = 600 s; restart 300 s
    local g = core.goodput({ gpu_mtbf_s = 18000 * 10000, checkpoint_bytes = 20e9, checkpoint_bw = 2e9,
      restart_s = 300 }, 10000, 1000)
    h.near(600, g.interval_s, 1e-12, "tau")
    h.near(1000 * (1 + 10 / 600) / (1 - 600 / 18000), g.expected_time_s, 1e-12, "T")
  end)

  it("model_info() gives parameter counts and KV cache size", function()
    local info = core.model_info(require("fathom.spec").model("configs/models/llama3.1_405b.yaml"))
    assert.is_true(math.abs(info.params_total - 405e9) < 0.01 * 405e9)
    assert.are.equal(126 * 2 * 8 * 128, info.kv_cache_elems_per_token)
  end)
end)

describe("fathom route", function()
  local args = { "route", "--experts", "32", "--top-k", "4", "--gpus", "8", "--tokens", "20000",
    "--distribution", "hot", "--hot-ratio", "0.25", "--hot-weight", "0.8", "--format", "json" }

  it("is reproducible byte for byte, and another seed differs", function()
    local a = h.run(table.unpack(args))
    local b = h.run(table.unpack(args))
    assert.are.equal(0, a.code, a.stderr)
    assert.are.equal(a.stdout, b.stdout)
    local extra = { table.unpack(args) }
    extra[#extra + 1] = "--seed"
    extra[#extra + 1] = "2"
    local c = h.run(table.unpack(extra))
    assert.are_not.equal(a.stdout, c.stdout)
    local v = json.decode(a.stdout)
    assert.is_true(v.gpu_imbalance > 1.2)
    assert.is_true(v.simulation.rounds >= v.closed_form.rounds)
  end)

  it("writes the per-round trace as CSV or JSON lines", function()
    local t = os.tmpname()
    local extra = { table.unpack(args) }
    for _, x in ipairs({ "--trace", t, "--trace-format", "jsonl" }) do extra[#extra + 1] = x end
    local r = h.run(table.unpack(extra))
    assert.are.equal(0, r.code, r.stderr)
    local f = io.open(t)
    local first = f:read("l")
    f:close()
    os.remove(t)
    local row = json.decode(first)
    assert.are.equal(0, row.round)
    assert.is_true(row.rounds >= 1)
    assert.is_number(row.bytes)
  end)

  it("reads a YAML config", function()
    local c = os.tmpname()
    local f = io.open(c, "w")
    f:write("router: {experts: 16, top_k: 2, gpus: 4, tokens: 4096}\nmesh: {links: 2, packet_size: 2048}\n")
    f:close()
    local r = h.run("route", "--config", c, "--format", "json")
    os.remove(c)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(8192, json.decode(r.stdout).pairs)
  end)

  it("a YAML config's new mesh keys are checked with their position", function()
    local c = os.tmpname()
    local f = io.open(c, "w")
    f:write("router: {experts: 16, top_k: 2, gpus: 4, tokens: 4096}\nmesh:\n  port_bw: 100e9\n  scheduler: fifo\n")
    f:close()
    local r = h.run("route", "--config", c)
    os.remove(c)
    assert.are.equal(2, r.code)
    assert.are.equal(1, h.count_lines(r.stderr))
    assert.matches(":4:14: mesh%.scheduler: expected one of fair, round_robin, got 'fifo'", r.stderr)
  end)

  describe("nonsense gives one line and exit 2", function()
    local cases = {
      { { "--experts", "8", "--top-k", "9" }, "top_k 9 exceeds the 8 experts" },
      { { "--distribution", "hot", "--hot-ratio", "0" }, "router.hot_ratio: expected a value > 0" },
      { { "--link-bw", "0" }, "mesh.link_bw: expected a value > 0" },
      { { "--packet-size", "0" }, "mesh.packet_size: expected a value > 0" },
      { { "--scheduler", "round_robin", "--inter-bw", "1", "--cluster-size", "4" },
        "the packet simulation needs about .* pair%-steps" },
      { { "--placement", "eplb", "--redundant-experts", "4" }, "redundant_experts: expected a multiple of the 8 GPUs" },
      { { "--port-bw", "-1" }, "mesh.port_bw: expected a value >= 0" },
      { { "--scheduler", "fifo" }, "scheduler" },
    }
    for i, c in ipairs(cases) do
      it("case " .. i, function()
        local r = h.run("route", table.unpack(c[1]))
        assert.are.equal(2, r.code)
        assert.are.equal(1, h.count_lines(r.stderr))
        assert.matches(c[2], r.stderr)
      end)
    end
  end)

  it("imbalance() under even routing is near 1", function()
    local imb = route.imbalance({ distribution = "uniform", seed = 3, tokens = 100000 }, 64, 8, 8)
    assert.is_true(imb < 1.02)
  end)
end)

describe("routing feeds the step model", function()
  it("a hotter router raises the all-to-all and expert compute, monotonically", function()
    local sweep = os.tmpname()
    local f = io.open(sweep, "w")
    f:write("sweep:\n  workload_spec.moe_spec_v2.routing.hot_weight: [0.25, 0.5, 0.75, 0.9]\n")
    f:close()
    local out = os.tmpname()
    local T = "tests/fixtures/tiny/"
    local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
      "--logical-topology", T .. "moe_logical.yaml", "--workload-spec", T .. "moe_train.yaml",
      "--model-spec", T .. "moe_model.yaml", "--sweep-config", sweep, "--output-file", out, "--format", "json",
      "--raw-output")
    os.remove(sweep)
    assert.are.equal(0, r.code, r.stderr)
    local fh = io.open(out)
    local recs = json.decode(fh:read("a"))
    fh:close()
    os.remove(out)
    for i = 2, #recs do
      local a, b = recs[i - 1], recs[i]
      assert.is_true(b.expert_placement.expert_imbalance > a.expert_placement.expert_imbalance)
      assert.is_true(b.communication_per_batch_per_xpu.moe_all_to_all.raw_time_seconds >
        a.communication_per_batch_per_xpu.moe_all_to_all.raw_time_seconds)
      assert.is_true(b.compute_per_batch_per_xpu.forward.moe_ffn.time_seconds >
        a.compute_per_batch_per_xpu.forward.moe_ffn.time_seconds)
    end
    -- hot weight = hot ratio is uniform: about no imbalance
    assert.is_true(recs[1].expert_placement.expert_imbalance < 1.05)
  end)
end)

describe("expert placement in the step model", function()
  it("moe_spec_v2.routing with EPLB lowers the busiest EP rank's load and the step", function()
    local fathom = require("fathom")
    local T = "tests/fixtures/tiny/"
    local function run(placement)
      local w = { global_batch_size = 8, micro_batch_size = 2, seq_length = 1024, moe_spec_v2 = { routing = {
        distribution = "hot", hot_ratio = 0.125, hot_weight = 0.6, placement = placement, redundant_experts = 4 } } }
      local sc = fathom.scenario({ hardware = T .. "hardware.yaml", physical = T .. "physical.yaml",
        logical = T .. "moe_logical.yaml", model = T .. "moe_model.yaml", workload = w })
      return sc:evaluate(), sc.workload.expert_imbalance
    end
    -- 16 experts on EP 4: the 2 hot ones (30% each) share GPU 0 contiguously: 0.6 + 2 x 0.4 / 14
    -- = 0.657 of the load against 0.25, imbalance ~2.6; EPLB's 4 extra copies (one more slot
    -- per GPU) give each hot expert 3 copies of 0.1; packed 5 to a GPU, the busiest holds two
    -- of them and three cold experts: 0.2 + 3 x 0.4 / 14 = 0.286, imbalance ~1.14
    local rc, ic = run("contiguous")
    local re, ie = run("eplb")
    assert.is_true(ic > 2.4 and ic < 2.8, ic)
    assert.is_true(ie < 1.2, ie)
    assert.is_true(re.step_time_s < rc.step_time_s)
  end)
end)

describe("packet-level all-to-all in the step model", function()
  it("routing.packet_simulation times every dispatch and combine with the simulator", function()
    local fathom = require("fathom")
    local T = "tests/fixtures/tiny/"
    local base = { hardware = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "moe_logical.yaml",
      model = T .. "moe_model.yaml" }
    local w = { global_batch_size = 8, micro_batch_size = 2, seq_length = 1024, comp_comm_efficiency = 0.0,
      moe_spec_v2 = { routing = { distribution = "hot", hot_ratio = 0.25, hot_weight = 0.8,
        packet_simulation = true } } }
    base.workload = w
    local sc = fathom.scenario(base)
    local r = sc:evaluate()
    local sim = sc.routing_result.packet_simulation
    assert.is_true(sim.rounds > 0)
    h.near(sim.time_s, r.comm.ep.raw_s / r.comm.ep.calls_per_step, 1e-12, "per call")
    -- and it agrees with the alpha-beta model of the same exchange to within 1%
    w.moe_spec_v2.routing.packet_simulation = false
    local r2 = fathom.scenario(base):evaluate()
    h.near(r2.comm.ep.raw_s, r.comm.ep.raw_s, 0.01, "simulated vs alpha-beta")
    -- NCCL's all-to-all at a share of the scale-out rate: the simulated pod links carry it
    -- at that share too, so the two still agree, and both slow down
    local function at(share, simulate)
      w.ep_a2a_scale_out_efficiency = share
      w.moe_spec_v2.routing.packet_simulation = simulate
      return fathom.scenario(base):evaluate().comm.ep.raw_s
    end
    local full, half = at(1.0, true), at(0.5, true)
    h.near(at(0.5, false), half, 0.01, "simulated vs alpha-beta at half the scale-out rate")
    assert.is_true(half > 1.2 * full, string.format("%g vs %g", half, full))
    w.ep_a2a_scale_out_efficiency = nil
  end)
end)

describe("dispatch and combine apart, EPLB's slots in memory", function()
  local fathom = require("fathom")
  local T = "tests/fixtures/tiny/"
  local function base(w)
    return { hardware = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "moe_logical.yaml",
      model = T .. "moe_model.yaml", workload = w }
  end

  it("an FP8 dispatch is simulated at its own width, the BF16 combine at its own", function()
    local w = { global_batch_size = 8, micro_batch_size = 2, seq_length = 1024, comp_comm_efficiency = 0.0,
      moe_dispatch_float_size_bytes = 1,
      moe_spec_v2 = { routing = { distribution = "uniform", packet_simulation = true } } }
    local sc = fathom.scenario(base(w))
    local r = sc:evaluate()
    local sim = sc.routing_result.packet_simulation
    -- 1 + 4/128 bytes an element against 2: the dispatch carries 0.515625 of the combine's bytes
    h.near(1.03125 / 2, sim.dispatch_s / sim.time_s, 0.03, "dispatch / combine")
    -- one of each per pass: the step's EP time is half its calls at each
    h.near((sim.dispatch_s + sim.time_s) / 2, r.comm.ep.raw_s / r.comm.ep.calls_per_step, 1e-12, "per call")
  end)

  it("routing.placement eplb with redundant experts holds the replicas like experts", function()
    local function run(redundant)
      local w = { global_batch_size = 8, micro_batch_size = 2, seq_length = 1024,
        moe_spec_v2 = { routing = { distribution = "hot", placement = "eplb", redundant_experts = redundant } } }
      return fathom.scenario(base(w)):evaluate()
    end
    local r0, r4, r8 = run(0), run(4), run(8)
    -- 16 experts over EP 4: 4 a GPU; 4 redundant slots (one a GPU) make it 5, 8 make it 6:
    -- the expert weights grow by a quarter of themselves a slot, the dense part not at all
    local grow = r4.memory.components.weights - r0.memory.components.weights
    assert.is_true(grow > 0)
    h.near(2 * grow, r8.memory.components.weights - r0.memory.components.weights, 1e-9, "linear in slots")
    assert.is_true(r4.memory.components.optimizer_states > r0.memory.components.optimizer_states)
    -- refused: slots not a multiple of EP
    local w = { global_batch_size = 8, micro_batch_size = 2, seq_length = 1024,
      moe_spec_v2 = { routing = { distribution = "hot", placement = "eplb", redundant_experts = 2 } } }
    local ok, err = pcall(function() return fathom.scenario(base(w)):evaluate() end)
    assert.is_false(ok)
    assert.matches("multiple of the 4 GPUs", tostring(err))
  end)
end)

describe("fathom route, four ways to time the all-to-all", function()
  it("the seed's closed form reproduces the seed's own example (moe_comms README Sec. 3.3)", function()
    -- params.py: 8 nodes, 1 link, 100 B/ms, 20-byte packets, 1 ms prep, 2 ms base delay;
    -- LOAD_PER_NODE 11,200 B: 2 + floor(100/20) x (1 + 20/100) = 8 ms a round,
    -- 11,200 x 8 / (1 x 28 x 100) = 32 rounds, 256 ms
    local mesh = { nodes = 8, links = 1, link_bw = 100 / 1e-3, packet_size = 20, packet_prep_delay = 1e-3,
      base_delay = 2e-3, initial_cpu_delay = 0, seed_window = 1e-3 }
    local t, rounds = core.mesh_seed_closed_form(mesh, 11200)
    h.near(0.256, t, 1e-12, "total")
    h.near(32, rounds, 1e-12, "rounds")
  end)

  local function run_json(...)
    local r = h.run("route", "--format", "json", ...)
    assert.are.equal(0, r.code, r.stderr)
    return json.decode(r.stdout)
  end

  it("skew moves every column; under even routing the simulation equals the closed form and alpha-beta", function()
    local base = { "--experts", "64", "--top-k", "8", "--gpus", "8", "--tokens", "8192", "--distribution", "hot",
      "--hot-ratio", "0.125" }
    local function at(w)
      local a = { table.unpack(base) }
      a[#a + 1] = "--hot-weight"
      a[#a + 1] = tostring(w)
      return run_json(table.unpack(a))
    end
    local even, skewed = at(0.125), at(0.6)
    assert.is_true(skewed.gpu_imbalance > 2 * even.gpu_imbalance)
    local function cols(v)
      return { v.closed_form.time_s, v.seed_closed_form.time_s, v.simulation.time_s, v.alpha_beta_s }
    end
    local ce, cs = cols(even), cols(skewed)
    for i = 1, 4 do assert.is_true(cs[i] > 1.8 * ce[i], "column " .. i) end
    -- one cluster of 8 behind 450 GB/s ports: the busiest port sets all three
    h.near(even.closed_form.time_s, even.simulation.time_s, 0.01, "fair simulation vs closed form")
    h.near(even.alpha_beta_s, even.simulation.time_s, 0.01, "simulation vs alpha-beta")
    h.near(skewed.alpha_beta_s, skewed.simulation.time_s, 0.01, "skewed: simulation vs alpha-beta")
  end)

  it("--help shows the realistic defaults", function()
    local r = h.run("route", "--help")
    assert.are.equal(0, r.code)
    assert.matches("%-%-port%-bw B%s+[^\n]*%[default: 4%.5e%+11 = 450 GB/s%]", r.stdout)
    assert.matches("%-%-inter%-port%-bw B%s+[^\n]*%[default: 5e%+10 = 50 GB/s%]", r.stdout)
    assert.matches("%-%-cluster%-size N%s+[^\n]*%[default: 8%]", r.stdout)
    assert.matches("%-%-scheduler S%s+[^\n]*%[default: fair%]", r.stdout)
  end)

  it("replicated_hot never makes uniform routing worse; EPLB balances a hot router", function()
    local base = { "--experts", "64", "--top-k", "8", "--gpus", "8", "--tokens", "20000" }
    local function with(...)
      local a = { table.unpack(base) }
      for _, x in ipairs({ ... }) do a[#a + 1] = x end
      return run_json(table.unpack(a))
    end
    local plain = with("--placement", "contiguous")
    local rep = with("--placement", "replicated_hot", "--hot-replicas", "4")
    assert.are.equal(plain.gpu_imbalance, rep.gpu_imbalance)
    assert.are.equal(0, rep.replicas)
    local hot = { "--distribution", "hot", "--hot-ratio", "0.125", "--hot-weight", "0.5" }
    local c = with("--placement", "contiguous", table.unpack(hot))
    local r = with("--placement", "replicated_hot", "--hot-replicas", "8", table.unpack(hot))
    local e = with("--placement", "eplb", "--redundant-experts", "8", table.unpack(hot))
    assert.is_true(c.gpu_imbalance > 3.5)
    assert.is_true(r.gpu_imbalance < 1.15)
    assert.is_true(e.gpu_imbalance < 1.05)
    assert.is_true(e.simulation.time_s < c.simulation.time_s / 3)
  end)
end)

describe("the packet simulation on the Hot Interconnects configs", function()
  local fathom = require("fathom")
  local study = dofile("scenarios/hoti25/study.lua")

  -- Per call: the alpha-beta EP all-to-all of the step model with an even load (imbalance 1),
  -- and the fair simulation of the same bytes, spread evenly, over the same shared levels.
  for _, sys in ipairs({ "passage", "alternative", "matched" }) do
    for _, c in ipairs(study.configs) do
      it(string.format("%s config %d (%d experts): on an even load equals alpha-beta", sys, c[1], c[2]), function()
        local sc = fathom.scenario(study.paths(sys, c[1], c[2]))
        sc.workload.expert_imbalance = 1.0
        local plan = sc:compile()
        local r = plan:evaluate()
        local ab = r.comm.ep.raw_s / r.comm.ep.calls_per_step
        local deg = plan:degrees()
        local n, bytes = deg.ep, r.comm.ep.bytes_per_call
        local rows = {}
        for s = 1, n do
          rows[s] = {}
          for d = 1, n do rows[s][d] = s == d and 0 or bytes / n end
        end
        local levels = plan:group_levels(require("fathom.names").key("comm_kind").ep)
        local mesh = route.step_mesh(levels, deg.ep_su, 4096, bytes)
        local sim = core.mesh_simulate(mesh, core.byte_matrix(rows))
        h.near(ab, sim.time_s, 0.001, "simulated vs alpha-beta") -- the issue asks for 5%
      end)
    end
  end

  it("uniform routing through the step model (packet_simulation) stays within 5% of alpha-beta", function()
    for _, case in ipairs({ { "passage", 1, 32 }, { "alternative", 2, 64 } }) do
      local function ep(sim)
        local sc = fathom.scenario(study.paths(case[1], case[2], case[3]))
        sc.workload.routing = { distribution = "uniform", seed = 1, tokens = 65536, placement = "contiguous",
          hot_ratio = 0.25, hot_weight = 0.5, zipf_s = 1, hot_replicas = 2, packet_simulation = sim,
          packet_size = 4096 }
        return sc:evaluate().comm.ep.raw_s
      end
      h.near(ep(false), ep(true), 0.05, case[1] .. " simulated vs alpha-beta")
    end
  end)
end)
