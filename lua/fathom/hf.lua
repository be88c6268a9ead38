-- fathom.hf: a Hugging Face `config.json` as a fathom model spec, wherever a model spec
-- is accepted (spec.model: `--model path/to/config.json`, `model_spec`, scenario{model=}).
-- One row per model_type: which HF keys give fathom's fields. The keys are those of the
-- transformers configuration classes (LlamaConfig, MistralConfig, MixtralConfig,
-- Qwen2Config, Qwen3Config, Qwen3MoeConfig, DeepseekV3Config, GptOssConfig, NemotronConfig,
-- NemotronHConfig).
-- Not modelled, and so left out of the counts: biases (Qwen2's QKV, gpt-oss's), norms'
-- weights beyond fathom's own, the sinks' per-head logits (gpt-oss), partial rotary
-- embeddings (Nemotron; no parameters). gpt-oss's sliding windows and sinks are read.
local errors = require("fathom.errors")

local M = {}

-- Every family: the dense transformer's keys.
local function common(c)
  return {
    d_model = c.hidden_size, n_layers = c.num_hidden_layers, num_heads = c.num_attention_heads,
    num_kv_heads = c.num_key_value_heads or c.num_attention_heads, ffn_hidden_size = c.intermediate_size,
    gated_mlp = true, max_sequence_length = c.max_position_embeddings, vocab_size = c.vocab_size,
    tied_embeddings = c.tie_word_embeddings == true,
    -- an explicit head_dim that differs from hidden / heads (Qwen3, gpt-oss)
    head_dim = c.head_dim and c.hidden_size and c.num_attention_heads and
      c.head_dim * c.num_attention_heads ~= c.hidden_size and c.head_dim or nil,
  }
end

local function dense(c) return common(c) end

-- Mixtral: every layer MoE, the experts as wide as intermediate_size.
local function mixtral(c)
  local m = common(c)
  m.num_regular_experts, m.num_selected_experts = c.num_local_experts, c.num_experts_per_tok
  m.expert_ffn_hidden_size = c.intermediate_size
  return m
end

-- Qwen3-MoE: experts of moe_intermediate_size every decoder_sparse_step layers (1 in the
-- published models, with no mlp_only_layers), no shared expert.
local function qwen3_moe(c)
  local m = common(c)
  m.num_regular_experts, m.num_selected_experts = c.num_experts, c.num_experts_per_tok
  m.expert_ffn_hidden_size = c.moe_intermediate_size
  m.moe_layer_interval = c.decoder_sparse_step or 1
  return m
end

-- DeepSeek-V3 / R1: MLA, first_k_dense_replace dense layers, shared and routed experts,
-- node-limited routing groups, multi-token prediction modules.
local function deepseek_v3(c)
  local m = common(c)
  m.num_kv_heads = nil -- MLA: the latent KV, not GQA
  m.num_regular_experts, m.num_selected_experts = c.n_routed_experts, c.num_experts_per_tok
  m.num_shared_experts = c.n_shared_experts
  m.expert_ffn_hidden_size = c.moe_intermediate_size
  m.first_dense_layers = c.first_k_dense_replace
  m.moe_layer_interval = c.moe_layer_freq
  m.n_group, m.topk_group = c.n_group, c.topk_group
  m.num_nextn_predict_layers = c.num_nextn_predict_layers
  m.q_lora_rank, m.kv_lora_rank = c.q_lora_rank, c.kv_lora_rank
  m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim = c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
  return m
end

-- gpt-oss: every layer MoE (SwiGLU experts of intermediate_size), explicit head_dim.
-- gpt-oss: every layer MoE; sliding_window-token windows on the layers layer_types calls
-- "sliding_attention", every k-th layer "full_attention" (GptOssConfig's default: they
-- alternate, k = 2); attention sinks in every layer (their cost: the workload's
-- attention_sink_rate_share).
local function full_interval(types)
  if type(types) ~= "table" or #types == 0 then return 2 end
  local k
  for i, t in ipairs(types) do
    if t == "full_attention" then k = i; break end
  end
  if not k then return 0 end -- every layer windowed
  for i, t in ipairs(types) do
    if (t == "full_attention") ~= (i % k == 0) then return nil end -- no period: not read
  end
  return k
end

local function gpt_oss(c)
  local m = common(c)
  m.num_regular_experts = c.num_local_experts
  m.num_selected_experts = c.num_experts_per_tok or c.experts_per_token
  m.expert_ffn_hidden_size = c.intermediate_size
  m.attention_sinks = true
  local k = c.sliding_window and full_interval(c.layer_types)
  if k then m.attention_window, m.full_attention_interval = c.sliding_window, k end
  return m
