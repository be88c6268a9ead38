local fathom = require("fathom")
local h = require("helpers")
local json = require("fathom.format.json")

local base = {
  hardware = "configs/hardware/hardware_library.yaml",
  physical = "configs/topology_zoo/physical/dgx_h100_1node.yaml",
  logical = "configs/topology_zoo/logical/tp8.yaml",
  model = "configs/models/llama3.1_70b.yaml",
}

local function with(t, extra)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  for k, v in pairs(extra) do out[k] = v end
  return out
end

describe("inference pass modes", function()
  it("decode through Lua: TPOT, tokens/s, KV cache, the largest batch", function()
    local sc = fathom.scenario(with(base, { workload = "configs/inference_decode_specs/llama3.1_70b_decode.yaml",
      pass_mode = "inference_decode" }))
    local r = sc:evaluate()
    assert.are.equal("decode", r.pass)
    assert.is_true(r.tpot_s > 0 and r.tpot_last_s > r.tpot_first_s)
    h.near(512 * r.tpot_s, r.time_s, 1e-12, "total = tokens x TPOT")
    h.near(64 / r.tpot_s, r.tokens_per_s, 1e-12, "tokens/s")
    -- GQA: 80 layers x 2 x 8 KV heads x 128 = 163,840 elements per token, split 8 ways over
    -- TP, FP8: 2,560 tokens x 20,480 B = 52,428,800 B per request per GPU.
    h.near(52428800, r.kv_bytes_per_request_per_gpu, 1e-12, "KV per request")
    assert.is_true(r.max_global_batch >= 64)
    local rec = sc:record(r)
    assert.is_number(rec.time.time_per_output_token_seconds)
    assert.is_number(rec.memory_footprint.max_global_batch_size)
    -- a dense model's MLP is `mlp` in records, not ScaleScope's `moe_ffn`
    assert.is_table(rec.compute_per_batch_per_xpu.forward.mlp)
    assert.is_nil(rec.compute_per_batch_per_xpu.forward.moe_ffn)
    -- degrees are integers, as TrainPlan:degrees() gives them
    local d = sc:compile():degrees()
    for _, k in ipairs({ "tp", "tp_moe", "dp", "dp_moe", "ep", "ep_su", "ep_so", "pp", "cp", "gpus", "microbatches",
      "layers_per_stage", "moe_layers_per_stage" }) do
      assert.are.equal("integer", math.type(d[k]), k)
    end
  end)

  it("sliding windows keep only their window in the KV cache and read only it", function()
    local model = fathom.load_model(base.model)
    model.source_table = nil
    local sc = fathom.scenario(with(base, { model = model, pass_mode = "inference_decode",
      workload = "configs/inference_decode_specs/llama3.1_70b_decode.yaml" }))
    local full = sc:evaluate()
    model.attention_window, model.full_attention_interval = 512, 2
    local win = fathom.scenario(with(base, { model = model, pass_mode = "inference_decode",
      workload = "configs/inference_decode_specs/llama3.1_70b_decode.yaml" })):evaluate()
    -- 2,560 tokens of context at the end, half the layers keeping 512 of them:
    -- 0.5 + 0.5 x 512 / 2560 = 0.6 of the full cache (52,428,800 B per request per GPU)
    h.near(0.6 * 52428800, win.kv_bytes_per_request_per_gpu, 1e-12, "windowed KV per request")
    assert.is_true(win.kv_read_s < full.kv_read_s)
    assert.is_true(win.max_global_batch > full.max_global_batch)
  end)

  it("moving the KV cache to a CXL pool (remote_memory) slows decode", function()
    local near = fathom.scenario(with(base, { workload = "configs/inference_decode_specs/llama3.1_70b_decode.yaml",
      pass_mode = "inference_decode" })):evaluate()
    local far = fathom.scenario(with(base, {
      workload = "configs/inference_decode_specs/llama3.1_70b_decode_kv_remote.yaml",
      pass_mode = "inference_decode" })):evaluate()
    assert.is_true(far.tpot_s > 5 * near.tpot_s)
    assert.is_true(far.memory.tiers.remote_memory.bytes > 0)
  end)

  it("prefill gives time to first token; analyze sweeps the batch from the command line", function()
    local r = fathom.scenario(with(base, { workload = "configs/inference_prefill_specs/llama3.1_70b_prefill.yaml",
      pass_mode = "inference_prefill" })):evaluate()
    assert.is_true(r.ttft_s > 0 and r.time_s >= r.ttft_s)
    local sweep = os.tmpname()
    local f = io.open(sweep, "w")
    f:write("zip:\n  workload_spec.global_batch_size: [1, 8, 64, 256]\n" ..
      "  workload_spec.micro_batch_size: [1, 8, 64, 256]\n")
    f:close()
    local out = os.tmpname()
    local res = h.run("analyze", "--hardware-lib", base.hardware, "--physical-topology", base.physical,
      "--logical-topology", base.logical, "--model-spec", base.model,
      "--workload-spec", "configs/inference_decode_specs/llama3.1_70b_decode.yaml",
      "--pass-mode", "inference_decode", "--sweep-config", sweep, "--output-file", out, "--format", "json",
      "--raw-output")
    os.remove(sweep)
    assert.are.equal(0, res.code, res.stderr)
    local fh = io.open(out)
    local recs = json.decode(fh:read("a"))
    fh:close()
    os.remove(out)
    assert.are.equal(4, #recs)
    -- larger batches raise throughput (until compute- or capacity-bound)
    for i = 2, 4 do
      assert.is_true(recs[i].time.tokens_per_second > recs[i - 1].time.tokens_per_second)
    end
  end)

  it("a decode spec without num_generated_tokens is refused with its position", function()
    local w = os.tmpname()
    local f = io.open(w, "w")
    f:write("global_batch_size: 4\nmicro_batch_size: 4\nprefill_seq_len: 128\n")
    f:close()
    local res = h.run("analyze", "--hardware-lib", base.hardware, "--physical-topology", base.physical,
      "--logical-topology", base.logical, "--model-spec", base.model, "--workload-spec", w,
      "--pass-mode", "inference_decode")
    os.remove(w)
    assert.are.equal(2, res.code)
    assert.matches(":1:1: num_generated_tokens: missing required key %(tokens to generate%)", res.stderr)
  end)
end)

describe("decode under grouped-query attention (decode_kv_reread)", function()
  local config = require("fathom.config")
  local path = "configs/inference_decode_specs/llama3.1_70b_decode.yaml"
  local function decode(extra)
    local doc = config.load_mapping(path, "decode workload spec")
    for k, v in pairs(extra) do doc[k] = v end
    return fathom.scenario(with(base, { workload = doc, pass_mode = "inference_decode" })):evaluate()
  end

  it("loads each KV head 1 + s (g - 1) times: the extra KV time is s x 7 x the cached reads", function()
    -- Llama-3.1 70B at TP 8: 8 query heads and 1 KV head per GPU, g = 8. At the mean step
    -- (2,048 cached + 512 generated: context (2,049 + 2,560) / 2 = 2,304.5) each request
    -- reads 2,304.5 tokens and appends 1, both of 20,480 B per GPU: kv_read_s is
    -- (2,304.5 + 1) x those bytes / the HBM's bandwidth. Share 0.5 loads the reads 4.5
    -- times: 3.5 x 2,304.5 / 2,305.5 of kv_read_s more.
    local grouped = decode({})
    local half = decode({ decode_kv_reread = 0.5 })
    h.near(3.5 * 2304.5 / 2305.5, (half.kv_read_s - grouped.kv_read_s) / grouped.kv_read_s, 1e-9, "extra KV")
    h.near(half.kv_read_s - grouped.kv_read_s, half.tpot_s - grouped.tpot_s, 1e-6, "memory-bound: into TPOT")
    -- the framework's default: TensorRT-LLM 0.5/0.6 (masked MHA) 0.75, vLLM 0
    local trt = "TensorRT-LLM v0.6.1"
    h.near(decode({ framework = trt, decode_kv_reread = 0.75 }).tpot_s, decode({ framework = trt }).tpot_s, 1e-12,
      "trt")
    assert.is_true(decode({ framework = trt }).tpot_s > decode({ framework = trt, decode_kv_reread = 0 }).tpot_s)
    h.near(decode({ framework = "vLLM", decode_kv_reread = 0 }).tpot_s, decode({ framework = "vLLM" }).tpot_s, 1e-12,
      "vllm")
  end)

  it("refuses a share outside [0, 1] naming the key", function()
    local ok, err = pcall(decode, { decode_kv_reread = 1.5 })
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("decode_kv_reread", 1, true), tostring(err))
  end)
end)

