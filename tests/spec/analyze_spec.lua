local h = require("helpers")
local fathom = require("fathom")
local json = require("fathom.format.json")

local T = "tests/fixtures/tiny/"
local function args(extra)
  local a = { "analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
    "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml",
    "--model-spec", T .. "model.yaml" }
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return table.unpack(a)
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

describe("fathom analyze", function()
  it("prints a summary table for one point", function()
    local r = h.run(args())
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("step", r.stdout)
    assert.matches("yes", r.stdout)
  end)

  it("writes one record per sweep point in the documented schema (json, raw)", function()
    local sweep = os.tmpname()
    write(sweep, "sweep:\n  workload_spec.micro_batch_size: [1, 2, 4]\n")
    local out = os.tmpname()
    local r = h.run(args({ "--sweep-config", sweep, "--output-file", out, "--format", "json", "--raw-output" }))
    assert.are.equal(0, r.code, r.stderr)
    local f = assert(io.open(out))
    local recs = json.decode(f:read("a"))
    f:close()
    os.remove(out)
    os.remove(sweep)
    assert.are.equal(3, #recs)
    for _, rec in ipairs(recs) do
      for _, k in ipairs({ "configuration", "model_configuration", "expert_placement", "time",
        "compute_per_batch_per_xpu", "memory_traffic_per_batch_per_xpu", "communication_per_batch_per_xpu",
        "ratios", "memory_footprint", "memory_traffic_details_per_batch" }) do
        assert.is_table(rec[k], k)
      end
      assert.is_number(rec.time.total_time_seconds)
      assert.is_number(rec.time.total_time)
      assert.is_number(rec.memory_footprint.total_peak_memory_per_chip_bytes)
    end
    -- more micro-batches of 1 than of 4: 8 / (1 x 2) = 4 vs 1
    assert.are.equal(4, recs[1].configuration.microbatches_per_step)
    assert.are.equal(1, recs[3].configuration.microbatches_per_step)
  end)

  it("keeps an invalid sweep point as a record with its error", function()
    local sweep = os.tmpname()
    write(sweep, "sweep:\n  workload_spec.micro_batch_size: [2, 3]\n")
    local out = os.tmpname()
    local r = h.run(args({ "--sweep-config", sweep, "--output-file", out, "--format", "json" }))
    assert.are.equal(0, r.code, r.stderr)
    local f = assert(io.open(out))
    local recs = json.decode(f:read("a"))
    f:close()
    os.remove(out)
    os.remove(sweep)
    assert.is_nil(recs[1].error)
    assert.matches("not a multiple of micro_batch_size x DP = 3 x 2 = 6", recs[2].error)
    assert.is_false(recs[2].valid)
  end)

  it("readable output by default: times and bytes with units", function()
    local out = os.tmpname()
    local r = h.run(args({ "--output-file", out }))
    assert.are.equal(0, r.code, r.stderr)
    local f = assert(io.open(out))
    local text = f:read("a")
    f:close()
    os.remove(out)
    assert.matches("total_time: [%d%.]+ s\n", text)
    assert.matches("total_time_seconds: [%d%.]+\n", text)
    assert.matches("GiB", text)
  end)

  describe("bad workloads give one line with file:line:col and exit 2", function()
    local cases = {
      { "global_batch_size: 8\nmicro_batch_size: 3\nseq_length: 1024\n",
        ":1:20: global_batch_size: global_batch_size 8 is not a multiple of micro_batch_size x DP" },
      { "global_batch_size: 8\nmicro_batch_size: 2\nseq_length: 1024\ndp_spec: {variant: ZERO9}\n",
        ":4:20: dp_spec.variant: expected one of DDP, ZERO1, ZERO2, ZERO3, FSDP, got 'ZERO9'" },
      { "global_batch_size: 8\nmicro_batch_size: 2\nseq_lenght: 1024\n",
        ":3:1: seq_lenght: unknown key %(did you mean 'seq_length'%?%)" },
      { "global_batch_size: 8\nmicro_batch_size: 2\nseq_length: 1024\ncomp_comm_efficiency: 1.5\n",
        ":4:23: comp_comm_efficiency: expected a value <= 1, got 1.5 %(a fraction in %[0, 1%]%)" },
      { "global_batch_size: 8\nmicro_batch_size: 2\n",
        "seq_length: missing required key" },
    }
    for i, c in ipairs(cases) do
      it("case " .. i, function()
        local w = os.tmpname()
        write(w, c[1])
        local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
          "--logical-topology", T .. "logical.yaml", "--workload-spec", w, "--model-spec", T .. "model.yaml")
        os.remove(w)
        assert.are.equal(2, r.code, r.stderr)
        assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
        assert.matches(c[2], r.stderr)
      end)
    end
  end)

  it("names a logical topology that does not tile the GPUs", function()
    local l = os.tmpname()
    write(l, "dimensions:\n  - {logical_tag: TP_Attn, maps_to_physical_dimension_name: up, size: 2}\n" ..
      "  - {logical_tag: DP_Attn, maps_to_physical_dimension_name: out, size: 4}\n")
    local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
      "--logical-topology", l, "--workload-spec", T .. "train.yaml", "--model-spec", T .. "model.yaml")
    os.remove(l)
    assert.are.equal(2, r.code)
    assert.matches(":3:5: logical%.dimensions%[2%]: physical dimension 2 has 2 GPUs but DP_Attn", r.stderr)
  end)

  it("prints the asked format on stdout (a pipe gets JSON), the summary table by default", function()
    local base = { "analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
      "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml", "--model-spec",
      T .. "model.yaml" }
    local function run(...)
      local argv = {}
      for _, a in ipairs(base) do argv[#argv + 1] = a end
      for _, a in ipairs({ ... }) do argv[#argv + 1] = a end
      return h.run(table.unpack(argv))
    end
    local j = run("--format", "json", "--raw-output")
    assert.are.equal(0, j.code, j.stderr)
    local rec = require("cjson").decode(j.stdout)
    assert.is_number(rec[1].time.step_time_seconds)
    local t, d = run("--format", "table"), run()
    assert.are.equal(0, t.code)
    assert.matches("^#%s+point", t.stdout)
    assert.are.equal(t.stdout, d.stdout)
  end)

  it("refuses more physical dimensions than the core holds, with a hint", function()
    local p = os.tmpname()
    local dims = { "  - {name: up, interconnect_name: scale_up, topology_type: switched, size: 2}",
      "  - {name: out, interconnect_name: scale_out, topology_type: switched, size: 2}" }
    for i = 3, 9 do
      dims[i] = string.format("  - {name: d%d, interconnect_name: scale_up, topology_type: switched, size: 1}", i)
    end
    write(p, "name: nine\nnode_definition_ref: TOY\ndimensions:\n" .. table.concat(dims, "\n") .. "\n")
    local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", p,
      "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml",
      "--model-spec", T .. "model.yaml")
    os.remove(p)
    assert.are.equal(2, r.code, r.stderr)
    assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
    assert.matches(":4:3: dimensions: expected at most 8 physical dimensions, got 9; drop dimensions of size 1",
      r.stderr)
  end)

  it("says a directory given as an input file is not a file", function()
    local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T,
      "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml",
      "--model-spec", T .. "model.yaml")
    assert.are.equal(2, r.code, r.stderr)
    assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
    assert.matches("tiny/: cannot read file %(.*%); expected a YAML or JSON file", r.stderr)
  end)

  it("runs a TP sweep from the command line with the shipped configs", function()
    local r = h.run("analyze", "--hardware-lib", "configs/hardware/hardware_library.yaml",
      "--physical-topology", "configs/topology_zoo/physical/dgx_a100_1024.yaml",
      "--logical-topology", "configs/topology_zoo/logical/tp8_pp8.yaml",
      "--workload-spec", "configs/train_specs/gpt3_175b.yaml", "--model-spec", "configs/models/gpt3_175b.yaml",
      "--sweep-config", "configs/sweep_configs/tp_sweep.yaml")
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("TP_Attn.size=8", r.stdout)
    assert.matches("TP_Attn.size=2 +2 +8 +64", r.stdout)
  end)
