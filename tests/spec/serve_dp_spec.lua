-- Attention data parallelism, in-flight batching and the serving path of `fathom validate`.
local core = require("fathom.core")
local h = require("helpers")
local json = require("fathom.format.json")
local serve = require("fathom.serve")
local names = require("fathom.names")
local validate = require("fathom.validate")

local COST = { base_s = 0.010, per_token_s = 0.0001 }

-- DeepSeek-V3 on 8 GPUs with attention DP 8 and EP 8, as the TensorRT-LLM max-throughput
-- cases run it (trtllm-bench, 64 users, 256 requests).
local function dsv3_case(precision, extra)
  local inf = { isl = 1024, osl = 64, concurrency = 64, num_requests = 256, max_batch_size_per_rank = 8,
    max_num_tokens = 1032, precision = precision, framework = "TensorRT-LLM PyTorch workflow (2025)" }
  for k, v in pairs(extra or {}) do inf[k] = v end
  return { id = "dsv3_adp", source = "synthetic", workload = "inference",
    model = { name = "DeepSeek-V3", arch = "MLA + DeepSeekMoE", layers = 61, hidden = 7168, heads = 128,
      head_dim = 128, ffn = 18432, vocab = 129280, experts = 256, shared_experts = 1, top_k = 8,
      expert_ffn = 2048, dense_layers = 3, mla = { q_lora_rank = 1536, kv_lora_rank = 512,
        qk_nope_head_dim = 128, qk_rope_head_dim = 64, v_head_dim = 128 } },
    system = { gpu = "NVIDIA H200", gpu_memory_gb = 141, num_gpus = 8, gpus_per_node = 8 },
    parallelism = { tp = 8, dp = 8, ep = 8, attention_dp = true },
    inference = inf,
    measured = { { metric = "total_output_throughput", value = 1000, unit = "output tokens/s (8 GPUs)" } } }
end

describe("fathom.serve attention DP", function()
  describe("#serve_run()", function()
    it("runs the DP ranks of an engine in lock step (hand-derived, as test_serve.c)", function()
      -- Two ranks; requests of 100 + 2 tokens at 0 and 1 ms; 10 ms + 0.1 ms a token. Rank 0
      -- prefills over [0, 20] ms while rank 1 is held; then rank 0 decodes and rank 1
      -- prefills over [20, 40]; rank 1 decodes alone to 50.1 ms.
      local def = { cost = COST, kv_capacity_tokens = 1e6, requests = 2, arrival = "fixed", rate_per_s = 1000,
        input = { kind = "fixed", mean = 100 }, output = { kind = "fixed", mean = 2 }, replicas = 2,
        per_request = true }
      local _, free = core.serve_run(def)
      assert.near(0.0311, free.done_s[2], 1e-12)
      def.dp_attention = 2
      local _, q = core.serve_run(def)
      assert.near(0.040, q.done_s[1], 1e-12)
      assert.near(0.040, q.first_token_s[2], 1e-12)
      assert.near(0.0501, q.done_s[2], 1e-12)
    end)

    it("refuses ranks that do not divide the replicas, and static batching in lock step", function()
      local def = { cost = COST, kv_capacity_tokens = 1e6, requests = 2, replicas = 4, dp_attention = 3 }
      assert.error_matches(function() core.serve_run(def) end, "dp_attention")
      def.dp_attention, def.policy = 2, "static"
      assert.error_matches(function() core.serve_run(def) end, "static batching with attention DP")
    end)
  end)

  describe("#inflight", function()
    it("is a policy by name: decodes with whole prompts in the token budget", function()
      assert.is_truthy(names.key("serve_policy").inflight)
      -- 3 users of 100 + 3 tokens, budget 150: one prompt per iteration beside the decodes
      -- (test_serve.c derives 20, 40.1, 60.3, 70.5, 80.6 ms)
      local _, q = core.serve_run({ cost = COST, kv_capacity_tokens = 1e6, requests = 3, arrival = "closed",
        concurrency = 3, input = { kind = "fixed", mean = 100 }, output = { kind = "fixed", mean = 3 },
        policy = "inflight", max_batch_tokens = 150, max_batch = 4, per_request = true })
      assert.near(0.0401, q.first_token_s[2], 1e-12)
      assert.near(0.0806, q.done_s[3], 1e-12)
    end)
  end)
end)