describe("serving a block-scaled checkpoint (precision_recipe)", function()
  local config = require("fathom.config")
  local path = "configs/inference_decode_specs/llama3.1_70b_decode.yaml"
  local function scenario(extra, hw)
    local doc = config.load_mapping(path, "decode workload spec")
    for k, v in pairs(extra) do doc[k] = v end
    return fathom.scenario(with(base, { workload = doc, pass_mode = "inference_decode",
      physical = hw or base.physical }))
  end

  it("holds and reads each weight at 4 bits plus its scale, and runs the linears at FP4", function()
    -- NVFP4: 0.5 B of E2M1 + an E4M3 scale per 16 elements = 0.5625 B a weight, where the
    -- spec's FP8 weights take 1 B; the embedding and the LM head, 2 x 128,256 x 8,192 / TP 8 =
    -- 262,668,288 parameters a GPU, stay at 2 B: 0.5625 of the FP8 spec's + 1.4375 x those
    local fp8 = scenario({}):evaluate()
    local fp4sc = fathom.scenario(with(base, { pass_mode = "inference_decode",
      workload = "configs/inference_decode_specs/llama3.1_70b_decode_nvfp4.yaml" }))
    local fp4 = fp4sc:evaluate()
    h.near(0.5625 * fp8.memory.components.weights + 1.4375 * 262668288, fp4.memory.components.weights, 1e-12,
      "weights held")
    -- decode at batch 64 reads them each step: less weight time, the KV cache's unchanged
    assert.is_true(fp4.weights_read_s < 0.6 * fp8.weights_read_s, fp4.weights_read_s .. " vs " .. fp8.weights_read_s)
    h.near(fp8.kv_read_s, fp4.kv_read_s, 1e-12, "KV reads")
    -- the record states the recipe and the bytes a weight takes
    local rec = fp4sc:record(fp4)
    assert.are.equal("nvfp4", rec.configuration.precision_recipe)
    h.near(0.5625, rec.configuration.weight_float_size_bytes, 1e-12, "record")
    -- H100 has no FP4 tensor cores: its linears run at the FP8 rate (no faster than FP8's;
    -- a tile's fixed K cost is more 4-bit elements), B200's at its FP4 rate
    local function prefill(recipe, hw)
      local doc = { global_batch_size = 8, micro_batch_size = 8, seq_length = 4096, float_size_bytes = 2,
        precision_recipe = recipe, gemm_float_size_bytes = recipe == nil and 1 or nil }
      return fathom.scenario(with(base, { workload = doc, pass_mode = "inference_prefill", physical = hw }))
        :evaluate().ttft_s
    end
    local h100 = "configs/topology_zoo/physical/dgx_h100_1node.yaml"
    local b200 = { name = "dgx_b200_1node", node_definition_ref = "B200",
      dimensions = { { name = "nvlink", interconnect_name = "scale_up", topology_type = "switched", size = 8 } } }
    local fp8_h100, fp4_h100 = prefill(nil, h100), prefill("nvfp4", h100)
    assert.is_true(fp4_h100 >= 0.99 * fp8_h100, fp4_h100 .. " vs " .. fp8_h100)
    -- (B200: the linears at 0.36 x 9 PFLOP/s against 0.45 x 4.5 for FP8, 1.6x; attention at BF16 either way)
    local fp8_b200, fp4_b200 = prefill(nil, b200), prefill("nvfp4", b200)
    assert.is_true(fp4_b200 < 0.9 * fp8_b200, fp4_b200 .. " vs " .. fp8_b200)
  end)

  it("refuses an unknown recipe and a GEMM width that contradicts one, naming the key", function()
    local ok, err = pcall(function() return scenario({ precision_recipe = "nvfp5" }):evaluate() end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("precision_recipe", 1, true), tostring(err))
    ok, err = pcall(function()
      return scenario({ precision_recipe = "nvfp4", gemm_float_size_bytes = 1 }):evaluate()
    end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("gemm_float_size_bytes", 1, true), tostring(err))
    -- from the command line: the file, line and column, exit 2
    local r = h.run("analyze", "--hardware-lib", "configs/hardware/hardware_library.yaml",
      "--physical-topology", "configs/topology_zoo/physical/dgx_h100_1node.yaml",
      "--logical-topology", "configs/topology_zoo/logical/tp8.yaml", "--model-spec", "configs/models/llama3.1_70b.yaml",
      "--workload-spec", "tests/fixtures/bad/decode_recipe_misspelt.yaml", "--pass-mode", "inference_decode")
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("decode_recipe_misspelt.yaml:7:19: precision_recipe: expected one of", 1, true),
      r.stderr)
  end)
end)

describe("analyze summary for inference", function()
  it("prints TPOT, throughput and the largest batch", function()
    local r = h.run("analyze", "--hardware-lib", base.hardware, "--physical-topology", base.physical,
      "--logical-topology", base.logical, "--model-spec", base.model,
      "--workload-spec", "configs/inference_decode_specs/llama3.1_70b_decode.yaml", "--pass-mode", "inference_decode")
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("TPOT", r.stdout)
    assert.matches("max batch", r.stdout)
  end)
end)
