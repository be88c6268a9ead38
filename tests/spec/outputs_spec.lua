-- Outputs: every command takes --format table|yaml|json|csv (svg where it draws, jsonl
-- where it writes a sweep's records) and
-- --output-file from one definition (fathom.args.output_options); JSON and CSV carry raw
-- SI numbers; YAML is readable unless --raw-output; files are written whole. The plots
-- have titles, titled axes with units, nice ticks, a colour-blind-safe palette, a legend.
local h = require("helpers")
local json = require("cjson")

local T = "tests/fixtures/tiny/"
local ANALYZE = { "analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
  "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml", "--model-spec", T .. "model.yaml" }
local SEARCH = { "search", "--model", "llama3.1_8b", "--hardware", "H100_SXM", "--gpus", "8", "--global-batch", "32",
  "--workers", "1", "--top", "3" }
local SEARCH_FAST = { "search", "--model", "llama3.1_8b", "--hardware", "H100_SXM", "--gpus", "8", "--global-batch",
  "32", "--workers", "1", "--top", "3", "--fix", "pp=1,tp=2" }

-- One invocation per command, each fast (under a second).
local commands = {
  { name = "estimate", argv = { "estimate", "--model", "llama3.1_8b", "--hardware", "H100_SXM", "--gpus", "8",
    "--tp", "2" } },
  { name = "search", argv = SEARCH_FAST, svg = true },
  { name = "analyze", argv = ANALYZE, svg = true, jsonl = true },
  { name = "route", argv = { "route", "--experts", "16", "--top-k", "2", "--gpus", "4", "--tokens", "256" } },
  { name = "validate", argv = { "validate", "--cases", "validation/korthikanti2022_cases.yaml", "--no-loso" } },
  { name = "show", argv = { "show", "models/llama3.1_8b.yaml" } },
  { name = "scenario list", argv = { "scenario", "list" } },
}

local function run(argv, ...)
  local a = {}
  for _, x in ipairs(argv) do a[#a + 1] = x end
  for _, x in ipairs({ ... }) do a[#a + 1] = x end
  return h.run(table.unpack(a))
end

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- a readable quantity ("553.1 ms", "15.09%", "1.5 GiB") where a raw number belongs
local READABLE = { "%d ms\"?,", "%d s\"?,", "%d%%", "%d GiB", "%d MiB", "%d TFLOP" }

describe("outputs", function()
  for _, c in ipairs(commands) do
    describe(c.name, function()
      it("--format table|yaml|json|csv print that format on stdout, exit 0", function()
        local t = run(c.argv, "--format", "table")
        assert.are.equal(0, t.code, t.stderr)
        assert.is_true(#t.stdout > 0)
        local j = run(c.argv, "--format", "json")
        assert.are.equal(0, j.code, j.stderr)
        assert.is_table(json.decode(j.stdout))
        local y = run(c.argv, "--format", "yaml")
        assert.are.equal(0, y.code, y.stderr)
        assert.is_nil(y.stdout:match("^[%[{]"), "yaml, not json")
        local v = run(c.argv, "--format", "csv")
        assert.are.equal(0, v.code, v.stderr)
        assert.is_true(h.count_lines(v.stdout) >= 2, v.stdout)
        for _, pat in ipairs(READABLE) do
          assert.is_nil(v.stdout:match(pat), c.name .. " csv has a readable unit: " .. pat)
        end
        assert.is_nil(v.stdout:match("table: 0x"), "csv flattened a table to its address")
      end)

      it("--output-file writes the asked format whole and prints nothing", function()
        local path = os.tmpname()
        local r = run(c.argv, "--format", "json", "--output-file", path)
        assert.are.equal(0, r.code, r.stderr)
        assert.are.equal("", r.stdout)
        assert.is_table(json.decode(slurp(path)))
        os.remove(path)
      end)

      it("an unwritable --output-file is one line, exit 2, nothing left behind", function()
        local r = run(c.argv, "--format", "json", "--output-file", "/nonexistent-dir/out.json")
        assert.are.equal(2, r.code)
        assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
        assert.matches("cannot write '/nonexistent%-dir/out%.json'", r.stderr)
      end)

      it(c.svg and "--format svg draws" or "--format svg is refused: no plot", function()
        local r = run(c.argv, "--format", "svg")
        if c.svg then
          assert.are.equal(0, r.code, r.stderr)
          assert.matches("^<svg ", r.stdout)
        else
          assert.are.equal(2, r.code)
          assert.matches("must be one of table, yaml, json, csv, got 'svg'", r.stderr)
        end
      end)
    end)
  end

  it("one definition of the output options: every command lists the same formats", function()
    for _, c in ipairs(commands) do
      local r = run(c.argv[1] == "scenario" and { "scenario" } or { c.argv[1] }, "--help")
      assert.are.equal(0, r.code, c.name)
      assert.matches("%-%-format FMT .*%(table|yaml|json" .. (c.jsonl and "|jsonl" or "") .. "|csv"
        .. (c.svg and "|svg" or "") .. "%)", r.stdout)
      assert.matches("%-%-output%-file FILE", r.stdout)
    end
  end)

  it("analyze --format json on stdout: raw numbers a pipe can use (was readable text)", function()
    local r = run(ANALYZE, "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local rec = json.decode(r.stdout)[1]
    assert.are.equal("number", type(rec.time.step_time_seconds))
    assert.are.equal("number", type(rec.time.mfu))
    assert.are.equal("number", type(rec.memory_footprint.total_peak_memory_per_chip_bytes))
    -- YAML stays readable, raw with --raw-output
    local y = run(ANALYZE, "--format", "yaml")
    assert.matches("step_time_seconds: [%d.]+ m?s\n", y.stdout)
    y = run(ANALYZE, "--format", "yaml", "--raw-output")
    assert.matches("step_time_seconds: [%d.e%-]+\n", y.stdout)
  end)

  it("analyze --format jsonl: one compact record per line, the same record as json's", function()
    local r = run(ANALYZE, "--format", "jsonl")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(1, h.count_lines(r.stdout))
    local rec = json.decode(r.stdout)
    local whole = json.decode(run(ANALYZE, "--format", "json").stdout)[1]
    assert.are.equal(whole.time.step_time_seconds, rec.time.step_time_seconds)
    assert.are.equal(whole.configuration.tp_attn, rec.configuration.tp_attn)
  end)

  it("analyze records only what was modelled: no goodput, MTBF or cost without their inputs", function()
    local w = os.tmpname()
    local f = assert(io.open(w, "w"))
    f:write("global_batch_size: 8\nmicro_batch_size: 2\nseq_length: 1024\ntotal_train_tokens: 1.0e10\n")
    f:close()
    local r = h.run("analyze", "--hardware-lib", "configs/hardware/hardware_library.yaml", "--physical-topology",
      "configs/topology_zoo/physical/dgx_h100_1node.yaml", "--logical-topology",
      "configs/topology_zoo/logical/tp8.yaml", "--workload-spec", w, "--model-spec",
      "configs/models/llama3.1_8b.yaml", "--format", "json")
    os.remove(w)
    assert.are.equal(0, r.code, r.stderr)
    local rec = json.decode(r.stdout)[1]
    local rwf = rec.time.run_with_failures
    -- the H100's power is in the library, so energy is modelled: 8 GPUs x 700 W x T (PUE 1), in kWh
    h.near(8 * 700 * rec.time.total_time_seconds / 3.6e6, rwf.energy_kwh, 1e-12, "energy")
    for _, k in ipairs({ "goodput", "expected_failures", "system_mtbf_seconds", "expected_time_seconds",
      "checkpoint_interval_seconds", "cost_usd" }) do
      assert.is_nil(rwf[k], k)
    end
  end)

  it("analyze --output-file F --format csv writes raw numbers", function()
    local path = os.tmpname()
    local r = run(ANALYZE, "--format", "csv", "--output-file", path)
    assert.are.equal(0, r.code, r.stderr)
    local text = slurp(path)
    os.remove(path)
    for _, pat in ipairs(READABLE) do assert.is_nil(text:match(pat), pat) end
  end)

  describe("search records what it assumed and searched", function()
    it("the table's header states precision, workload, objective, MFU basis and reserve", function()
      local r = run(SEARCH)
      assert.are.equal(0, r.code, r.stderr)
      local l2, l3 = r.stdout:match("^[^\n]*\n([^\n]*)\n([^\n]*)\n")
      assert.are.equal("assumed: bf16, workload train_specs/search_default.yaml, ranked by step time", l2)
      -- H100 SXM: 989.4 TFLOP/s dense BF16 (the hardware library's bf16_nominal)
      assert.are.equal("MFU against 989.4 TFLOP/s per GPU (the dense peak at the GEMM precision); "
        .. "memory reserve 1 GiB + 5% of activations per GPU", l3)
      r = run(SEARCH, "--objective", "headroom", "--memory-reserve", "2GiB")
      assert.matches("\nassumed: bf16, workload train_specs/search_default.yaml, ranked by free memory\n", r.stdout)
      assert.matches("memory reserve 2 GiB", r.stdout)
    end)

    it("JSON, YAML and CSV carry the inputs", function()
      local j = json.decode(run(SEARCH, "--format", "json", "--fix", "tp=2").stdout)
      assert.are.same({ model = "llama3.1_8b", hardware = "H100_SXM", gpus = 8, pod_size = 8, pass_mode = "training",
        workload = "train_specs/search_default.yaml", precision = "bf16", global_batch = 32, seq_length = 4096,
        batch_rounding = "exact", objective = "step_time", fix = "tp=2", memory_reserve_bytes = 2 ^ 30,
        memory_fragmentation_fraction = 0.05, mfu_basis_flops_per_second_per_gpu = 989.4e12 }, j.inputs)
      -- MFU = achieved model FLOP/s / basis: the hit's own numbers agree with the stated basis
      for _, hit in ipairs(j.hits) do assert.are.equal(2, hit.tp) end
      local y = run(SEARCH, "--format", "yaml").stdout
      assert.matches("^inputs:\n  model: llama3.1_8b\n", y)
      assert.matches("\n  mfu_basis_flops_per_second_per_gpu: 989.4 TFLOP/s\n", y)
      assert.matches("\n    step_time_s: [%d.]+ m?s\n", y) -- readable in YAML
      local v = run(SEARCH, "--format", "csv").stdout
      local header = v:match("^([^\n]*)\n")
      assert.matches("^rank,inputs%.model,inputs%.hardware,", header)
      assert.are.equal(4, h.count_lines(v)) -- header + 3 hits
    end)

    it("a single strategy is recommended without a runner-up it does not have", function()
      local r = run(SEARCH, "--fix", "tp=8,pp=1,mb=1,recompute=none,dp=ZERO1,sp=true")
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("\nrecommendation: #1:\n  %- the only strategy that fits\n$", r.stdout)
    end)

    it("the explanation's exposed TP is the table's exp.TP (attention's and the experts' TP)", function()
      local search = require("fathom.search")
      local function hit(tp, t, tm)
        return { tp = tp, pp = 1, vs = 1, schedule = "1F1B", bubble_fraction = 0, ep = 8, ep_su = 8, cp = 1, mb = 1,
          dp_variant = "ZERO1", recompute = "none", sp = true, batch = 8, step_time_s = 1, peak_bytes = 1,
          exposed_s = { tp = t, tp_moe = tm, ep = 0, dp = 0, dp_moe = 0 } }
      end
      local why = search.explain(hit(8, 0.1, 0.2), hit(4, 0.05, 0.5), { pod_size = 8, up_name = "nvlink" })
      -- 0.1 + 0.2 = 300 ms against 0.05 + 0.5 = 550 ms, as the exp.TP column shows them
      assert.are.equal("TP=8 (exposed TP 300 ms) vs TP=4 (550 ms); both stay inside the 8-GPU nvlink pod", why[1])
    end)

    it("a decode search's hits carry TPOT and no TTFT (not modelled there)", function()
      local r = h.run("search", "--model", "llama3.1_8b", "--hardware", "H100_SXM", "--gpus", "8", "--pass-mode",
        "inference_decode", "--top", "2", "--format", "json")
      assert.are.equal(0, r.code, r.stderr)
      local v = json.decode(r.stdout)
      assert.is_number(v.hits[1].tpot_s)
      assert.is_nil(v.hits[1].ttft_s)
      assert.are.equal("inference_decode", v.inputs.pass_mode)
    end)
  end)

  describe("plots", function()
    local plot = require("fathom.format.plot")
    local pareto = require("fathom.format.pareto")

    it("nice ticks: steps of 1, 2, 2.5 or 5 x 10^k covering the range", function()
      -- 0..0.4846 in about 5 steps: raw step 0.097 -> 0.1 (not 0.161/0.323/0.484)
      assert.are.same({ 0, 0.1, 0.2, 0.3, 0.4, 0.5 }, plot.nice_ticks(0, 0.4846))
      -- 0..83 GiB: raw 16.6 -> 20
      assert.are.same({ 0, 20, 40, 60, 80, 100 }, plot.nice_ticks(0, 83))
      -- 12..13: raw 0.2 -> 0.2
      local t = plot.nice_ticks(12, 13)
      assert.are.equal(12, t[1])
      assert.is_true(t[#t] >= 13)
      h.near(0.2, t[2] - t[1], 1e-9, "step")
      -- an empty range still gives an axis
      assert.is_true(#plot.nice_ticks(5, 5) >= 2)
    end)

    it("the Pareto front: no point beats a front point on both memory and time", function()
      local pts = { { x = 10, y = 5, label = "a" }, { x = 20, y = 3, label = "b" }, { x = 15, y = 6, label = "c" },
        { x = 30, y = 3, label = "d" }, { x = 5, y = 9, label = "e" } }
      local f = pareto.front(pts)
      local labels = {}
      for i, p in ipairs(f) do labels[i] = p.label end
      -- by memory: e (5, 9), a (10, 5), b (20, 3); c is beaten by a, d by b
      assert.are.same({ "e", "a", "b" }, labels)
      local m = pareto.front(pts, true) -- maximizing y: e (5, 9) beats every other
      assert.are.equal(1, #m)
    end)

    it("search --format svg: a titled Pareto plot with units, ticks, palette and legend", function()
      local r = run(SEARCH, "--format", "svg")
      assert.are.equal(0, r.code, r.stderr)
      local svg = r.stdout
      assert.matches("<text[^>]*>llama3%.1_8b on 8 H100_SXM, training: step time against memory per GPU</text>", svg)
      assert.matches('class="x%-title">memory per GPU %(GiB%)</text>', svg)
      assert.matches('class="y%-title">step time %(s%)</text>', svg)
      assert.matches('class="legend">Pareto front %(%d+%)</text>', svg)
      assert.matches('fill="#0072B2"', svg) -- Okabe-Ito blue
      -- labels name the strategy in full
      assert.matches('class="point">TP%d PP%d[x%d]* DP%d+ mb%d+ %a+ %w+', svg)
      -- every y tick is a multiple of one nice step
      local ys = {}
      for v in svg:gmatch('<text x="%d+" y="[%d.]+" text%-anchor="end">([^<]+)</text>') do ys[#ys + 1] = tonumber(v) end
      assert.is_true(#ys >= 3)
      local step = ys[2] - ys[1]
      local mant = step / 10 ^ math.floor(math.log(step, 10) + 1e-9)
      local nice = false
      for _, m in ipairs({ 1, 2, 2.5, 5 }) do nice = nice or math.abs(mant - m) < 1e-6 end
      assert.is_true(nice, "tick step " .. step)
    end)

    it("analyze --format svg: the title names model, system and pass mode; full labels; drawn parts only", function()
      local sweep = os.tmpname()
      local f = assert(io.open(sweep, "w"))
      -- two swept keys ending in ".size": each bar's label must tell them apart
      f:write("sweep:\n  physical_topology.dimensions.up.size: [2]\n  logical_topology.dimensions.TP_Attn.size: [2]\n"
        .. "  workload_spec.micro_batch_size: [1, 2]\n")
      f:close()
      local r = run(ANALYZE, "--sweep-config", sweep, "--format", "svg")
      os.remove(sweep)
      assert.are.equal(0, r.code, r.stderr)
      local svg = r.stdout
      assert.matches('font%-size="14">toy_dense on TOY %(toy_2x2%), training: step time per sweep point</text>', svg)
      assert.matches('class="y%-title">step time %(s%)</text>', svg)
      assert.matches('class="x%-title">sweep point</text>', svg)
      local labels = {}
      for l in svg:gmatch('class="point">([^<]+)</text>') do labels[#labels + 1] = l end
      assert.are.same({ "TP_Attn.size=2 up.size=2 workload_spec.micro_batch_size=1",
        "TP_Attn.size=2 up.size=2 workload_spec.micro_batch_size=2" }, labels)
      -- the legend lists what is drawn (a dense model on one pod: no expert parts, no bubble)
      local legend, colours = {}, {}
      for l in svg:gmatch('class="legend">([^<]+)</text>') do legend[#legend + 1] = l end
      assert.are.same({ "compute", "memory (exposed)", "TP", "DP", "optimizer" }, legend)
      for c in svg:gmatch('<rect x="%d+" y="%d+" width="10" height="10" fill="(#%x+)"/>') do
        assert.is_nil(colours[c], "two legend entries share " .. c)
        colours[c] = true
      end
      -- Okabe-Ito's first five, in order
      assert.matches('fill="#0072B2"/>\n<text[^>]*>compute<', svg)
      assert.matches('fill="#56B4E9"/>\n<text[^>]*>optimizer<', svg)
    end)

    it("a serving search plots tokens/s per GPU", function()
      local r = h.run("search", "--model", "llama3.1_8b", "--hardware", "H100_SXM", "--gpus", "8", "--pass-mode",
        "inference_decode", "--format", "svg")
      assert.are.equal(0, r.code, r.stderr)
      assert.matches("llama3%.1_8b on 8 H100_SXM, inference_decode: tokens/s per GPU against memory per GPU", r.stdout)
      assert.matches('class="y%-title">tokens/s per GPU</text>', r.stdout)
    end)
  end)
end)