describe("fathom.serve swap to host", function()
  it("keeps a preempted request's context and charges both copies (as test_serve.c)", function()
    -- 4 pages of 16 tokens, two users of 16 + 33 tokens, 1000 bytes a token at 1 MB/s: the
    -- second is swapped out with 32 cached tokens (32 ms) and back (32 ms): done at 563.6 ms,
    -- where recompute finishes at 502.8 ms
    local def = { cost = COST, kv_capacity_tokens = 64, requests = 2, arrival = "closed", concurrency = 2,
      input = { kind = "fixed", mean = 16 }, output = { kind = "fixed", mean = 33 }, watermark = 0,
      per_request = true }
    local _, q = core.serve_run(def)
    assert.near(0.5028, q.done_s[2], 1e-12)
    def.kv_transfer_bytes_per_token, def.swap_bw_bytes_per_s = 1000, 1e6
    local r
    r, q = core.serve_run(def)
    assert.are.equal(1, r.preemptions)
    assert.near(0.370, q.done_s[1], 1e-12)
    assert.near(0.5636, q.done_s[2], 1e-12)
    def.swap_bw_bytes_per_s = -1
    assert.error_matches(function() core.serve_run(def) end, "swap_bw_bytes_per_s")
  end)
end)

describe("fathom.validate serving path", function()
  it("reads the KV cache width and the FP8 linears from the precision", function()
    local docs = assert(validate.inference_docs(dsv3_case("FP8 checkpoint, DeepGEMM")))
    -- FP8 GEMMs, BF16 attention and activations, KV cache unstated: 16-bit
    assert.are.equal(2, docs.decode.float_size_bytes)
    assert.are.equal(1, docs.decode.gemm_float_size_bytes)
    assert.are.equal(2, docs.decode.kv_cache_float_size_bytes)
    docs = assert(validate.inference_docs(dsv3_case("NVFP4 weights, FP8 KV cache")))
    assert.are.equal(1, docs.decode.kv_cache_float_size_bytes)
    -- NVFP4: the checkpoint's block-scaled linears (FP4 GEMMs), BF16 attention and activations
    assert.are.equal("nvfp4", docs.decode.precision_recipe)
    assert.is_nil(docs.decode.gemm_float_size_bytes)
    assert.are.equal(2, docs.decode.float_size_bytes)
    for _, n in ipairs(docs.notes) do assert.is_falsy(n:find("costed at FP8", 1, true), n) end
    docs = assert(validate.inference_docs(dsv3_case("NVFP4 weights, 16-bit KV cache")))
    assert.are.equal(2, docs.decode.kv_cache_float_size_bytes)
  end)

  it("fills an EPLB engine's expert slots with redundant experts where EP does not divide them", function()
    -- SGLang at EP 48: 256 experts need 6 slots a rank, 288 = 256 + 32 redundant
    local function at_ep48(framework)
      local case = dsv3_case("FP8 checkpoint, DeepGEMM", { framework = framework, phase = "decode", batch = 48,
        concurrency = false })
      case.system.num_gpus = 48
      case.parallelism = { tp = 1, dp = 48, ep = 48, attention_dp = 48 }
      return assert(validate.inference_docs(case))
    end
    local docs = at_ep48("SGLang (Sep 2025)")
    assert.are.equal(288, docs.model.num_regular_experts)
    local notes = table.concat(docs.notes, "; ")
    assert.is_truthy(notes:find("EPLB: 32 redundant experts fill 6 slots per EP rank", 1, true), notes)
    -- an engine without EPLB placement keeps the 256 (and the core refuses EP 48)
    assert.are.equal(256, at_ep48("vLLM (2025)").model.num_regular_experts)
  end)

  it("drives the simulator as a benchmark at a stated concurrency ran", function()
    local case = dsv3_case("FP8 checkpoint, DeepGEMM")
    local docs = assert(validate.inference_docs(case))
    assert.are.same({ concurrency = 64, requests = 256, ranks = 8, lockstep = true, max_batch = 8,
      max_batch_tokens = 1032 }, docs.sim)
    local state = validate.state()
    local function record(c) return (validate.evaluate(state, (validate.prepare({ c }))))[1] end
    local rec = record(case)
    assert.is_truthy(rec.serving_path:find("^simulated: 64 users, 256 requests, DP ranks in lock step"))
    -- a closed loop of 64 users: each request's time is 64 x OSL / the output rate
    assert.is_true(rec.predicted > 0)
    -- without a concurrency the case stays one static batch
    case.inference.concurrency, case.inference.batch = nil, 64
    rec = record(case)
    assert.are.equal("static batch", rec.serving_path)
  end)

  -- Llama 3.1 405B FP8 with a 16-bit KV cache on 8 MI300X under vLLM's throughput benchmark:
  -- a count of prompts, no batch and no concurrency (validation/amd_rocm_vllm_cases.yaml).
  local function offline_case(inf)
    local i = { isl = 2048, osl = 64, precision = "FP8 weights and activations; KV cache dtype not stated",
      framework = "vLLM 0.10.2 (ROCm 7.0.0)" }
    for k, v in pairs(inf) do i[k] = v end
    return { id = "llama405b_offline", source = "synthetic", workload = "inference",
      model = { name = "Llama 3.1 405B", arch = "Llama-style (RoPE, SwiGLU, RMSNorm, GQA)", layers = 126,
        hidden = 16384, heads = 128, kv_heads = 8, head_dim = 128, ffn = 53248, vocab = 128256 },
      system = { gpu = "AMD Instinct MI300X", gpu_memory_gb = 192, num_gpus = 8, gpus_per_node = 8 },
      parallelism = { tp = 8 }, inference = i,
      measured = { { metric = "output_throughput", value = 1000, unit = "output tokens/s (8 GPUs)" } } }
  end

  it("runs an offline throughput benchmark as every prompt submitted at once", function()
    local state = validate.state()
    local function record(c) return (validate.evaluate(state, (validate.prepare({ c }))))[1] end
    local case = offline_case({ isl = 128, osl = 256, num_prompts = 64, max_num_seqs = 64 })
    local docs = assert(validate.inference_docs(case))
    assert.are.same({ concurrency = 64, requests = 64, offline = true, ranks = 1, lockstep = false,
      max_batch = 64 }, docs.sim)
    -- a million prompts: the steady state of the first 4,096 (validate.OFFLINE_SIM_PROMPTS), or
    -- of 4 x the engine's cap where that is more
    docs = assert(validate.inference_docs(offline_case({ num_prompts = 1000000, max_num_seqs = 64 })))
    assert.are.equal(4096, docs.sim.concurrency)
    docs = assert(validate.inference_docs(offline_case({ num_prompts = 1000000, max_num_seqs = 8192 })))
    assert.are.equal(4 * 8192, docs.sim.concurrency)
    local all = record(case)
    assert.are.equal("simulated: 64 prompts at once, at most 64 running", all.serving_path)
    -- max_num_seqs 16 runs the 64 prompts in four waves of 16: decode steps (256 a prompt
    -- against 128 prompt tokens) at a quarter of the batch read the same 51 GB of weights a
    -- GPU, so the rate falls below half
    local capped = record(offline_case({ isl = 128, osl = 256, num_prompts = 64, max_num_seqs = 16 }))
    assert.are.equal("simulated: 64 prompts at once, at most 16 running", capped.serving_path)
    assert.is_true(capped.predicted < 0.5 * all.predicted, capped.predicted .. " vs " .. all.predicted)
  end)

  it("gives vLLM from 2025 its own all-reduce kernel, and vLLM 2024 NCCL/RCCL's", function()
    local frameworks = require("fathom.frameworks")
    local want = { engine_allreduce_latency_sec = 6.0e-6, engine_allreduce_max_bytes = 8 * 2 ^ 20 }
    local docs = assert(validate.inference_docs(offline_case({ batch = 1 })))
    assert.are.same(want, docs.decode.collective)
    assert.are.same(want, docs.prefill.collective)
    docs = assert(validate.inference_docs(offline_case({ batch = 1, framework = "vLLM (ROCm, 2024)" })))
    assert.is_nil(docs.decode.collective)
    -- a serving spec naming the framework: filled into its collective table, its own keys kept
    local doc = { framework = "vLLM 0.11", collective = { launch_sec = 1e-6, engine_allreduce_max_bytes = 1024 } }
    frameworks.apply(doc, "decode")
    assert.are.same({ launch_sec = 1e-6, engine_allreduce_latency_sec = 6.0e-6, engine_allreduce_max_bytes = 1024 },
      doc.collective)
    doc = { framework = "vLLM 0.11" }
    frameworks.apply(doc, "training")
    assert.is_nil(doc.collective)
  end)

  it("gives TensorRT-LLM from 2025 on Hopper the reference row, 2023's its own", function()
    local calibration = require("fathom.calibration")
    local settings = validate.state().settings
    local row, name = calibration.lookup("hopper", "trt2025", settings)
    assert.are.equal("hopper/trt2025", name)
    local ref = calibration.lookup("hopper", "2025", settings)
    for _, k in ipairs({ "efficiency", "fp8_efficiency", "attention_efficiency" }) do
      assert.near(ref[k], row[k], 1e-12, k)
    end
    -- TensorRT-LLM 0.6 keeps its slower FP8 GEMMs (trtllm_v061)
    local old = calibration.lookup("hopper", "trt2023", settings)
    assert.near(0.759 * ref.fp8_efficiency, old.fp8_efficiency, 1e-9)
    -- the published runs read their framework and checkpoint as transcribed
    local list = validate.load("validation/trtllm_perf_cases.yaml")
    assert.are.equal(100, #list)
    local docs = assert(validate.inference_docs(list[1]))
    assert.are.equal("trt2025", docs.fw.kernels)
    assert.are.equal(1, docs.decode.kv_cache_float_size_bytes)
    assert.is_true(docs.sim.offline)
    assert.is_true(docs.sim.kv_fit)
    -- the B200/GB200 columns: NVFP4 checkpoints (FP4 GEMMs), FP8 KV cache, on Blackwell
    local fp4 = list[61]
    assert.are.equal("trtllm10_llama33_70b_b200_tp1_nvfp4_128_128", fp4.id)
    docs = assert(validate.inference_docs(fp4))
    assert.are.equal("nvfp4", docs.decode.precision_recipe)
    assert.are.equal(1, docs.decode.kv_cache_float_size_bytes)
    assert.are.equal("blackwell", docs.gpu.generation)
  end)

  it("runs an online benchmark at a request rate as the simulator's open loop (Poisson arrivals)", function()
    assert.are.equal(4, validate.request_rate({ request_rate = 4 }))
    assert.are.equal(math.huge, validate.request_rate({ request_rate = "inf" }))
    assert.are.equal(2.5, validate.request_rate({ scenario = "online serving (benchmark_serving.py) at 2.5 req/s" }))
    assert.are.equal(8, validate.request_rate({ scenario = "vLLM serving, request rate 8, 1,000 prompts" }))
    assert.are.equal(3, validate.request_rate({ scenario = "QPS 3" }))
    assert.is_nil(validate.request_rate({ scenario = "offline throughput" }))
    assert.is_nil(validate.request_rate({ request_rate = -1 }))
    -- lengths under vLLM's own names
    assert.are.same({ 128, 256 }, { validate.lengths({ input_len = 128, output_len = 256 }) })
    assert.are.same({ 100, 50 }, { validate.lengths({ isl = 100, osl = 50, input_len = 7 }) })
    local state = validate.state()
    local function record(c) return (validate.evaluate(state, (validate.prepare({ c }))))[1] end
    -- 200 prompts of 128 + 256 tokens at 1 request/s on 8 MI300X: far from saturation, so the
    -- engine completes them at the rate they come (Little's law: the requests in flight are
    -- the rate x a request's time), 256 output tokens each
    local case = offline_case({ isl = 128, osl = 256, num_prompts = 200, request_rate = 1 })
    case.measured = { { metric = "request_throughput", value = 1, unit = "requests/s" },
      { metric = "output_throughput", value = 256, unit = "output tokens/s" },
      { metric = "p99_e2el_ms", value = 10000 } }
    local docs = assert(validate.inference_docs(case))
    assert.are.equal(1, docs.sim.rate)
    assert.is_nil(docs.sim.concurrency)
    local rec = record(case)
    assert.are.equal("simulated: 200 requests at 1/s (Poisson arrivals), at most 200 running", rec.serving_path)
    -- completions over the run's span (first arrival to last completion): within a few
    -- percent of the rate for 200 Poisson arrivals
    assert.near(1, rec.comparisons[1].predicted, 0.15)
    assert.near(256 * rec.comparisons[1].predicted, rec.comparisons[2].predicted, 1e-6)
    -- the 99th percentile of the simulated requests' times, at least their mean
    assert.is_true(rec.comparisons[3].predicted > 0)
    -- a concurrency or batch the scenario's words state, where no field does
    assert.are.same({ concurrency = 64 }, validate.scenario_counts({ scenario = "benchmark_serving, concurrency 64" }))
    assert.are.same({ concurrency = 32 }, validate.scenario_counts({ scenario = "32 concurrent requests" }))
    assert.are.same({ batch = 8 }, validate.scenario_counts({ scenario = "benchmark_latency, batch size 8" }))
    assert.are.same({ batch = 4 }, validate.scenario_counts({ scenario = "static, bs=4" }))
    assert.are.same({}, validate.scenario_counts({ scenario = "offline static batch (gptSessionBenchmark)" }))
    docs = assert(validate.inference_docs(offline_case({ isl = 128, osl = 256, num_prompts = 64,
      scenario = "online serving (benchmark_serving.py), max concurrency 16" })))
    assert.are.equal(16, docs.sim.concurrency)
    assert.is_nil(docs.sim.offline)
    -- "inf" is every prompt at once, the offline path
    docs = assert(validate.inference_docs(offline_case({ isl = 128, osl = 256, num_prompts = 200,
      request_rate = "inf" })))
    assert.is_true(docs.sim.offline)
  end)

  it("sizes TensorRT-LLM's offline batch to its KV cache, as trtllm-bench does", function()
    -- the requests whose ISL + OSL the cache holds, at most 4,096 over PP; a token budget of
    -- that x (1 + ISL / OSL), at most 32,768, rounded up to 256 (at least 2,048) below 4,096,
    -- to 512 below 8,192, else to 1,024 (tensorrt_llm/bench/build/tuning.py)
    local function fit(...) return { validate.kv_fit_batch(...) } end
    -- 1,000,000 tokens of 128 + 128: 3,906.25 requests; 7,812.5 tokens -> 8,192
    assert.are.same({ 3906, 8192 }, fit(1000000, 128, 128, 1))
    -- 100,000 tokens of 2,048 + 128: 45.96 requests; x 17 = 781 tokens -> the floor of 2,048
    assert.are.same({ 45, 2048 }, fit(100000, 2048, 128, 1))
    -- a huge cache: 4,096 over PP 2 = 2,048 requests; 4,096 tokens -> 4,096
    assert.are.same({ 2048, 4096 }, fit(1e8, 128, 128, 2))
    -- and the budget's ceiling: 4,096 x 17 -> 32,768
    assert.are.same({ 4096, 32768 }, fit(1e8, 2048, 128, 1))
    -- a TensorRT-LLM case runs that many; a stated max_batch_size, or vLLM, keep their own cap
    local state = validate.state()
    local function record(c) return (validate.evaluate(state, (validate.prepare({ c }))))[1] end
    local trt = "TensorRT-LLM 1.0 (PyTorch backend, trtllm-bench throughput)"
    local case = offline_case({ isl = 128, osl = 256, num_prompts = 3000, framework = trt })
    local docs = assert(validate.inference_docs(case))
    assert.is_true(docs.sim.kv_fit)
    local function running(c)
      local path = record(c).serving_path
      return tonumber(path:match("at most (%d+) running %(as many as the KV cache holds at ISL %+ OSL%)")), path
    end
    -- 192 GiB (206 GB) a GPU less 51 GB of weights and the runtime's reserve: ~155 GB of cache
    -- at 66,048 B a token, ~6,000 requests of 384 tokens (so the 4,096 limit), ~570 of 4,096
    assert.are.equal(4096, running(case))
    local n, path = running(offline_case({ isl = 2048, osl = 2048, num_prompts = 3000, framework = trt }))
    assert.is_true(n > 540 and n < 600, path)
    case = offline_case({ isl = 128, osl = 256, num_prompts = 3000, framework = trt, max_batch_size = 64 })
    docs = assert(validate.inference_docs(case))
    assert.is_nil(docs.sim.kv_fit)
    assert.are.equal("simulated: 3000 prompts at once, at most 64 running", record(case).serving_path)
    docs = assert(validate.inference_docs(offline_case({ isl = 128, osl = 256, num_prompts = 3000 })))
    assert.is_nil(docs.sim.kv_fit)
    assert.are.equal(256, docs.sim.max_batch)
  end)

  it("refuses a bad collective table under a framework at its own position, exit 2", function()
    local function analyze(file)
      return h.run("analyze", "--hardware-lib", "configs/hardware/hardware_library.yaml",
        "--physical-topology", "configs/topology_zoo/physical/dgx_h100_1node.yaml",
        "--logical-topology", "configs/topology_zoo/logical/tp8.yaml",
        "--model-spec", "configs/models/llama3.1_70b.yaml",
        "--workload-spec", file, "--pass-mode", "inference_decode")
    end
    local r = analyze("tests/fixtures/bad/decode_vllm_collective_negative.yaml")
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find(
      "decode_vllm_collective_negative.yaml:25:26: collective.launch_sec: expected a value >= 0", 1, true), r.stderr)
    r = analyze("tests/fixtures/bad/decode_vllm_collective_string.yaml")
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("decode_vllm_collective_string.yaml:25:13: collective: expected a mapping", 1, true),
      r.stderr)
  end)

  it("admits what the KV cache holds where one static batch of every prompt does not fit", function()
    -- 1,200 prompts of 2,048 + 64 tokens: 126 layers x 2 x 128 x 2 bytes = 64.5 KB a token
    -- a GPU (one KV head each), 1,200 x 2,112 x 64.5 KB = 164 GB beside 51 GB of weights on
    -- a 192 GB part. As one batch it does not fit; the engine runs what fits and still ends.
    local state = validate.state()
    local function record(c) return (validate.evaluate(state, (validate.prepare({ c }))))[1] end
    local offline = record(offline_case({ num_prompts = 1200, max_num_seqs = 1200 }))
    assert.is_true(offline.fits)
    local static = record(offline_case({ batch = 1200 }))
    assert.are.equal("static batch", static.serving_path)
    assert.is_false(static.fits)
    -- fewer running at once than the static batch assumes: less throughput, not more
    assert.is_true(offline.predicted < static.predicted, offline.predicted .. " vs " .. static.predicted)
  end)
end)

