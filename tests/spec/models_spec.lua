-- The model zoo: every shipped model loads, checks, and its parameter count is within
-- 1% of the published total (active too, for MoE), or of the absolute tolerance a file
-- states for a rounded published figure (published_params_tolerance,
-- published_active_params_tolerance).
local core = require("fathom.core")
local spec = require("fathom.spec")

local function params(m)
  -- a one-GPU plan is the cheapest way to ask the core for the counts
  local node = { device_compute = { bf16_nominal = 1e15, efficiency = 1 },
    device_memory_tiers = {
      xpu_memory = { bandwidth_per_stack_nominal = 1e12, size_per_stack = 1e15, num_stack = 1 } } }
  local topo = { dimensions = { { topology_type = "switched", size = 1, interconnect = { bandwidth_nominal = 1e9 } } },
    logical = {} }
  local w = { global_batch_size = 1, micro_batch_size = 1, seq_length = 128 }
  return core.train_compile(node, topo, m, w):degrees()
end

describe("configs/models", function()
  local p = io.popen("ls configs/models/*.yaml")
  for file in p:lines() do
    it(file, function()
      local m = spec.model(file)
      local d = params(m)
      if m.published_params then
        local tol = math.max(0.01 * m.published_params, m.published_params_tolerance or 0)
        assert.is_true(math.abs(d.params_total - m.published_params) <= tol,
          string.format("total %.4g vs published %.4g", d.params_total, m.published_params))
      end
      if m.published_active_params then
        local tol = math.max(0.01 * m.published_active_params, m.published_active_params_tolerance or 0)
        assert.is_true(math.abs(d.params_active - m.published_active_params) <= tol,
          string.format("active %.4g vs published %.4g", d.params_active, m.published_active_params))
      end
    end)
  end
  p:close()
end)

