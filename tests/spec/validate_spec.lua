-- Published checks: Narayanan et al. 2021 Table 1 (Megatron-LM on Selene) end
-- to end, one A100 calibration shared by every case (configs/hardware).
local validate = require("fathom.validate")

describe("fathom.validate #paper", function()
  local res = validate.run({ "validation/published_cases.yaml", "validation/modern_cases.yaml" },
    "configs/hardware/hardware_library.yaml")

  it("predicts every Megatron Table 1 case within 15% of the measured TFLOP/s per GPU", function()
    local n = 0
    io.stderr:write("\n  case                       predicted  measured  error\n")
    for _, c in ipairs(res.cases) do
      if c.id:match("^narayanan2021_t1_") then
        n = n + 1
        io.stderr:write(string.format("  %-26s %9.1f %9.1f %+6.1f%%\n", c.id, c.predicted, c.measured,
          100 * c.relative_error))
        assert.is_true(math.abs(c.relative_error) <= 0.15,
          string.format("%s: predicted %.1f, measured %.1f", c.id, c.predicted, c.measured))
        assert.is_true(c.fits, c.id .. " should fit in 80 GB")
      end
    end
    assert.are.equal(10, n)
  end)

  it("summarises every source with a median and p90 and names skipped cases", function()
    assert.is_truthy(res.sources.narayanan2021)
    assert.is_truthy(res.sources.llmfoundry_mpt)
    assert.are.equal(138, res.sources.llmfoundry_mpt.count)
    -- the TensorRT-LLM inference cases run too, one calibration per GPU for all of them
    assert.are.equal(45, res.sources.trtllm_v061.count)
    assert.is_true(res.sources.llmfoundry_mpt.median_abs_error < 0.15)
    for _, s in ipairs(res.skipped) do
      assert.is_string(s.reason)
      assert.is_string(s.id)
    end
    -- nothing dropped silently: every case is compared or skipped with a reason
    local n = 0
    for _, f in ipairs({ "validation/published_cases.yaml", "validation/modern_cases.yaml" }) do
      n = n + #require("fathom.config").load_mapping(f, "cases").cases
    end
    assert.are.equal(n, #res.cases + #res.skipped)
    assert.is_number(res.no_fit)
  end)

  it("counts only refusals as skips: a bug in the evaluation surfaces", function()
    local scenario = require("fathom.scenario")
    local errors = require("fathom.errors")
    local jobs = validate.prepare({ (validate.load("validation/published_cases.yaml"))[1] })
    assert.are.equal(1, #jobs)
    local state = validate.state("configs/hardware/hardware_library.yaml")
    local new = scenario.new
    finally(function() scenario.new = new end)
    scenario.new = function() errors.raise("EP = 3 does not divide the experts") end
    local recs, skipped = validate.evaluate(state, jobs)
    assert.are.equal(0, #recs)
    assert.matches("model rejected the configuration: EP = 3", skipped[1].reason)
    scenario.new = function() local t = nil return t.x end
    assert.error_matches(function() validate.evaluate(state, jobs) end, "attempt to index")
  end)

  it("takes the least recomputation that fits where a case leaves it to the recipe", function()
    local cases = require("fathom.cases")
    assert.is_true(cases.recompute_assumed("recipe default (not stated)"))
    assert.is_true(cases.recompute_assumed("not set in the workload base config (the recipe's default, not read)"))
    assert.is_false(cases.recompute_assumed("custom remat_policy (MaxText)"))
    assert.is_false(cases.recompute_assumed("none (activations_checkpoint_* null in recipe yaml)"))
    assert.is_false(cases.recompute_assumed("remat_policy custom (query_proj, key_proj on device)"))
    assert.is_false(cases.recompute_assumed("full activation checkpointing"))
    -- NeMo 25.04's DeepSeek-V3 on 128 GB200 (its recipe recomputes the attention core) with
    -- the recompute left unstated: without recomputation fathom counts more than a GB200
    -- holds; selective, the least that fits, is what the record is costed at and says
    local state = validate.state("configs/hardware/hardware_library.yaml")
    local function record(recompute)
      local c
      for _, x in ipairs(validate.load("validation/modern_cases.yaml")) do
        if x.id == "dgxc2505_deepseek_v3_BF16_gb200_128gpu" then c = x end
      end
      c.training.recompute = recompute
      local recs = validate.evaluate(state, (validate.prepare({ c })))
      return recs[1]
    end
    local stated, unstated, none = record("selective (core_attn)"), record("recipe default (not stated)"),
      record("none")
    assert.is_false(none.fits)
    assert.is_true(unstated.fits)
    assert.are.equal(stated.predicted, unstated.predicted)
    assert.is_truthy(table.concat(unstated.notes, "; "):find("recompute not stated: selective, the least that fits", 1,
      true))
    -- a recompute the case states is costed as stated, fitting or not
    assert.are_not.equal(none.predicted, unstated.predicted)
  end)

  it("quantile() interpolates", function()
    assert.are.equal(2, validate.quantile({ 1, 2, 3 }, 0.5))
    assert.are.equal(2.5, validate.quantile({ 1, 2, 3, 4 }, 0.5))
    assert.is_nil(validate.quantile({}, 0.5))
  end)
end)

describe("fathom validate (command line)", function()
  local h = require("helpers")
  it("prints the README's validation table, line for line", function()
    local f = assert(io.open("README.md", "rb"))
    local text = f:read("a")
    f:close()
    local block = assert(text:match("```\n%$ fathom validate\n(.-)```"), "README has no `$ fathom validate` block")
    local r = h.run("validate")
    assert.are.equal(0, r.code, r.stderr)
    local out = {}
    for l in (r.stdout .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = l end
    local at = 1
    for want in block:gmatch("([^\n]*)\n") do
      if want ~= "" then
        local found
        for i = at, #out do
          if out[i] == want then found = i break end
        end
        assert.is_truthy(found, "README line not printed (in order) by `fathom validate`: " .. want)
        at = found + 1
      end
    end
  end)

  it("--format json gives cases, sources and skipped with reasons", function()
    local cases = os.tmpname()
    local f = assert(io.open(cases, "w"))
    f:write([[
cases:
  - id: tiny_skip
    source: made_up
    workload: training
    incomplete: true
    model: {}
    system: {gpu: A100, num_gpus: 1}
    parallelism: {}
]])
    f:close()
    local r = h.run("validate", "--cases", cases, "--format", "json")
    os.remove(cases)
    assert.are.equal(0, r.code, r.stderr)
    local v = require("fathom.format.json").decode(r.stdout)
    assert.are.equal(0, #v.cases)
    assert.are.equal(1, #v.skipped)
    assert.are.equal("marked incomplete in the cases file", v.skipped[1].reason)
    r = h.run("validate", "--no-loso", "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    v = require("fathom.format.json").decode(r.stdout)
    for _, c in ipairs(v.cases) do
      assert.is_string(c.id)
      assert.is_number(c.predicted)
      assert.is_number(c.relative_error)
    end
    assert.is_number(v.sources.narayanan2021.median_abs_error)
    assert.is_number(v.sources.narayanan2021.p90_abs_error)
  end)
end)

describe("fathom.validate on parts without calibration data", function()
  it("models GB300 NVL72 and MI355X cases (FP8, NVFP4, MXFP8, EP and CP) from their generation", function()
    local res = validate.run("tests/fixtures/validation/new_hardware_cases.yaml",
      "configs/hardware/hardware_library.yaml")
    assert.are.equal(0, #res.skipped, res.skipped[1] and res.skipped[1].reason)
    local by = {}
    for _, c in ipairs(res.cases) do by[c.id] = c end
    assert.is_true(by.gb300_llama70b_nvfp4.predicted < by.gb300_llama70b_fp8.predicted)
    assert.is_truthy(by.gb300_llama70b_fp8.calibration:find("derived"))
    assert.are.equal("tokens_per_sec_per_gpu", by.mi355x_qwen3_moe.metric)
    assert.are.equal(2, #by.mi355x_qwen3_moe.comparisons)   -- the MFU is compared too, in %
  end)
end)

describe("fathom.validate --fit on a derived generation", function()
  it("fits only the settings CDNA 3's cases calibrate (attention), unbounded by Hopper's factor rows", function()
    local calibration = require("fathom.calibration")
    local state = validate.state("configs/hardware/hardware_library.yaml")
    local jobs = validate.prepare(validate.load("validation/mlperf_lora_cases.yaml"))
    local mine = {}
    for _, j in ipairs(jobs) do if j.generation == "cdna3" then mine[#mine + 1] = j end end
    assert.are.equal(21, #mine)
    for _, j in ipairs(mine) do assert.are.equal("2025", j.kernels, j.case.id) end -- ROCm 6.4/7.0 runs
    local before = state.settings.cdna3["2025"]
    -- a "2024" row from Hopper's factors far above the data (as the old derived reference
    -- gave, 0.85) bounds nothing: it is no evidence
    local settings = calibration.copy(state.settings)
    settings.cdna3["2024"].attention_efficiency = 0.85
    local fitted = validate.fit(state, mine, settings).cdna3["2025"]
    -- the GEMM fractions stay derived from Hopper's (x 1.304), only attention moves
    assert.are.equal(before.fp8_efficiency, fitted.fp8_efficiency)
    assert.are.equal(before.efficiency, fitted.efficiency)
    assert.are.same({ "attention_efficiency" }, calibration.derived.cdna3.fit)
    -- the shipped attention is this fit
    assert.is_true(math.abs(fitted.attention_efficiency - before.attention_efficiency) < 0.005,
      fitted.attention_efficiency)
  end)
end)

describe("fathom.validate metrics", function()
  it("reads a metric by name, else by its unit and the words of its name", function()
    local m = validate.metrics
    assert.are.equal(m.time_to_train_min, validate.metric("time_to_train_min", "minutes"))
    assert.are.equal(m.time_to_train_days, validate.metric("est_training_days_300B_tokens", "days"))
    assert.are.equal(m.time_to_train_min, validate.metric("train_time", "min"))
    assert.are.equal(m.tokens_per_sec_per_gpu, validate.metric("throughput", "tokens/s/GPU"))
    assert.are.equal(m.samples_per_sec, validate.metric("throughput", "samples/s"))
    assert.are.equal(m.step_time_ms, validate.metric("step_time", "ms"))
    assert.are.equal(m.step_time_s, validate.metric("median_step_time", "s"))
    assert.are.equal(m.mfu, validate.metric("mfu_pct", "%"))
    assert.are.equal(m.peak_memory_gib, validate.metric("max_memory_allocated", "GiB"))
    assert.is_nil(validate.metric("loss", ""))
    local s = validate.serving_metrics
    assert.are.equal(s.request_throughput, validate.serving_metric({ metric = "throughput", unit = "requests/s" }))
    assert.is_function(validate.serving_metric({ metric = "median_ttft", unit = "ms" })) -- its value: below
    assert.are.equal(s.output_throughput, validate.serving_metric({ metric = "throughput", unit = "output tokens/s" }))
  end)

  it("reads serving metrics as benchmarks name them: the latency, its statistic and unit, the rate", function()
    -- a static batch of 8 requests on 8 GPUs (one node): 100 prompt tokens, 50 generated; prefill
    -- 0.2 s, 49 decode steps in 1.0 s, so TTFT 0.2 s, TPOT 1/49 s, end to end 1.2 s
    local c = { batch = 8, isl = 100, osl = 50, ngen = 49, gpus = 8, gpn = 8, pre = 0.2, dec = 1.0, t = 1.2 }
    local function value(metric, unit)
      local f = validate.serving_metric({ metric = metric, unit = unit })
      return f and f(c, { metric = metric, unit = unit })
    end
    assert.near(200, value("mean_ttft_ms"), 1e-9)
    assert.near(0.2, value("time_to_first_token", "s"), 1e-12)
    assert.near(200, value("Mean TTFT", "milliseconds"), 1e-9)
    assert.near(1e3 / 49, value("mean_itl_ms"), 1e-9)
    assert.near(1e6 / 49, value("inter_token_latency", "µs"), 1e-6)
    assert.near(1.2, value("e2e_latency_s"), 1e-12)
    assert.near(1200, value("end_to_end_latency", "ms"), 1e-9)
    -- a statistic of a static batch is its one value; of a simulated run, the distribution's
    assert.near(200, value("p99_ttft_ms"), 1e-9)
    c.q = { ttft = { mean = 0.25, p50 = 0.24, p90 = 0.3, p95 = 0.35, p99 = 0.4 } }
    assert.near(400, value("p99_ttft_ms"), 1e-9)
    assert.near(240, value("median_ttft", "ms"), 1e-9)
    assert.near(250, value("avg_ttft", "ms"), 1e-9)
    c.q = nil
    -- rates: output 8 x 50 / 1.2, total 8 x 150 / 1.2, input 8 x 100 / 1.2, requests 8 / 1.2;
    -- prefill 8 x 100 / 0.2, decode 8 / (1/49); per GPU / 8
    assert.near(1000 / 3, value("output_tokens_per_second"), 1e-9)
    assert.near(1000 / 3, value("Output token throughput", "tok/s"), 1e-9)
    assert.near(1000, value("throughput", "tokens/s"), 1e-9)
    assert.near(1000, value("total_throughput"), 1e-9)
    assert.near(2000 / 3, value("input_throughput", "tok/s"), 1e-9)
    assert.near(20 / 3, value("requests_per_second"), 1e-9)
    assert.near(20 / 3, value("throughput", "samples/s"), 1e-9)
    assert.near(4000, value("prefill_throughput", "tokens/s"), 1e-9)
    assert.near(392, value("decode_throughput", "tokens/s"), 1e-9)
    assert.near(125, value("tokens_per_sec_per_gpu"), 1e-9)
    -- nothing guessed: a latency without a unit, a percentile the simulator does not keep, a
    -- rate of something else
    assert.is_nil(validate.serving_metric({ metric = "latency" }))
    assert.is_nil(validate.serving_metric({ metric = "p75_ttft_ms" }))
    assert.is_nil(validate.serving_metric({ metric = "throughput", unit = "GB/s" }))
  end)
end)

describe("fathom.validate serving cases", function()
  it("maps attention DP, EP with redundant experts and per-rank batches onto one static batch", function()
    local case = { id = "srv", workload = "inference",
      model = { name = "DeepSeek-V3", arch = "MLA + DeepSeekMoE", layers = 61, hidden = 7168, heads = 128,
        head_dim = 128, ffn = 18432, vocab = 129280, experts = 256, shared_experts = 1, top_k = 8,
        expert_ffn = 2048, dense_layers = 3, mla = { q_lora_rank = 1536, kv_lora_rank = 512,
          qk_nope_head_dim = 128, qk_rope_head_dim = 64, v_head_dim = 128 } },
      system = { gpu = "NVIDIA H100 (SXM 80GB)", num_gpus = 72, gpus_per_node = 8 },
      parallelism = { tp = 1, dp = 72, ep = 72, attention_dp = 72, redundant_experts = 32 },
      inference = { phase = "decode", isl = 2000, batch = "batch 256 per rank", framework = "SGLang" } }
    local docs = assert(validate.inference_docs(case))
    assert.are.equal(256 * 72, docs.batch)
    assert.are.equal(288, docs.model.num_regular_experts)
    assert.is_nil(docs.prefill)
    local tags = {}
    for _, l in ipairs(docs.logical.dimensions) do tags[l.logical_tag] = (tags[l.logical_tag] or 1) * l.size end
    assert.are.equal(72, tags.DP_Attn)
    assert.are.equal(72, tags.EP_SU * tags.EP_SO)
    case.inference.speculative = "MTP"
    local none, why = validate.inference_docs(case)
    assert.is_nil(none)
    assert.is_truthy(why:find("speculative"))
  end)

  it("never calibrate: a refit over serving records alone leaves every setting as it was", function()
    local jobs = validate.prepare(validate.load({ "validation/modern_cases.yaml" }))
    local serving = {}
    for _, j in ipairs(jobs) do if j.inference then serving[#serving + 1] = j end end
    assert.is_true(#serving >= 3)
    local state = validate.state()
    local refit, groups = validate.fit(state, serving, state.settings)
    assert.is_nil(next(groups))
    assert.are.same(state.settings, refit)
  end)
end)

describe("fathom.validate time to train", function()
  it("takes tokens, samples or steps from the case under any spelling, or from the note", function()
    local f = os.tmpname()
    local h = assert(io.open(f, "w"))
    h:write([[
cases:
  - id: ttt_samples
    source: synthetic
    workload: training
    model: {arch: "Llama-style (RoPE, SwiGLU)", layers: 32, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336,
            vocab: 128256}
    system: {gpu: NVIDIA H100 SXM, num_gpus: 8, gpus_per_node: 8}
    parallelism: {tp: 1, pp: 1, dp: 8, micro_batch: 1, global_batch: 64, seq_len: 8192}
    training: {precision: BF16, framework: NeMo 25.04, samples_to_target: 640}
    measured: [{metric: time_to_train_min, value: 1.0, unit: minutes}]
  - id: ttt_note
    source: synthetic
    workload: training
    model: {arch: "Llama-style (RoPE, SwiGLU)", layers: 32, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336,
            vocab: 128256}
    system: {gpu: NVIDIA H100 SXM, num_gpus: 8, gpus_per_node: 8}
    parallelism: {tp: 1, pp: 1, dp: 8, micro_batch: 1, global_batch: 64, seq_len: 8192}
    training: {precision: BF16, framework: NeMo 25.04}
    measured: [{metric: time_to_train_min, value: 1.0, unit: minutes, note: "converged after 1,280 samples"}]
  - id: ttt_none
    source: synthetic
    workload: training
    model: {arch: "Llama-style (RoPE, SwiGLU)", layers: 32, hidden: 4096, heads: 32, kv_heads: 8, ffn: 14336,
            vocab: 128256}
    system: {gpu: NVIDIA H100 SXM, num_gpus: 8, gpus_per_node: 8}
    parallelism: {tp: 1, pp: 1, dp: 8, micro_batch: 1, global_batch: 64, seq_len: 8192}
    training: {precision: BF16, framework: NeMo 25.04}
    measured: [{metric: time_to_train_min, value: 1.0, unit: minutes}]
]])
    h:close()
    local res = validate.run(f, "configs/hardware/hardware_library.yaml")
    os.remove(f)
    local by = {}
    for _, c in ipairs(res.cases) do by[c.id] = c end
    assert.is_truthy(by.ttt_samples)
    assert.is_truthy(by.ttt_note)
    assert.is_true(math.abs(by.ttt_note.predicted / by.ttt_samples.predicted - 2) < 1e-6)
    assert.are.equal(1, #res.skipped)
    assert.is_truthy(res.skipped[1].reason:find("time to train needs"))
  end)
end)

describe("fathom.validate.training_rows", function()
  it("keeps each training case's first record that fits and has an error, in order", function()
    local recs = {
      { id = "a", workload = "training", fits = true, relative_error = 0.1, metric = "tokens_per_sec_per_gpu" },
      { id = "a", workload = "training", fits = true, relative_error = 0.2, metric = "step_time_s" },
      { id = "b", workload = "training", fits = false, relative_error = 0.3 },
      { id = "c", workload = "inference", fits = true, relative_error = 0.4 },
      { id = "d", workload = "training", fits = true, relative_error = nil },
      { id = "d", workload = "training", fits = true, relative_error = -0.5 },
    }
    local rows = validate.training_rows(recs)
    assert.are.equal(2, #rows)
    assert.are.equal(recs[1], rows[1])
    assert.are.equal(recs[6], rows[2])
  end)
end)