end

-- Nemotron (Nemotron-4, Minitron): a plain MLP with squared ReLU, not gated.
local function nemotron(c)
  local m = common(c)
  m.gated_mlp = c.hidden_act ~= "relu2" and c.hidden_act ~= "relu"
  m.squared_relu = c.hidden_act == "relu2"
  return m
end

-- Nemotron-H (NemotronHConfig): hybrid Mamba2-Transformer, its sub-layers in
-- hybrid_override_pattern (num_hidden_layers of them), squared-ReLU MLPs, Mamba2 heads of
-- mamba_head_dim with ssm_state_size states in n_groups groups. Nemotron 3's MoE
-- sub-layers (E): n_routed_experts of moe_intermediate_size, num_experts_per_tok a token,
-- shared experts of moe_shared_expert_intermediate_size (counted as routed-width experts).
-- LatentMoE (moe_latent_size, Nemotron 3 Super) is not modelled: refused.
local function nemotron_h(c)
  if c.moe_latent_size ~= nil and c.moe_latent_size ~= 0 then
    errors.at(c, "moe_latent_size", "moe_latent_size", "LatentMoE experts are not modelled")
  end
  local m = nemotron(c)
  m.gated_mlp = c.mlp_hidden_act ~= "relu2" and c.mlp_hidden_act ~= "relu" and m.gated_mlp
  m.squared_relu = c.mlp_hidden_act == "relu2" or (c.mlp_hidden_act == nil and m.squared_relu)
  m.head_dim = c.head_dim or c.attention_head_dim
  m.hybrid_override_pattern = c.hybrid_override_pattern
  m.mamba_num_heads, m.mamba_head_dim = c.mamba_num_heads, c.mamba_head_dim
  m.mamba_state_dim, m.mamba_num_groups = c.ssm_state_size, c.n_groups
  m.mamba_conv_kernel, m.mamba_chunk_size = c.conv_kernel, c.chunk_size
  if (c.n_routed_experts or 0) > 1 then
    m.num_regular_experts, m.num_selected_experts = c.n_routed_experts, c.num_experts_per_tok
    m.expert_ffn_hidden_size = c.moe_intermediate_size
    local shared, width = c.n_shared_experts or 0, c.moe_shared_expert_intermediate_size
    if shared > 0 and width and c.moe_intermediate_size and c.moe_intermediate_size > 0 then
      shared = math.max(1, math.floor(shared * width / c.moe_intermediate_size + 0.5))
    end
    m.num_shared_experts = shared
    m.n_group, m.topk_group = c.n_group, c.topk_group
  end
  return m
end

-- model_type -> converter (transformers' names).
M.families = {
  llama = dense, mistral = dense, qwen2 = dense, qwen3 = dense,
  mixtral = mixtral, qwen3_moe = qwen3_moe, deepseek_v3 = deepseek_v3, gpt_oss = gpt_oss, nemotron = nemotron,
  -- Kimi K2 (moonshotai/Kimi-K2-*): DeepSeek-V3's architecture (DeepseekV3ForCausalLM) and keys
  kimi_k2 = deepseek_v3,
  nemotron_h = nemotron_h,
}

local function family_names()
  local out = {}
  for k in pairs(M.families) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- is_hf(doc) -> whether a loaded document is a Hugging Face config (it names a model_type
-- or architectures, and none of fathom's own keys).
function M.is_hf(doc)
  return type(doc) == "table" and doc.d_model == nil and (doc.model_type ~= nil or doc.architectures ~= nil)
end

-- convert(doc) -> a fathom model spec (a plain table spec.model checks); an unknown
-- model_type or a missing key is an input error at the config's position.
function M.convert(doc)
  local t = doc.model_type
  local f = M.families[t]
  if not f then
    errors.at(doc, doc.model_type ~= nil and "model_type" or "architectures", "model_type",
      "'%s' is not a model type fathom imports (%s); write a model spec instead (README \"Inputs\")",
      tostring(t), table.concat(family_names(), ", "))
  end
  for _, k in ipairs({ "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size" }) do
    if doc[k] == nil then errors.at(doc, "model_type", k, "a %s config.json needs '%s'", t, k) end
  end
  local m = f(doc)
  local name = doc._name_or_path or doc.name_or_path
  m.name = type(name) == "string" and name:match("([^/]+)$") or t
  for k, v in pairs(m) do
    if v == nil then m[k] = nil end
  end
  return m
end

return M