-- One model, one set of dimensions: a zoo model and one validation case that ran it (per
-- model, below) must agree on every dimension the case states (the case reader's model,
-- fathom.cases.model_doc). What that run chose differently is named with the pair. Other
-- runs differ too (dgxc-benchmarking's Llama 3.1 405B runs 16 KV heads, MLPerf's GPT-3
-- 175B a 51,200-entry vocabulary): the zoo keeps the published model.
describe("configs/models agree with the validation cases that ran them", function()
  local cases = require("fathom.cases")
  local validate = require("fathom.validate")
  local pairs_ = {
    { "llama3.1_8b", "validation/modern_cases.yaml", "dgxc2501_llama31_8b_BF16_8gpu" },
    { "llama3.1_70b", "validation/modern_cases.yaml", "dgxc2501_llama31_70b_BF16_64gpu" },
    -- dgxc-benchmarking's 405B recipe runs 16 KV heads; MLPerf's keeps Meta's 8 but tokenizes
    -- with a 32,768-entry vocabulary
    { "llama3.1_405b", "validation/mlperf_cases.yaml", "mlperf50_llama31_405b_h100_512", skip = { vocab_size = true } },
    { "nemotron4_15b", "validation/modern_cases.yaml", "dgxc2501_nemotron4_15b_BF16_16gpu" },
    { "nemotron4_340b", "validation/modern_cases.yaml", "dgxc2501_nemotron4_340b_BF16_128gpu" },
    -- dgxc-benchmarking's Grok-1 recipe tokenizes with Llama 3's 128,256-entry vocabulary and
    -- unties the embeddings (xai-org/grok-1 ties them)
    { "grok1_314b", "validation/modern_cases.yaml", "dgxc2501_grok1_314b_BF16_512gpu",
      skip = { vocab_size = true, tied_embeddings = true } },
    { "deepseek_v3", "validation/modern_cases.yaml", "dgxc2505_deepseek_v3_BF16_h100_1024gpu" },
    { "llama4_maverick", "validation/modern_cases.yaml", "dgxc2505_llama4_maverick_BF16_gb200_128gpu" },
    { "kimi_k2", "validation/modern_cases.yaml", "automodel_kimi_k2_bf16_h100_256gpu" },
    { "qwen3_30b_a3b", "validation/modern_cases.yaml", "automodel_qwen3_30b_a3b_bf16_h100_8gpu" },
    { "gpt_oss_20b", "validation/modern_cases.yaml", "automodel_gpt_oss_20b_bf16_h100_8gpu" },
    { "gpt_oss_120b", "validation/modern_cases.yaml", "automodel_gpt_oss_120b_bf16_h100_64gpu" },
    { "qwen3_235b_a22b", "validation/megatron_bridge_cases.yaml", "mbr2608_qwen3_235b_a22b_gb300_mxfp8_256gpu" },
  }
  local keys = { "d_model", "n_layers", "num_heads", "vocab_size", "gated_mlp", "squared_relu",
    "tied_embeddings", "learned_pos_emb", "num_regular_experts", "num_selected_experts", "num_shared_experts",
    "expert_ffn_hidden_size", "first_dense_layers", "moe_layer_interval", "attention_window",
    "full_attention_interval", "attention_sinks", "num_nextn_predict_layers", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim" }
  local loaded = {}
  for _, p in ipairs(pairs_) do
    it(p[1] .. " = " .. p[3], function()
      loaded[p[2]] = loaded[p[2]] or validate.load(p[2])
      local case
      for _, c in ipairs(loaded[p[2]]) do
        if c.id == p[3] then case = c end
      end
      assert.is_not_nil(case, p[3])
      local doc = assert(cases.model_doc(case.model, 4096))
      local zoo = spec.model("configs/models/" .. p[1] .. ".yaml")
      local checked = 0
      for _, k in ipairs(keys) do
        if doc[k] ~= nil and not (p.skip and p.skip[k]) then
          local z = zoo[k]
          if z == nil and type(doc[k]) == "boolean" then z = false end
          if z == nil and type(doc[k]) == "number" then z = 0 end
          assert.are.equal(doc[k], z, k)
          checked = checked + 1
        end
      end
      -- KV heads, the head width and the dense layers' FFN, however each file writes them
      -- (no KV heads: as many as query heads, as MLA's latent KV is read)
      local function kv(m) return (m.num_kv_heads or 0) > 0 and m.num_kv_heads or m.num_heads end
      local function head(m) return m.head_dim or m.d_model // m.num_heads end
      assert.are.equal(kv(doc), kv(zoo), "KV heads")
      checked = checked + 1
      if (doc.kv_lora_rank or 0) == 0 then -- MLA's widths are its own keys, compared above
        assert.are.equal(head(doc), head(zoo), "head width")
      end
      local dense = (doc.num_regular_experts or 0) == 0 or (doc.first_dense_layers or 0) > 0
        or (doc.moe_layer_interval or 1) > 1
      if dense then
        assert.are.equal(doc.ffn_hidden_size, zoo.ffn_hidden_size or zoo.mlp_ratio * zoo.d_model, "dense FFN")
        checked = checked + 1
      end
      assert.is_true(checked >= 8, "too few dimensions compared: " .. checked)
    end)
  end
end)

describe("the README's model zoo paragraph", function()
  it("names every file of configs/models, and nothing else", function()
    local f = assert(io.open("README.md"))
    local text = f:read("a")
    f:close()
    local para = assert(text:match("The model zoo %(`configs/models`.-\n\n"), "paragraph not found")
    local named = {}
    for n in para:gmatch("`([%w%._]+)`") do named[n] = true end
    local p = io.popen("ls configs/models/*.yaml")
    local files = {}
    for file in p:lines() do files[file:match("([^/]+)%.yaml$")] = true end
    p:close()
    -- "megatron_gpt_1.7b ... megatron_gpt_1t" stands for the weak-scaling series between them
    for n in pairs(files) do
      if not n:find("^megatron_gpt_") then assert.is_true(named[n] == true, n .. " is not in the paragraph") end
    end
    for n in pairs(named) do
      if n:find("_") or n:find("%d") then assert.is_true(files[n] == true, n .. " is not a zoo file") end
    end
  end)
end)