describe("fathom serve --dp-attention and --swap-bw", function()
  local DSV3 = { "serve", "--model", "deepseek_v3", "--hardware", "H200_SXM", "--tp", "8", "--ep", "8",
    "--replicas", "8", "--concurrency", "128", "--requests", "300", "--input-tokens", "512", "--output-tokens",
    "64", "--policy", "inflight", "--max-batch", "16" }
  local function cli(extra)
    local a = {}
    for _, v in ipairs(DSV3) do a[#a + 1] = v end
    for _, v in ipairs(extra) do a[#a + 1] = v end
    return h.run(table.unpack(a))
  end

  it("makes the engine's GPUs the DP ranks of one engine, as fathom.serve.run does", function()
    local r = cli({ "--dp-attention", "8", "--format", "json" })
    assert.are.equal(0, r.code)
    local got = json.decode(r.stdout)
    local want = serve.run({ model = "deepseek_v3", hardware = "H200_SXM", tp = 8, ep = 8, replicas = 8,
      dp_attention = 8, arrival = "closed", concurrency = 128, requests = 300, input = 512, output = 64,
      policy = "inflight", max_batch = 16 })
    assert.near(want.throughput.output_tokens_per_s, got.throughput.output_tokens_per_s, 1e-12)
    -- eight ranks of one GPU each: the per-GPU rate is the engine's over its 8 GPUs
    assert.near(got.throughput.output_tokens_per_s / 8, got.throughput.output_tokens_per_s_per_gpu, 1e-12)
    local t = cli({ "--dp-attention", "8" })
    assert.is_truthy(t.stdout:find("8 replicas x 1 GPU (TP 8, PP 1, EP 8, DP attention 8)", 1, true))
  end)

  it("refuses ranks that do not divide TP or the replicas, in one line, exit 2", function()
    local r = cli({ "--dp-attention", "3" })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("dp_attention 3 must divide TP 8", 1, true))
    r = cli({ "--dp-attention", "8", "--replicas", "12" })
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("--dp-attention", 1, true))
  end)

  it("--swap-bw preempts by swap at that rate, as swap_bw_bytes_per_s does", function()
    local base = { "serve", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--concurrency", "64",
      "--requests", "100", "--input-tokens", "1024", "--output-tokens", "1024", "--format", "json" }
    local a = {}
    for _, v in ipairs(base) do a[#a + 1] = v end
    local recompute = json.decode(h.run(table.unpack(a)).stdout)
    a[#a + 1], a[#a + 2] = "--swap-bw", "25GB/s"
    local r = h.run(table.unpack(a))
    assert.are.equal(0, r.code)
    local swapped = json.decode(r.stdout)
    local want = serve.run({ model = "llama3.1_70b", hardware = "H100_SXM", arrival = "closed", concurrency = 64,
      requests = 100, input = 1024, output = 1024, swap_bw_bytes_per_s = 25e9 })
    assert.is_true(recompute.preemptions > 0)
    assert.near(want.duration_s, swapped.duration_s, 1e-12)
    assert.is_true(swapped.duration_s ~= recompute.duration_s)
    a[#a] = "fast"
    r = h.run(table.unpack(a))
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("--swap-bw: expected a bandwidth", 1, true))
  end)
end)

describe("fathom serve --spec-tokens (speculative decoding, MTP)", function()
  local COST2 = { base_s = 0.010, per_token_s = 0.0001 }
  it("emits the accepted drafts with each step (hand-derived, as test_serve.c)", function()
    -- 100 + 9 tokens, 3 drafts a step: prefill 20 ms, steps of 10 + 0.1 x 4 ms; all accepted:
    -- 4 tokens a step, done at 40.8 ms; none: 8 steps, 103.2 ms
    local def = { cost = COST2, kv_capacity_tokens = 1e6, requests = 1, input = { kind = "fixed", mean = 100 },
      output = { kind = "fixed", mean = 9 }, spec_tokens = 3, spec_acceptance = 1 }
    assert.near(0.0408, core.serve_run(def).e2e_s.max, 1e-12)
    def.spec_acceptance = 0
    assert.near(0.1032, core.serve_run(def).e2e_s.max, 1e-12)
  end)

  it("runs from the command line as fathom.serve.run does, and shortens TPOT at batch 1", function()
    local base = { "serve", "--model", "deepseek_v3", "--hardware", "H200_SXM", "--tp", "8", "--ep", "8",
      "--concurrency", "1", "--requests", "4", "--input-tokens", "1024", "--output-tokens", "256", "--format", "json" }
    local plain = json.decode(h.run(table.unpack(base)).stdout)
    local a = {}
    for _, v in ipairs(base) do a[#a + 1] = v end
    for _, v in ipairs({ "--spec-tokens", "3", "--spec-acceptance", "0.8" }) do a[#a + 1] = v end
    local r = h.run(table.unpack(a))
    assert.are.equal(0, r.code, r.stderr)
    local got = json.decode(r.stdout)
    local want = serve.run({ model = "deepseek_v3", hardware = "H200_SXM", tp = 8, ep = 8, arrival = "closed",
      concurrency = 1, requests = 4, input = 1024, output = 256, spec_tokens = 3, spec_acceptance = 0.8 })
    assert.near(want.tpot_s.mean, got.tpot_s.mean, 1e-12)
    -- 1 + 0.8 + 0.64 + 0.512 = 2.95 tokens a step, for a step that drafts 3 times and verifies
    -- 4 tokens (reaching more experts than one token does)
    assert.is_true(got.tpot_s.mean < plain.tpot_s.mean)
    a[#a] = "1.5"
    r = h.run(table.unpack(a))
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("--spec-acceptance", 1, true))
  end)

  it("validate reads the drafts and the acceptance a case states", function()
    local s = validate.speculation({ speculative = "MTP, 3 next-n layers", acceptance_length = 1 + 0.5 + 0.25 + 0.125 })
    assert.are.equal(3, s.tokens)
    assert.near(0.5, s.acceptance, 1e-9)
    assert.is_true(s.stated)
    s = validate.speculation({ speculative = "MTP, 3 next-n layers" })
    assert.are.equal(serve.SPEC_ACCEPTANCE, s.acceptance)
    assert.is_false(s.stated)
    assert.is_nil(validate.speculation({}))
  end)
end)
