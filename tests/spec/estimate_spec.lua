-- fathom estimate: one configuration from flags, evaluated as the search evaluates it.
local h = require("helpers")
local json = require("cjson")

local BASE = { "estimate", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--gpus", "64" }

local function est(...)
  local a = {}
  for _, x in ipairs(BASE) do a[#a + 1] = x end
  for _, x in ipairs({ ... }) do a[#a + 1] = x end
  return h.run(table.unpack(a))
end

local function est_json(...)
  local r = est("--format", "json", ...)
  assert.are.equal(0, r.code, r.stderr)
  return json.decode(r.stdout)
end

local function one_line_refusal(r, pattern)
  assert.are.equal(2, r.code, r.stdout)
  assert.are.equal("", r.stdout)
  assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
  assert.matches("^fathom: estimate: ", r.stderr)
  assert.matches(pattern, r.stderr)
end

describe("fathom estimate", function()
  it("prints the strategy, where the step goes, memory per tier and the fit", function()
    local r = est("--tp", "8", "--pp", "4", "--zero", "ZERO1")
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("^llama3.1_70b on 64 H100_SXM %(8%-GPU pods%), training, batch 1024 x 4096 tokens, bf16\n", r.stdout)
    assert.matches("strategy: TP 8, PP 4 %(1 in the pod%), DP 2, 1F1B, micro%-batch 1, recompute none, ZERO1, SP on",
      r.stdout)
    assert.matches("\nstep time +seconds +share\n", r.stdout)
    assert.matches("\nexposed tp ", r.stdout)
    assert.matches("\noptimizer states ", r.stdout)
    assert.matches("\nruntime context +1 GiB\n", r.stdout)
    assert.matches("\nxpu_memory .* yes\n", r.stdout)
    assert.matches("\nfits: yes, [%d.]+ GiB free per GPU %(reserve included%)\n$", r.stdout)
  end)

  it("agrees with `search --fix` of the same strategy (step time, MFU, memory)", function()
    local e = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--recompute", "selective", "--micro-batch", "2")
    local r = h.run("search", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--gpus", "64", "--format", "json",
      "--workers", "1", "--fix", "tp=8,pp=4,mb=2,recompute=selective,dp=ZERO1,schedule=1F1B,sp=true,vs=1")
    assert.are.equal(0, r.code, r.stderr)
    local s = json.decode(r.stdout).hits[1]
    assert.are.equal(s.step_time_s, e.time.step_time_seconds)
    assert.are.equal(s.mfu, e.time.mfu)
    assert.are.equal(s.peak_bytes, e.memory.peak_bytes)
    assert.are.equal(s.headroom_bytes, e.memory.headroom_bytes)
    assert.are.equal(s.pp_in, e.strategy.pp_in)
    assert.are.equal(s.exposed_s.tp, e.time.step_breakdown.exposed_tp_seconds)
  end)

  it("JSON carries raw SI numbers that add up (checked by hand relations)", function()
    local e = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1")
    -- DP = 64 GPUs / (TP 8 x PP 4) = 2; 1024 sequences / (DP 2 x micro-batch 1) = 512 micro-batches
    assert.are.equal(2, e.strategy.dp)
    assert.are.equal(512, e.time.microbatches)
    -- the breakdown is the step: compute + exposed memory + recompute + bubble + optimizer
    -- + offload + each exposed collective
    local sum = 0
    for _, v in pairs(e.time.step_breakdown) do sum = sum + v end
    h.near(e.time.step_time_seconds, sum, 1e-9, "breakdown sum")
    -- tokens/s = batch x sequence / step; per GPU: / 64
    h.near(1024 * 4096 / e.time.step_time_seconds, e.time.tokens_per_second, 1e-12, "tokens/s")
    h.near(e.time.tokens_per_second / 64, e.time.tokens_per_second_per_gpu, 1e-12, "tokens/s/GPU")
    -- memory: the components fill the accelerator tier, the forward and backward transients
    -- never at once (the larger counts); headroom = capacity - used
    local c = e.memory.components
    local comp = -math.min(c.transient_forward_peak_bytes, c.transient_backward_peak_bytes)
    for _, v in pairs(c) do comp = comp + v end
    local t = e.memory.tiers.xpu_memory
    h.near(t.used_bytes, comp, 1e-12, "components")
    assert.are.equal(80 * 2 ^ 30, t.capacity_bytes) -- H100 SXM: 80 GiB HBM3
    h.near(t.capacity_bytes - t.used_bytes, e.memory.headroom_bytes, 1e-12, "headroom")
    assert.are.equal(2 ^ 30, e.memory.components.runtime_context_bytes) -- the default reserve
    for k, v in pairs(e.time) do
      if k:match("_seconds$") or k:match("per_second") then assert.are.equal("number", type(v), k) end
    end
  end)

  it("says how many passes DualPipe pairs: by hand 507 of 512 on PP 4", function()
    -- batch 1024 over DP 2 at micro-batch 1: 512 micro-batches; dualpipe.py on an end rank of 4
    -- (half_rank 0): 512 / 2 - 4 + 1 = 253 main-step iterations of two pairs and 4 / 2 - 1 = 1
    -- of one: 507; the middle rank's 2 x 254 - 1 = 507 too
    local e = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--schedule", "DUALPIPE")
    h.near(507 / 512, e.time.paired_pass_fraction, 1e-12)
    local r = est("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--schedule", "DUALPIPE")
    assert.matches("pairs: 99%.02%% of the passes run in forward%-backward pairs", r.stdout)
    -- 1F1B pairs none (without an EP overlap made of pairs): no key, no line
    e = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1")
    assert.is_nil(e.time.paired_pass_fraction)
    assert.is_nil(est("--tp", "8", "--pp", "4", "--zero", "ZERO1").stdout:find("pairs: ", 1, true))
  end)

  it("records its inputs and assumptions", function()
    local e = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--precision", "fp8_delayed",
      "--memory-reserve", "2GiB", "--seq", "2048", "--global-batch", "512")
    assert.are.same({ model = "llama3.1_70b", hardware = "H100_SXM", gpus = 64, pod_size = 8, pass_mode = "training",
      workload = "train_specs/search_default.yaml", precision = "fp8_delayed (bf16 elsewhere)", global_batch = 512,
      seq_length = 2048, memory_reserve_bytes = 2 ^ 31 }, e.inputs)
    assert.are.equal(2 ^ 31, e.memory.components.runtime_context_bytes)
  end)

  it("--precision fp8 runs the linear layers faster than bf16 on an H100", function()
    local bf = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1")
    local f8 = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--precision", "fp8_current")
    assert.is_true(f8.time.step_breakdown.compute_seconds < bf.time.step_breakdown.compute_seconds)
    -- and MFU is measured against the GEMM precision's dense peak (hardware library, H100 SXM:
    -- bf16_nominal 989.4e12, fp8_nominal 1978.9e12), so an FP8 run's MFU is not comparable
    -- with a BF16 run's without saying so
    assert.are.equal(989.4e12, bf.time.mfu_basis_flops_per_second_per_gpu)
    assert.are.equal(1978.9e12, f8.time.mfu_basis_flops_per_second_per_gpu)
    -- MFU = model FLOP/s per GPU / basis: the same model FLOPs per token in both, so the
    -- MFU ratio is the tokens/s ratio over the basis ratio
    local basis_ratio = 1978.9e12 / 989.4e12
    h.near(f8.time.tokens_per_second / bf.time.tokens_per_second / basis_ratio, f8.time.mfu / bf.time.mfu, 1e-9,
      "MFU ratio")
  end)

  it("--lora-rank freezes the base: adapters alone train, frozen linears keep no inputs", function()
    local full = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1")
    local all = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--lora-rank", "16")
    local attn = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--lora-rank", "16", "--lora-targets",
      "attention")
    assert.are.equal(16, attn.inputs.lora_rank)
    assert.are.equal("attention", attn.inputs.lora_targets)
    assert.are.equal("all_linear", all.inputs.lora_targets)
    assert.is_nil(full.inputs.lora_rank)
    local c = function(e, k) return e.memory.components[k .. "_bytes"] end
    -- gradients and optimizer states for the adapters only: far below full training's
    assert.is_true(c(all, "gradient_buffers") < c(full, "gradient_buffers") / 50)
    assert.is_true(c(all, "optimizer_states") < c(full, "optimizer_states") / 50)
    -- fewer adapters, fewer inputs kept: the MLP's frozen linears keep none
    assert.is_true(c(attn, "gradient_buffers") < c(all, "gradient_buffers"))
    assert.is_true(c(attn, "saved_activations") < c(all, "saved_activations"))
    -- no weight gradients: a faster step
    assert.is_true(attn.time.step_time_seconds < full.time.step_time_seconds)
    one_line_refusal(est("--lora-targets", "attention"), "%-%-lora%-targets needs %-%-lora%-rank")
    one_line_refusal(est("--lora-rank", "16", "--lora-targets", "qkv"), "lora%-targets")
  end)

  it("a configuration that does not fit is reported, not refused", function()
    local r = est("--tp", "8", "--pp", "2")
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("\nfits: NO, [%d.]+ GiB short in xpu_memory\n$", r.stdout)
    local e = est_json("--tp", "8", "--pp", "2")
    assert.is_false(e.memory.fits)
    assert.is_true(e.memory.headroom_bytes < 0)
    assert.are.equal("xpu_memory", e.memory.overflow_tier)
  end)

  it("yaml has readable units unless --raw-output; csv is one header and one row of raw numbers", function()
    local y = est("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--format", "yaml")
    assert.are.equal(0, y.code, y.stderr)
    assert.matches("\n  step_time_seconds: [%d.]+ min\n", y.stdout)
    assert.matches("\n  memory_reserve_bytes: 1 GiB\n", y.stdout)
    local raw = est("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--format", "yaml", "--raw-output")
    assert.matches("\n  step_time_seconds: [%d.]+\n", raw.stdout)
    assert.matches("\n  memory_reserve_bytes: 1073741824\n", raw.stdout)
    local c = est("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--format", "csv")
    assert.are.equal(2, h.count_lines(c.stdout))
    assert.matches("time%.step_time_seconds", c.stdout)
    assert.is_nil(c.stdout:match("GiB"))
  end)

  it("--output-file writes the file whole and prints nothing", function()
    local path = os.tmpname()
    local r = est("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--format", "json", "--output-file", path)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("", r.stdout)
    local f = assert(io.open(path))
    local v = json.decode(f:read("a"))
    f:close()
    os.remove(path)
    assert.are.equal(8, v.strategy.tp)
  end)

  it("MoE: EP and the experts' TP are placed as the search places them", function()
    local r = h.run("estimate", "--model", "mixtral_8x7b", "--hardware", "H100_SXM", "--gpus", "64", "--tp", "2",
      "--ep", "8", "--pp", "2", "--zero", "ZERO1", "--recompute", "full", "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local e = json.decode(r.stdout)
    assert.are.equal(8, e.strategy.ep)
    assert.is_true(e.strategy.ep_in_pod >= 1)
    assert.is_true(e.time.step_time_seconds > 0)
  end)

  it("decode: the serving search's evaluation of one (TP, PP, batch)", function()
    local r = h.run("estimate", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--gpus", "8", "--tp", "8",
      "--pass-mode", "inference_decode", "--micro-batch", "64", "--seq", "4096", "--gen", "512", "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local e = json.decode(r.stdout)
    local s = h.run("search", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--gpus", "8", "--pass-mode",
      "inference_decode", "--seq", "4096", "--gen", "512", "--fix", "tp=8,pp=1,batch=64", "--format", "json")
    assert.are.equal(0, s.code, s.stderr)
    local hit = json.decode(s.stdout).hits[1]
    assert.are.equal(hit.tpot_s, e.time.tpot_seconds)
    assert.are.equal(hit.peak_bytes, e.memory.peak_bytes)
    assert.are.equal(64, e.strategy.global_batch)
  end)

  it("decode: memory per component and tier, and a batch that does not fit is reported", function()
    local r = h.run("estimate", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--gpus", "8", "--tp", "2",
      "--pass-mode", "inference_decode", "--micro-batch", "1024", "--seq", "4096", "--gen", "512", "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local e = json.decode(r.stdout)
    assert.is_false(e.memory.fits)
    -- TP 2 on 8 GPUs: DP 4; 1024 sequences per replica in flight -> 4096 in all
    assert.are.equal(4, e.strategy.dp)
    assert.are.equal(4096, e.strategy.global_batch)
    -- the KV cache per GPU, by hand: 1024 sequences x (4096 prompt + 512 generated) tokens x
    -- 80 layers x (8 KV heads / TP 2) x 128 x 2 (K and V) x 1 byte (search_default's FP8 cache)
    assert.are.equal(1024 * (4096 + 512) * 80 * 4 * 128 * 2 * 1, e.memory.kv_cache_bytes)
    assert.are.equal(e.memory.kv_cache_bytes, e.memory.components.kv_cache_bytes)
    local t = e.memory.tiers.xpu_memory
    h.near(t.capacity_bytes - t.used_bytes, e.memory.headroom_bytes, 1e-12, "headroom")
    local text = h.run("estimate", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--gpus", "8", "--tp", "2",
      "--pass-mode", "inference_decode", "--micro-batch", "1024", "--seq", "4096", "--gen", "512").stdout
    assert.matches("\nfits: NO, [%d.]+ GiB short in xpu_memory\n$", text)
  end)

  it("takes virtual stages that cut a GPU's layers into unequal chunks", function()
    -- 80 layers over PP 4 in 3 chunks a GPU (7, 7 and 6 layers): the search enumerates whole
    -- chunks only (v = 2, 4, 5, ...), but the core judges a fixed --vs. A GPU's passes are the
    -- same 20 layers as in 2 chunks of 10; the bubble (p - 1)(t_f + t_b) / v is 2/3 of v = 2's.
    local two = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--schedule", "INTERLEAVED", "--vs", "2")
    local three = est_json("--tp", "8", "--pp", "4", "--zero", "ZERO1", "--schedule", "INTERLEAVED", "--vs", "3")
    h.near(two.time.step_breakdown.compute_seconds, three.time.step_breakdown.compute_seconds, 1e-12, "compute")
    h.near(two.time.step_breakdown.bubble_seconds * 2 / 3, three.time.step_breakdown.bubble_seconds, 1e-9,
      "bubble")
    -- Llama 3.1 405B in PP 16 x 8 (Megatron-Bridge's layout, 126 layers in 128 chunks: the
    -- first and last GPU 7 layers with the embedding's and the loss's chunk, the others 8)
    local r = h.run("estimate", "--model", "llama3.1_405b", "--hardware", "H100_SXM", "--gpus", "16384",
      "--tp", "8", "--pp", "16", "--vs", "8", "--schedule", "INTERLEAVED", "--global-batch", "2048",
      "--seq", "8192", "--zero", "ZERO1")
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("INTERLEAVED x8", r.stdout)
    -- a MoE model is placed as the search places it (EP across pods where it must): DeepSeek-V3's
    -- 61 layers in PP 16 x 2, EP 64 over 8 pods
    r = h.run("estimate", "--model", "deepseek_v3", "--hardware", "H800_SXM", "--gpus", "2048", "--pp", "16",
      "--ep", "64", "--vs", "2", "--schedule", "INTERLEAVED", "--global-batch", "4096", "--seq", "4096",
      "--zero", "ZERO1", "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local d = json.decode(r.stdout)
    assert.are.equal(64, d.strategy.ep)
    assert.are.equal(2, d.strategy.virtual_stages)
  end)

  describe("refuses bad input with one line and exit 2", function()
    local cases = {
      { { "--tp", "8", "--pp", "3" }, "TP 8 x CP 1 x PP 3 = 24 does not divide 64 GPUs" },
      { { "--tp", "8", "--dp", "4" }, "%-%-dp 4: 64 GPUs / %(TP 8 x CP 1 x PP 1%) = 8" },
      { { "--tp", "16" }, "exceed the 8%-GPU pod" },
      { { "--tp", "8", "--ep", "2" }, "need a model with routed experts" },
      { { "--sp", "on" }, "%-%-sp on needs %-%-tp > 1" },
      { { "--tp", "8", "--schedule", "DUALPIPE" }, "needs %-%-pp > 1" },
      { { "--tp", "8", "--pp", "4", "--schedule", "INTERLEAVED" }, "INTERLEAVED needs %-%-vs > 1" },
      { { "--tp", "8", "--pp", "4", "--vs", "21", "--schedule", "INTERLEAVED" }, "need a layer in every chunk" },
      { { "--tp", "8", "--gen", "5" }, "%-%-gen is for inference_decode" },
      { { "--zero", "ZERO4" }, "must be one of" },
      { { "--tp", "8", "--global-batch", "1023" }, "global_batch_size" },
      { { "--pod-size", "6" }, "64 GPUs are not a whole number of 6%-GPU pods" },
    }
    for _, c in ipairs(cases) do
      it(table.concat(c[1], " "), function() one_line_refusal(est(table.unpack(c[1])), c[2]) end)
    end
  end)

  it("every bad model fixture is refused with one line, no traceback (tests/fixtures/bad)", function()
    local p = io.popen("ls tests/fixtures/bad/model_*.yaml")
    for file in p:lines() do
      local r = h.run("estimate", "--model", file, "--hardware", "H100_SXM", "--gpus", "8")
      assert.are.equal(2, r.code, file .. ": " .. r.stderr)
      assert.are.equal(1, h.count_lines(r.stderr), file .. ": " .. r.stderr)
      assert.is_nil(r.stderr:find("traceback", 1, true), file)
      assert.is_nil(r.stderr:find("internal error", 1, true), file)
      assert.are.equal("", r.stdout, file)
    end
    p:close()
  end)

  it("Llama-3.1 70B on 64 H100 (TP 8, PP 2) is estimated in well under 50 ms in-process", function()
    local cmd = require("fathom.cmd.estimate")
    local args = require("fathom.args")
    local opts = args.parse({ "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--gpus", "64", "--tp", "8",
      "--pp", "2" }, cmd.spec, "estimate")
    cmd.estimate(opts) -- warm: files parsed once per process are not the estimate's cost
    local t0 = os.clock()
    local n = 10
    for _ = 1, n do cmd.estimate(opts) end
    -- a loose bound (shared CI cores); measured about 3 ms on the development machine
    assert.is_true((os.clock() - t0) / n < 0.05)
  end)

  it("--help shows examples", function()
    local r = h.run("estimate", "--help")
    assert.are.equal(0, r.code)
    assert.matches("usage: fathom estimate", r.stdout)
    assert.matches("examples:\n  fathom estimate ", r.stdout)
  end)
end)

describe("fathom estimate on an Infinity Fabric mesh", function()
  -- MI300X's 8 GPUs are a full mesh: each GPU's 7 links (64 GB/s each way) go one to each
  -- peer. A TP pair has one link between them, so its ring all-reduce runs at B/7 where an
  -- NVSwitch-like fabric would give all of B: the bandwidth term is 7x (the 12 us hop
  -- latency per step is the same, so the whole is a little under 7x). TP 8 uses every link
  -- (a one-shot exchange over all 7): as switched.
  local lib = os.tmpname()
  local f = assert(io.open(lib, "w"))
  f:write("base: hardware/hardware_library.yaml\n",
    "components:\n  interconnect:\n    infinity_fabric_mi300: {topology: switched}\n")
  f:close()
  local function tp_s(tp, extra)
    local a = { "estimate", "--model", "llama3.1_70b", "--hardware", "MI300X", "--gpus", "8", "--tp", tp,
      "--format", "json" }
    if extra then a[#a + 1], a[#a + 2] = "--hardware-lib", extra end
    local r = h.run(table.unpack(a))
    assert.are.equal(0, r.code, r.stderr)
    return json.decode(r.stdout).time.step_breakdown.exposed_tp_seconds
  end
  it("gives a TP pair one link of seven, TP 8 the whole mesh", function()
    local mesh2, sw2 = tp_s("2"), tp_s("2", lib)
    assert.is_true(mesh2 / sw2 > 6 and mesh2 / sw2 < 7, mesh2 / sw2)
    local mesh8, sw8 = tp_s("8"), tp_s("8", lib)
    assert.is_true(math.abs(mesh8 / sw8 - 1) < 0.01, mesh8 / sw8)
    os.remove(lib)
  end)
end)