end)

describe("fathom (Lua API)", function()
  local base = { hardware = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "logical.yaml",
    model = T .. "model.yaml", workload = T .. "train.yaml" }

  it("scenario{}:evaluate() returns the core's raw result", function()
    local sc = fathom.scenario(base)
    local r = sc:evaluate()
    assert.is_true(r.step_time_s > 0)
    assert.is_true(r.memory.fits)
    local rec = sc:record(r)
    assert.are.equal(2, rec.configuration.tp_attn)
  end)

  it("analyze{} sweeps TP from a script, each point tiled by the auto DP", function()
    local recs = fathom.analyze({
      hardware = "configs/hardware/hardware_library.yaml",
      physical = "configs/topology_zoo/physical/dgx_a100_1024.yaml",
      logical = "configs/topology_zoo/logical/tp8_pp8.yaml",
      model = "configs/models/gpt3_175b.yaml", workload = "configs/train_specs/gpt3_175b.yaml",
      sweep = { sweep = { ["logical_topology.dimensions.TP_Attn.size"] = { 2, 4, 8 } } },
    })
    assert.are.equal(3, #recs)
    for i, tp in ipairs({ 2, 4, 8 }) do
      assert.are.equal(tp, recs[i].configuration.tp_attn)
      assert.are.equal(16 * 8 // tp, recs[i].configuration.dp_attn)
    end
    -- TP 8 needs the least memory per GPU.
    assert.is_true(recs[3].memory_footprint.total_peak_memory_per_chip_bytes <
      recs[1].memory_footprint.total_peak_memory_per_chip_bytes)
  end)
end)

describe("step trace (Chrome/Perfetto)", function()
  it("lays out exactly one step: its events end at the step time", function()
    local trace = require("fathom.format.trace")
    for _, sched in ipairs({ "INTERLEAVED", "GPIPE" }) do
      local sc = fathom.scenario({
        hardware = "configs/hardware/hardware_library.yaml",
        physical = "configs/topology_zoo/physical/dgx_a100_1024.yaml",
        logical = "configs/topology_zoo/logical/tp8_pp8.yaml",
        model = "configs/models/gpt3_175b.yaml", workload = "configs/train_specs/gpt3_175b.yaml" })
      sc.workload.pp_variant = sched
      sc.workload.virtual_stages = sched == "GPIPE" and 1 or 2
      local r = sc:evaluate()
      local tr = require("fathom.core").trace_compile(sc:compile())
      local chunks = tr:info().chunks
      local order = trace.stage_order(tr, 0)
      local ev, finish = trace.events(r, order, chunks)
      h.near(r.step_time_s, finish, 1e-9, "trace end")
      -- every model chunk of every micro-batch, forward and backward, in the core's order
      local passes = {}
      for _, e in ipairs(ev) do
        if e.cat == "forward" or e.cat == "backward" then passes[#passes + 1] = e end
      end
      assert.are.equal(sched == "GPIPE" and 1 or 2, chunks)
      assert.are.equal(2 * r.microbatches * chunks, #passes)
      for i, e in ipairs(passes) do
        assert.are.equal(order[i].forward and "forward" or "backward", e.cat)
        assert.are.equal(order[i].mb + 1, e.args.microbatch)
        assert.are.equal(order[i].chunk, e.args.chunk)
      end
      -- GPipe runs every forward before any backward; 1F1B-style schedules do not
      local first_b = 1
      while passes[first_b].cat == "forward" do first_b = first_b + 1 end
      assert.are.equal(sched == "GPIPE", first_b == r.microbatches + 1)
    end
  end)

  it("analyze --trace-file writes a Chrome trace", function()
    local out = os.tmpname()
    local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
      "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml", "--model-spec",
      T .. "model.yaml", "--trace-file", out)
    assert.are.equal(0, r.code, r.stderr)
    local f = io.open(out)
    local v = json.decode(f:read("a"))
    f:close()
    os.remove(out)
    assert.is_true(#v.traceEvents > 4)
  end)
end)

describe("run with failures, energy and cost", function()
  it("adds goodput, expected failures, energy and cost to the time record", function()
    local w = os.tmpname()
    local f = io.open(w, "w")
    f:write("global_batch_size: 8\nmicro_batch_size: 2\nseq_length: 1024\ntotal_train_tokens: 1.0e10\n" ..
      "reliability: {gpu_mtbf_hours: 50000, checkpoint_bandwidth: 2.0e9, restart_minutes: 10}\n" ..
      "cost: {pue: 1.2, usd_per_gpu_hour: 2.5}\n")
    f:close()
    local out = os.tmpname()
    local r = h.run("analyze", "--hardware-lib", "configs/hardware/hardware_library.yaml", "--physical-topology",
      "configs/topology_zoo/physical/dgx_h100_1node.yaml",
      "--logical-topology", "configs/topology_zoo/logical/tp8.yaml",
      "--workload-spec", w, "--model-spec", "configs/models/llama3.1_8b.yaml", "--output-file", out, "--format", "json",
      "--raw-output")
    os.remove(w)
    assert.are.equal(0, r.code, r.stderr)
    local fh = io.open(out)
    local rec = json.decode(fh:read("a"))[1]
    fh:close()
    os.remove(out)
    local run = rec.time.run_with_failures
    assert.is_true(run.goodput > 0.9 and run.goodput < 1)
    assert.is_true(run.expected_time_seconds > rec.time.total_time_seconds)
    -- 8 GPUs x 700 W x T x 1.2, in kWh; 8 x T / 3600 x $2.5
    h.near(8 * 700 * run.expected_time_seconds * 1.2 / 3.6e6, run.energy_kwh, 1e-12, "energy")
    h.near(8 * run.expected_time_seconds / 3600 * 2.5, run.cost_usd, 1e-12, "cost")
  end)

  describe("--memory-reserve", function()
    local function footprint(extra)
      local r = h.run(args({ "--format", "json", "--raw-output", table.unpack(extra) }))
      assert.are.equal(0, r.code, r.stderr)
      return json.decode(r.stdout)[1].memory_footprint
    end

    it("replaces the runtime reserve, which counts on the accelerator and in fits", function()
      local def = footprint({})
      local none = footprint({ "--memory-reserve", "0" })
      -- default: 1 GiB of runtime context (fth_mem_reserve_default)
      assert.are.equal(2 ^ 30, def.components.runtime_context_bytes)
      assert.are.equal(0, none.components.runtime_context_bytes)
      h.near(def.total_peak_memory_per_chip_bytes - 2 ^ 30, none.total_peak_memory_per_chip_bytes, 1e-12, "peak")
      h.near(def.headroom_bytes + 2 ^ 30, none.headroom_bytes, 1e-12, "headroom")
      -- the tiny node holds 80e9 bytes; the rest of the footprint is 1.37 GB, so a 75 GiB
      -- (80.5 GB) reserve does not fit where 73 GiB (78.4 GB) does
      local big = footprint({ "--memory-reserve", "75GiB" })
      assert.is_false(big.fits)
      assert.is_true(big.headroom_bytes < 0)
      assert.is_true(footprint({ "--memory-reserve=73GiB" }).fits)
      local r = h.run(args({ "--memory-reserve", "75GiB" }))
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("NO: xpu_memory", r.stdout)
    end)

    it("refuses a size it cannot read with one line and exit 2", function()
      for _, bad in ipairs({ "lots", "-1GiB", "2XB", "inf" }) do
        local r = h.run(args({ "--memory-reserve", bad }))
        assert.are.equal(2, r.code, bad)
        assert.matches("^fathom: analyze: option '%-%-memory%-reserve' expects a size", r.stderr)
        assert.are.equal(1, select(2, r.stderr:gsub("\n", "")), r.stderr)
      end
      local r = h.run("search", "--model", "gpt3_175b", "--hardware", "A100_80GB_SXM", "--gpus", "8",
        "--memory-reserve", "5%")
      assert.are.equal(2, r.code)
      assert.matches("search: option '%-%-memory%-reserve' expects a size", r.stderr)
    end)

    it("reads the workload keys with their ranges", function()
      local spec = require("fathom.spec")
      local base = { global_batch_size = 8, micro_batch_size = 1, seq_length = 128 }
      local w = spec.train(base)
      assert.are.equal(fathom.core.defaults.train.memory_reserve_bytes, w.memory_reserve_bytes)
      assert.are.equal(0.05, w.memory_fragmentation_fraction)
      for k, v in pairs({ memory_reserve_bytes = -1, memory_fragmentation_fraction = 1 }) do
        local t = { [k] = v }
        for bk, bv in pairs(base) do t[bk] = bv end
        local ok, err = pcall(spec.train, t)
        assert.is_false(ok, k)
        assert.matches(k, tostring(err))
      end
    end)
  end)
end)
