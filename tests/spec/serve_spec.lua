-- fathom.serve and `fathom serve`: the request-level serving simulation (fth_serve).
local core = require("fathom.core")
local h = require("helpers")
local json = require("fathom.format.json")
local serve = require("fathom.serve")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local ENGINE = { "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--tp", "4" }

local function serve_cli(...)
  local a = { "serve" }
  for _, v in ipairs(ENGINE) do a[#a + 1] = v end
  for _, v in ipairs({ ... }) do a[#a + 1] = v end
  return h.run(table.unpack(a))
end

describe("fathom.serve", function()
  describe("#parse_length()", function()
    local cases = {
      { "512", { kind = "fixed", mean = 512 } },
      { "lognormal:mean=512,sigma=0.5", { kind = "lognormal", mean = 512, sigma = 0.5 } },
      { "uniform:min=16,max=1024", { kind = "uniform", min = 16, max = 1024 } },
      { "normal:mean=100,sigma=10,min=50", { kind = "normal", mean = 100, sigma = 10, min = 50 } },
      { "zipf:s=1.2,min=16,max=4096", { kind = "zipf", s = 1.2, min = 16, max = 4096 } },
    }
    for _, c in ipairs(cases) do
      it(c[1], function() assert.are.same(c[2], serve.parse_length(c[1], "x")) end)
    end
    it("--prefill-replicas disaggregates: decodes no longer wait behind prompts", function()
    local args = { "--replicas", "2", "--qps", "6", "--requests", "500", "--input-tokens", "2048", "--output-tokens",
      "128", "--policy", "chunked", "--format", "json" }
    local agg = json.decode(serve_cli(table.unpack(args)).stdout)
    args[#args + 1] = "--prefill-replicas"
    args[#args + 1] = "1"
    local r = serve_cli(table.unpack(args))
    assert.are.equal(0, r.code, r.stderr)
    local dis = json.decode(r.stdout)
    assert.is_true(dis.tpot_s.p99 < agg.tpot_s.p99)
    -- three replicas of 4 GPUs now share the output tokens
    h.near(dis.throughput.output_tokens_per_s / 12, dis.throughput.output_tokens_per_s_per_gpu, 1e-12, "per GPU")
  end)

  local bad = {
      { "lognorm:mean=5", "did you mean 'lognormal'" },
      { "lognormal:mean=512,sigm=1", "did you mean 'sigma'" },
      { "lognormal:mean=512", "needs sigma=" },
      { "uniform:min=3", "needs max=" },
      { "normal:mean=abc,sigma=1", "expected a finite number" },
    }
    for _, c in ipairs(bad) do
      it("refuses " .. c[1], function()
        assert.error_matches(function() serve.parse_length(c[1], "x") end, c[2], 1, true)
      end)
    end
  end)

  describe("#run()", function()
    -- An affine cost, A + B tokens per iteration (A = 10 ms, B = 0.1 ms): a lone request of
    -- 100 prompt and 11 output tokens has its first token after the 100-token prefill (20 ms)
    -- and the rest after ten decode iterations of 10.1 ms each.
    local cost = { base_s = 0.010, per_token_s = 0.0001 }
    it("a lone request: TTFT the prefill iteration, TPOT a decode iteration", function()
      local r = serve.run({ cost = cost, kv_capacity_tokens = 1e6, requests = 1, input = 100, output = 11 })
      h.near(0.020, r.ttft_s.mean, 1e-12, "ttft")
      h.near(0.0101, r.tpot_s.mean, 1e-12, "tpot")
      h.near(0.121, r.e2e_s.max, 1e-12, "e2e")
      assert.are.equal(0, r.queue_s.max)
      assert.are.equal(1, r.requests_completed)
    end)

    it("gives per-request columns", function()
      local _, q = core.serve_run({ cost = cost, kv_capacity_tokens = 1e6, requests = 3, arrival = "fixed",
        rate_per_s = 1, per_request = true, input = { kind = "fixed", mean = 100 },
        output = { kind = "fixed", mean = 11 } })
      assert.are.same({ 0, 1, 2 }, q.arrival_s)
      assert.are.same({ 100, 100, 100 }, q.input)
      h.near(2.121, q.done_s[3], 1e-12, "done")
    end)

    it("refuses unknown keys and bad values with their path", function()
      assert.error_matches(function() serve.run({ cost = cost, rate_per_sec = 1 }) end, "did you mean 'rate_per_s'",
        1, true)
      assert.error_matches(function() serve.run({ cost = cost, kv_capacity_tokens = 1e6, rate_per_s = -1 }) end,
        "rate_per_s: expected a rate > 0", 1, true)
      assert.error_matches(function() serve.run({ cost = cost, kv_capacity_tokens = 1e6, policy = "eager" }) end,
        "policy: expected one of continuous", 1, true)
      assert.error_matches(function() serve.run({ kv_capacity_tokens = 1e6 }) end, "expected an inference plan", 1,
        true)
    end)

    it("at low load TTFT is the prefill pass of one request and TPOT the batch-1 decode step", function()
      -- The engine's plan, and the prefill and decode passes analyze would evaluate for one
      -- request of 1000 prompt and 65 output tokens (decode: contexts 1001 .. 1064); with
      -- PP 2 both pass through the two stages and one hand-off.
      local spec = require("fathom.spec")
      local search = require("fathom.search")
      local lib = spec.hardware_library("configs/hardware/hardware_library.yaml")
      local model = spec.model("configs/models/llama3.1_70b.yaml")
      model.source_table = nil
      -- the decode search default's precisions and efficiencies, as the engine uses them
      local wp = { seq_length = 1000, global_batch_size = 1, micro_batch_size = 1, float_size_bytes = 2,
        weight_float_size_bytes = 1, kv_cache_float_size_bytes = 1, comp_comm_efficiency = 0.0,
        comp_mem_efficiency = 1.0, comm_mem_efficiency = 0.0 }
      local wd = {}
      for k, v in pairs(wp) do wd[k] = v end
      wd.seq_length, wd.prefill_seq_len, wd.num_generated_tokens = nil, 1000, 64
      for _, pp in ipairs({ 1, 2 }) do
        local r = serve.run({ model = "llama3.1_70b", hardware = "H100_SXM", tp = 4, pp = pp, requests = 4,
          arrival = "fixed", rate_per_s = 0.5, input = 1000, output = 65 })
        assert.are.equal(0, r.queue_s.max)
        local system = search.system(lib, "H100_SXM", 4 * pp, 4 * pp)
        local topo = search.infer_topology(system, 4, pp, 1, false)
        local prefill = core.infer_compile(system.node, topo, model, wp, "prefill"):evaluate()
        h.near(prefill.ttft_s, r.ttft_s.mean, 1e-9, "ttft, PP " .. pp)
        local decode = core.infer_compile(system.node, topo, model, wd, "decode"):evaluate()
        h.near(decode.tpot_s, r.tpot_s.mean, 1e-6, "tpot, PP " .. pp)
      end
    end)

    it("disaggregated: the first token from the prefill pool, the KV over the link, decodes after", function()
      -- 20 ms prefill; 100 tokens x 1000 B at 1 MB/s + 5 ms; ten 10.1 ms decodes (test_serve.c)
      local r = serve.run({ cost = cost, kv_capacity_tokens = 1e6, requests = 1, input = 100, output = 11,
        prefill_replicas = 1, kv_transfer_bytes_per_token = 1000, kv_link_bw_bytes_per_s = 1e6,
        kv_link_latency_s = 0.005 })
      h.near(0.020, r.ttft_s.mean, 1e-12, "ttft")
      h.near(0.226, r.e2e_s.mean, 1e-12, "e2e")
      assert.error_matches(function()
        serve.run({ cost = cost, kv_capacity_tokens = 1e6, requests = 1, prefill_replicas = 1 })
      end, "kv_link_bw_bytes_per_s: expected bytes/s > 0", 1, true)
    end)

    it("Little's law: mean requests in the system = throughput x mean time in system", function()
      local r = serve.run({ cost = cost, kv_capacity_tokens = 1e5, requests = 4000, rate_per_s = 30,
        policy = "chunked", max_batch_tokens = 512, input = "lognormal:mean=400,sigma=0.6",
        output = "uniform:min=8,max=128", replicas = 2, routing = "least_outstanding" })
      h.near(r.throughput.requests_per_s * r.e2e_s.mean, r.mean_in_system, 0.01, "L")
    end)

    it("latency grows without bound past capacity", function()
      -- one request at a time, each 20 ms (100-token prefill, one output token), one every 10 ms
      local base = { cost = cost, kv_capacity_tokens = 1e6, arrival = "fixed", rate_per_s = 100, max_batch = 1,
        input = 100, output = 1 }
      local means = {}
      for _, n in ipairs({ 500, 1000, 2000 }) do
        base.requests = n
        means[#means + 1] = serve.run(base).queue_s.mean
      end
      -- request i waits i x 10 ms: mean (n - 1) x 5 ms
      h.near(2.495, means[1], 1e-9, "500")
      h.near(4.995, means[2], 1e-9, "1000")
      h.near(9.995, means[3], 1e-9, "2000")
    end)

    it("find_max_qps() brackets the capacity: the rate found meets the target, 2% more does not", function()
      local a = { cost = cost, kv_capacity_tokens = 1e6, requests = 400, input = 200, output = 20,
        policy = "chunked", max_batch_tokens = 1024, slo_ttft_s = 0.2, slo_tpot_s = 0.05 }
      local rate, r, steps = serve.find_max_qps(a, 0.9)
      assert.is_true(r.goodput.slo_attainment >= 0.9)
      assert.is_true(#steps >= 3)
      a.rate_per_s = rate * 1.1
      assert.is_true(serve.run(a).goodput.slo_attainment < 0.9 or rate * 1.1 > steps[#steps].rate_per_s)
    end)
  end)
end)

describe("fathom serve", function()
  it("is deterministic: the same seed gives the same bytes, another seed other numbers", function()
    local args = { "--qps", "4", "--requests", "300", "--input-tokens", "lognormal:mean=512,sigma=0.5",
      "--output-tokens", "zipf:s=1.1,min=8,max=512", "--policy", "chunked", "--format", "json" }
    local a = serve_cli(table.unpack(args))
    local b = serve_cli(table.unpack(args))
    assert.are.equal(0, a.code, a.stderr)
    assert.are.equal(a.stdout, b.stdout)
    args[#args + 1] = "--seed"
    args[#args + 1] = "2"
    local c = serve_cli(table.unpack(args))
    assert.are_not.equal(a.stdout, c.stdout)
    local r = json.decode(a.stdout)
    assert.are.equal(300, r.requests_completed)
    for _, k in ipairs({ "requests_per_s", "input_tokens_per_s", "output_tokens_per_s",
      "output_tokens_per_s_per_gpu" }) do
      assert.is_number(r.throughput[k], k)
    end
    for _, m in ipairs({ "ttft_s", "tpot_s", "e2e_s", "queue_s" }) do
      for _, k in ipairs({ "mean", "p50", "p90", "p99" }) do assert.is_number(r[m][k], m .. "." .. k) end
    end
    assert.is_number(r.goodput.slo_attainment)
    assert.is_number(r.kv_cache.peak_fraction)
    assert.are.equal(0, r.preemptions)
    h.near(r.throughput.requests_per_s * r.e2e_s.mean, r.mean_in_system, 0.01, "Little")
  end)

  it("economics: energy at the rated 700 W of 4 H100s and the price per GPU-hour, per output token", function()
    local r = serve_cli("--qps", "4", "--requests", "200", "--price-per-gpu-hour", "2.5", "--pue", "1.2",
      "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local v = json.decode(r.stdout)
    local tok_s = v.throughput.output_tokens_per_s
    h.near(4 * 700 * 1.2 / tok_s, v.economics.energy_j_per_output_token, 1e-9, "J/token")
    h.near(4 * 2.5 / 3600 / tok_s * 1e6, v.economics.cost_per_million_output_tokens, 1e-9, "cost")
  end)

  it("--search-gpus ranks the deployments by capacity and keeps a Pareto front", function()
    local args = { "serve", "--model", "llama3.1_8b", "--hardware", "H100_SXM", "--search-gpus", "2", "--requests",
      "100", "--slo-ttft", "0.5", "--slo-tpot", "0.05", "--disaggregated", "--format", "json" }
    local r = h.run(table.unpack(args))
    assert.are.equal(0, r.code, r.stderr)
    local v = json.decode(r.stdout)
    -- TP 1 x 2 and TP 2 x 1, two policies each; TP 1 split 1:1 into prefill and decode, two policies
    assert.are.equal(6, #v.deployments)
    for i = 2, #v.deployments do
      assert.is_true(v.deployments[i].capacity_per_s <= v.deployments[i - 1].capacity_per_s)
    end
    for _, p in ipairs(v.front) do
      for _, o in ipairs(v.points) do
        assert.is_false(o.tokens_per_s_per_gpu > p.tokens_per_s_per_gpu and
          o.tokens_per_s_per_user > p.tokens_per_s_per_user)
      end
    end
    local svg = serve.pareto_svg(v, "Pareto front")
    assert.is_truthy(svg:find("output tokens/s per GPU", 1, true))
    assert.is_truthy(svg:find("<polyline", 1, true))
    -- shared over processes (fathom.parallel): the same bytes with 1 and 2
    args[#args + 1] = "--jobs"
    args[#args + 1] = "1"
    local one = h.run(table.unpack(args))
    args[#args] = "2"
    local two = h.run(table.unpack(args))
    assert.are.equal(0, two.code, two.stderr)
    assert.are.equal(r.stdout, one.stdout)
    assert.are.equal(one.stdout, two.stdout)
  end)

  it("runs closed loops, csv and yaml", function()
    local r = serve_cli("--concurrency", "8", "--requests", "64", "--format", "csv")
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find("ttft_s.p99", 1, true))
    r = serve_cli("--concurrency", "8", "--requests", "64", "--format", "yaml", "--policy", "static")
    assert.are.equal(0, r.code, r.stderr)
    assert.is_truthy(r.stdout:find("requests_completed: 64", 1, true))
  end)

  it("--find-max-qps reports the rate and meets the target there", function()
    local r = serve_cli("--requests", "300", "--input-tokens", "512", "--output-tokens", "64", "--policy", "chunked",
      "--slo-ttft", "0.3", "--slo-tpot", "0.03", "--find-max-qps", "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local v = json.decode(r.stdout)
    assert.is_true(v.max_qps > 1)
    assert.is_true(v.goodput.slo_attainment >= 0.9)
  end)

  it("--prefill-replicas disaggregates: decodes no longer wait behind prompts", function()
    local args = { "--replicas", "2", "--qps", "6", "--requests", "500", "--input-tokens", "2048", "--output-tokens",
      "128", "--policy", "chunked", "--format", "json" }
    local agg = json.decode(serve_cli(table.unpack(args)).stdout)
    args[#args + 1] = "--prefill-replicas"
    args[#args + 1] = "1"
    local r = serve_cli(table.unpack(args))
    assert.are.equal(0, r.code, r.stderr)
    local dis = json.decode(r.stdout)
    assert.is_true(dis.tpot_s.p99 < agg.tpot_s.p99)
    -- three replicas of 4 GPUs now share the output tokens
    h.near(dis.throughput.output_tokens_per_s / 12, dis.throughput.output_tokens_per_s_per_gpu, 1e-12, "per GPU")
  end)

  local bad = {
    { { "--qps", "-1" }, "--qps must be > 0" },
    { { "--qps", "1", "--input-tokens", "gauss:mean=3" }, "--input-tokens: expected a number of tokens or KIND" },
    { { "--qps", "1", "--policy", "eager" }, "--policy' must be one of continuous, chunked, static" },
    { { "--qps", "1", "--slo-ttft", "0.001" }, "--slo-ttft 0.001 s is below the" },
    { { "--qps", "1", "--concurrency", "4" }, "--qps and --concurrency exclude each other" },
    { {}, "give --qps RATE (open loop), --concurrency N (closed loop) or --replay FILE" },
    { { "--qps", "1", "--tp", "3" }, "TP=3 does not divide the 64 attention heads" },
    { { "--qps", "1", "--input-tokens", "2000000", "--requests", "1" }, "needs 2000000 prompt + 128 output tokens" },
    { { "--qps", "1", "--max-batch", "0" }, "--max-batch must be a positive integer" },
    { { "--qps", "1", "--arrival", "gamma", "--burstiness", "0" }, "--burstiness: expected a coefficient" },
    { { "--qps", "1", "--find-max-qps" }, "--find-max-qps needs --slo-ttft" },
    { { "--search-gpus", "8" }, "--search-gpus needs --slo-ttft" },
    { { "--search-gpus", "8", "--slo-ttft", "1" }, "--search-gpus chooses --tp itself: drop it" },
    { { "--qps", "1", "--format", "svg" }, "--format svg draws --search-gpus's Pareto front" },
    { { "--qps", "1", "--prefix-hit", "1" }, "--prefix-hit: expected a share in [0, 1)" },
    { { "--qps", "1", "--prefill-tp", "8" }, "--prefill-tp needs --prefill-replicas N" },
    { { "--qps", "1", "--prefill-replicas", "1", "--kv-link", "ib_nrd" }, "did you mean 'ib_ndr'" },
    { { "--qps", "1", "--prefill-replicas", "1", "--policy", "static" }, "it cannot be disaggregated" },
  }
  for _, c in ipairs(bad) do
    it("refuses " .. table.concat(c[1], " ") .. " in one line, exit 2", function()
      local r = serve_cli(table.unpack(c[1]))
      assert.are.equal(2, r.code, r.stderr)
      assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
      assert.is_truthy(r.stderr:find(c[2], 1, true), r.stderr)
    end)
  end

  it("refuses an unknown model and node by name", function()
    local r = h.run("serve", "--model", "llama9", "--hardware", "H100_SXM", "--qps", "1")
    assert.are.equal(2, r.code)
    assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
    r = h.run("serve", "--model", "llama3.1_70b", "--hardware", "H100_SMX", "--qps", "1")
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("did you mean 'H100_SXM'", 1, true), r.stderr)
  end)

  it("--precision-recipe nvfp4 serves an NVFP4 checkpoint: its weights' room goes to the KV cache", function()
    local function run(...)
      local r = h.run("serve", "--model", "llama3.1_70b", "--hardware", "B200", "--qps", "1", "--requests", "20",
        "--format", "json", ...)
      assert.are.equal(0, r.code, r.stderr)
      return json.decode(r.stdout)
    end
    local fp8, fp4 = run(), run("--precision-recipe", "nvfp4")
    -- Llama 3.1 70B: 70,553,706,496 parameters, 2,101,346,304 of them the embedding and the LM
    -- head. The default workload holds all at 1 B; NVFP4 the rest at 0.5625 B and those two
    -- at 2 B: 0.4375 x 70,553,706,496 - 1.4375 x 2,101,346,304 = 27,846,561,280 B freed, at
    -- 163,840 B a token of FP8 KV cache (80 layers x 2 x 8 heads x 128): 169,962 tokens more,
    -- to the 16-token page
    local more = fp4.kv_cache.capacity_tokens - fp8.kv_cache.capacity_tokens
    assert.is_true(math.abs(more - 27846561280 / 163840) < 16, tostring(more))
    -- decode at batch ~1 reads 0.56 of the bytes: a shorter TPOT
    assert.is_true(fp4.tpot_s.mean < 0.65 * fp8.tpot_s.mean, fp4.tpot_s.mean .. " vs " .. fp8.tpot_s.mean)
    -- the README's figures (## Serving): 6.2 ms against 11.0 ms, 912k tokens against 742k
    assert.are.equal("6.2 11.0", string.format("%.1f %.1f", fp4.tpot_s.mean * 1e3, fp8.tpot_s.mean * 1e3))
    assert.are.equal("912 742", string.format("%.0f %.0f", fp4.kv_cache.capacity_tokens / 1e3,
      fp8.kv_cache.capacity_tokens / 1e3))
    local r = h.run("serve", "--model", "llama3.1_70b", "--hardware", "B200", "--qps", "1",
      "--precision-recipe", "nvfp5")
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("did you mean 'nvfp4'", 1, true), r.stderr)
  end)

  it("refuses weights that leave no room for a KV cache, saying what takes it and what to change", function()
    -- gpt-oss-120b at FP8 on TP 2 without EP: every GPU holds all 128 experts (~108 GiB)
    local r = h.run("serve", "--model", "gpt_oss_120b", "--hardware", "H100_SXM", "--tp", "2", "--qps", "1")
    assert.are.equal(2, r.code)
    assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
    assert.matches("gpt_oss_120b on H100_SXM %(TP 2, PP 1, EP 1%) leaves no room for one KV%-cache page %(16 tokens%): "
      .. "its weights take [%d.]+ GiB per GPU of 80 GiB GPU memory", r.stderr)
    assert.is_truthy(r.stderr:find("(--tp, --pp), the experts over more of them (--ep)", 1, true), r.stderr)
    assert.is_truthy(r.stderr:find("weight_float_size_bytes or precision_recipe, now 1)", 1, true), r.stderr)
    -- the experts over 2 GPUs fit
    r = h.run("serve", "--model", "gpt_oss_120b", "--hardware", "H100_SXM", "--tp", "2", "--ep", "2", "--qps", "1",
      "--requests", "20")
    assert.are.equal(0, r.code, r.stderr)
    -- a dense model gets no --ep hint; a prefill pool that does not fit names its own flags
    r = h.run("serve", "--model", "llama3.1_405b", "--hardware", "H100_SXM", "--tp", "4", "--qps", "1")
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("leaves no room for one KV-cache page", 1, true), r.stderr)
    assert.is_falsy(r.stderr:find("--ep", 1, true), r.stderr)
    r = h.run("serve", "--model", "llama3.1_405b", "--hardware", "H100_SXM", "--tp", "8", "--qps", "1",
      "--prefill-replicas", "1", "--prefill-tp", "4")
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("(TP 4, PP 1, EP 1) leaves no room", 1, true), r.stderr)
    assert.is_truthy(r.stderr:find("(--prefill-tp, --prefill-pp)", 1, true), r.stderr)
  end)

  it("the engine asks for no KV room where the KV lives elsewhere or the caller states it", function()
    local engine = require("fathom.serve").engine
    -- the shipped decode workload keeping the KV cache in remote memory
    local plan = engine({ model = "llama3.1_70b", hardware = "H100_SXM", tp = 8,
      workload = "inference_decode_specs/llama3.1_70b_decode_kv_remote.yaml" })
    assert.is_true(plan:kv_capacity_tokens() > 0)
    -- an explicit capacity (a what-if) is the caller's, even where the weights fill the GPU
    assert.is_true(pcall(engine, { model = "llama3.1_405b", hardware = "H100_SXM", tp = 4,
      kv_capacity_tokens = 1000 }))
    assert.is_false(pcall(engine, { model = "llama3.1_405b", hardware = "H100_SXM", tp = 4 }))
  end)

  it("--output-file writes the whole output, and nothing on failure", function()
    local out = os.tmpname()
    os.remove(out)
    local r = serve_cli("--qps", "2", "--requests", "50", "--output-file", out, "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(50, json.decode(read(out)).requests_completed)
    os.remove(out)
    r = serve_cli("--qps", "2", "--requests", "50", "--output-file", out, "--slo-ttft", "1e-6")
    assert.are.equal(2, r.code)
    assert.is_nil(io.open(out, "rb"))
  end)

  local write_tmp = h.write_temp

  it("--replay runs a CSV or JSON-lines trace, and --trace-file draws each request's life", function()
    local csv = write_tmp("arrival_s,input_tokens,output_tokens\n100,512,16\n100.5,256,8\n103,1024,4\n", ".csv")
    local jsonl = write_tmp('{"arrived_at": 0, "num_prefill_tokens": 512, "num_decode_tokens": 16}\n' ..
      '{"arrived_at": 0.5, "num_prefill_tokens": 256, "num_decode_tokens": 8}\n' ..
      '{"arrived_at": 3, "num_prefill_tokens": 1024, "num_decode_tokens": 4}\n', ".jsonl")
    local trace = os.tmpname()
    local a = serve_cli("--replay", csv, "--format", "json", "--trace-file", trace)
    local b = serve_cli("--replay", jsonl, "--format", "json")
    assert.are.equal(0, a.code, a.stderr)
    assert.are.equal(a.stdout, b.stdout) -- the same trace, shifted to start at 0
    local r = json.decode(a.stdout)
    assert.are.equal(3, r.requests_completed)
    local ev = json.decode(read(trace)).traceEvents
    local spans = {}
    for _, e in ipairs(ev) do if e.ph == "X" then spans[#spans + 1] = e.name .. math.tointeger(e.tid) end end
    -- the lone first request has no queueing span; each has a prefill and a decode
    assert.are.same({ "prefill1", "decode1", "prefill2", "decode2", "prefill3", "decode3" }, spans)
    -- stretched to 10 requests/s, the same rows arrive within 0.2 s
    local c = json.decode(serve_cli("--replay", csv, "--qps", "10", "--format", "json").stdout)
    assert.is_true(c.duration_s < r.duration_s)
    for _, p in ipairs({ csv, jsonl, trace }) do os.remove(p) end
  end)

  it("--replay refuses a malformed row with file:line:col", function()
    local cases = {
      { "arrival_s,input_tokens,output_tokens\n0,512,16\n1,25x,8\n", ".csv", ":3:3: input: expected a number" },
      { "arrival_s,input_tokens,output_tokens\n5,512,16\n1,256,8\n", ".csv", ":3:1: arrival 1 is before" },
      { "arrival_s,prompt\n0,1\n", ".csv", ":1:1: the header names no input column" },
      { '{"arrival_s": 0, "input": 5, "output": 0}\n', ".jsonl", ":1:30: output: expected a token count" },
      { '{"arrival_s": 0, "input": 5,\n', ".jsonl", ":1:1: expected a JSON object" },
    }
    for _, c in ipairs(cases) do
      local path = write_tmp(c[1], c[2])
      local r = serve_cli("--replay", path)
      os.remove(path)
      assert.are.equal(2, r.code, r.stderr)
      assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
      assert.is_truthy(r.stderr:find(path .. c[3], 1, true), r.stderr)
    end
  end)

  it("takes a serving spec: the same deployment as the flags, byte for byte; flags override it", function()
    local file = "configs/serve_specs/llama3.1_70b_disaggregated.yaml"
    local a = h.run("serve", file, "--requests", "300", "--format", "json")
    local b = serve_cli("--replicas", "2", "--qps", "8", "--requests", "300", "--input-tokens",
      "lognormal:mean=1024,sigma=0.5", "--output-tokens", "lognormal:mean=256,sigma=0.5", "--policy", "chunked",
      "--max-batch-tokens", "2048", "--slo-ttft", "0.5", "--slo-tpot", "0.05", "--prefill-replicas", "1",
      "--prefill-tp", "8", "--kv-link", "ib_ndr", "--format", "json")
    assert.are.equal(0, a.code, a.stderr)
    assert.are.equal(b.stdout, a.stdout)
    local t = h.run("serve", "serve_specs/llama3.1_70b_disaggregated.yaml", "--requests", "50")
    assert.are.equal(0, t.code, t.stderr)
    assert.is_truthy(t.stdout:find("prefill on 1 replica x 8 GPUs of H100_SXM (TP 8, PP 1)", 1, true))
  end)

  it("refuses a bad serving spec in one line with file:line:col", function()
    local base = "model: llama3.1_70b\nhardware: H100_SXM\ntp: 4\nrequests: 20\nseed: 3\n"
    local cases = {
      { "rate_per_s: -2\n", ":6:13: rate_per_s: expected a value > 0" },
      { "concurrency: 4\narrival: closed\nthink_s: -1\n", ":8:10: think_s: expected a value >= 0" },
      { "rate_per_s: 2\nprefill: {replicas: 1, kv_link: nvlnk4}\n",
        ":7:33: prefill.kv_link: unknown interconnect 'nvlnk4'" },
      { "polcy: chunked\n", ":6:1: polcy: unknown key (did you mean 'policy'?)" },
      { "rate_per_s: 2\nslo_ttft_s: 0.0001\n", ":7:13: slo_ttft_s: 0.0001 s is below the" },
      { "rate_per_s: 2\ninput: 5000000\n", ":7:8: input: request 0 needs 5000000 prompt" },
      { "rate_per_s: 2\ninput: {kind: zipf, s: 1.1}\n", ":7:8: input.max: zipf lengths need an upper" },
      { "replay: nowhere.csv\n", ":6:9: replay: cannot read trace" },
    }
    for _, c in ipairs(cases) do
      local path = write_tmp(base .. c[1], ".yaml")
      local r = h.run("serve", path)
      os.remove(path)
      assert.are.equal(2, r.code, r.stderr)
      assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
      assert.is_truthy(r.stderr:find(path .. c[2], 1, true), r.stderr)
    end
  end)

  it("stages before the engine: retrieval, KV fetch, thinking tokens", function()
    local base = { "--qps", "2", "--requests", "200", "--format", "json" }
    local plain = json.decode(serve_cli(table.unpack(base)).stdout)
    local function with(...)
      local a = { table.unpack(base) }
      for _, v in ipairs({ ... }) do a[#a + 1] = v end
      local r = serve_cli(table.unpack(a))
      assert.are.equal(0, r.code, r.stderr)
      return json.decode(r.stdout)
    end
    -- retrieval adds at least its 50 ms to every TTFT, and its tokens to every prompt
    local rag = with("--rag-servers", "8", "--rag-time", "0.05", "--rag-tokens", "512")
    assert.is_true(rag.ttft_s.p50 > plain.ttft_s.p50 + 0.05)
    h.near(plain.throughput.input_tokens_per_s * 1024 / 512, rag.throughput.input_tokens_per_s, 0.02, "tokens")
    -- half the prompt's KV from the CXL pool: less to prefill, TTFT down
    assert.is_true(with("--kv-fetch-share", "0.5").ttft_s.p50 < plain.ttft_s.p50)
    -- thinking tokens: 128 + 256 outputs
    h.near(plain.throughput.output_tokens_per_s * 3, with("--thinking-tokens", "256").throughput.output_tokens_per_s,
      0.02, "outputs")
  end)

  it("the HERMES-style scenario: RAG and reasoning cost capacity, KV from CXL adds it", function()
    local svg = os.tmpname()
    local r = h.run("scenario", "run", "hermes_serving", svg)
    assert.are.equal(0, r.code, r.stderr)
    local cap = {}
    for name, c in r.stdout:gmatch("\n(%a[%w ]-)%s%s+%S+ m?s%s+%S+ m?s%s+%S+ m?s%s+([%d.]+)") do
      cap[name] = tonumber(c)
    end
    assert.is_true(cap["RAG on CPU"] < cap.plain and cap.reasoning < cap.plain and cap["KV from CXL"] > cap.plain,
      r.stdout)
    assert.is_truthy(read(svg):find("capacity at SLO (requests/s)", 1, true))
    os.remove(svg)
  end)

  it("README's serve outputs are what fathom prints", function()
    local text = read("README.md")
    local n = 0
    for body in text:gmatch("```\n(%$ fathom serve.-)```") do
      local lines = {}
      for l in body:gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
      local cmd, i = lines[1]:gsub("^%$ fathom ", ""), 2
      while cmd:sub(-1) == "\\" do
        cmd = cmd:sub(1, -2) .. " " .. lines[i]:gsub("^%s+", "")
        i = i + 1
      end
      local args = {}
      for w in cmd:gmatch("%S+") do args[#args + 1] = w end
      local r = h.run(table.unpack(args))
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal(table.concat(lines, "\n", i) .. "\n", r.stdout)
      n = n + 1
    end
    assert.is_true(n >= 1)
  end)
end)
