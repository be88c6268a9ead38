-- fathom.cases: read one published measurement (the schema of
-- validation/published_cases.yaml and modern_cases.yaml) into the five
-- in-memory specs fathom evaluates, or say precisely why it cannot be.
-- Every field of the schema has a meaning here; what the model schema cannot
-- express is listed on the case as an approximation, never dropped silently.
local frameworks = require("fathom.frameworks")
local names = require("fathom.names")

local M = {}

-- GPU names as vendors and papers write them -> hardware library nodes.
-- Matched in order against the lower-cased name with spaces, '-' and '_' removed,
-- so "NVIDIA B200-SXM-180GB" and "nvidia b200 sxm 180gb" read alike. `memory_gb`
-- picks a capacity variant when the case states gpu_memory_gb. `generation` names
-- the calibration group (fathom.calibration): one setting per GPU generation.
M.gpus = {
  { pattern = "gb300", node = "GB300", generation = "blackwell_ultra", scale_up_domain = 72 },
  { pattern = "b300", node = "B300", generation = "blackwell_ultra" },
  { pattern = "gb200", node = "GB200", generation = "blackwell", scale_up_domain = 72 },
  { pattern = "b200", node = "B200", generation = "blackwell" },
  { pattern = "h800", node = "H800_SXM", generation = "hopper" },
  -- GH200: H100 compute with 96-144 GB HBM3/HBM3e beside a Grace CPU; H200 is the nearest node
  { pattern = "gh200", node = "H200_SXM", generation = "hopper" },
  { pattern = "h200nvl", node = "H200_NVL", generation = "hopper" },
  { pattern = "h200", node = "H200_SXM", generation = "hopper" },
  { pattern = "h20%f[^%d]", node = "H20", generation = "hopper" },
  { pattern = "h100.*pcie", node = "H100_PCIE", generation = "hopper" },
  { pattern = "h100nvl", node = "H100_NVL", generation = "hopper" },
  { pattern = "h100", node = "H100_SXM_96GB", generation = "hopper", memory_gb = 96 },
  { pattern = "h100", node = "H100_SXM", generation = "hopper" },
  { pattern = "a100.*40g", node = "A100_40GB_SXM", generation = "ampere" },
  { pattern = "a100", node = "A100_40GB_SXM", generation = "ampere", memory_gb = 40 },
  { pattern = "a100", node = "A100_80GB_SXM", generation = "ampere" },
  { pattern = "mi250", node = "MI250X", generation = "cdna2" },
  { pattern = "mi300x", node = "MI300X", generation = "cdna3" },
  { pattern = "mi325", node = "MI325X", generation = "cdna3" },
  { pattern = "mi350", node = "MI350X", generation = "cdna4" },
  { pattern = "mi355", node = "MI355X", generation = "cdna4" },
  { pattern = "gaudi3", node = "GAUDI3", generation = "gaudi3" },
  -- Ada Lovelace PCIe cards (no NVLink); l4 must not take l40s
  { pattern = "l40s", node = "L40S", generation = "ada" },
  { pattern = "l4%f[^%d]", node = "L4", generation = "ada" },
  { pattern = "tpuv5p", node = "TPU_V5P", generation = "tpu_v5" },
  { pattern = "v5p", node = "TPU_V5P", generation = "tpu_v5" },
  { pattern = "trillium", node = "TPU_V6E", generation = "tpu_v6" },
  { pattern = "v6e", node = "TPU_V6E", generation = "tpu_v6" },
}

local function squash(s) return (tostring(s or ""):lower():gsub("[%s%-_]", "")) end

-- gpu(name, memory_gb) -> the M.gpus row for a GPU name, or nil.
function M.gpu(name, memory_gb)
  local s = squash(name)
  local mem = tonumber(memory_gb)
  for _, g in ipairs(M.gpus) do
    if s:find(g.pattern) and (g.memory_gb == nil or (mem and math.abs(mem - g.memory_gb) <= 4)) then
      return g
    end
  end
end

-- power_limit(system) -> the power cap (W) a case's GPUs ran under, or nil: a field
-- `power_limit_watts`, or the GPU name as vendors and papers write it ("500 W power limit",
-- "power-capped at 500W", "power limit 500 W").
function M.power_limit(sys)
  local v = tonumber(sys.power_limit_watts)
  if v and v > 0 then return v end
  local s = tostring(sys.gpu or ""):lower()
  local w = s:match("(%d+)%s*w%s*power%s*li?mit") or s:match("power[%s%-]*li?mit[%a%s]*(%d+)%s*w")
    or s:match("power[%s%-]*capp?e?d?[%a%s]*(%d+)%s*w") or s:match("(%d+)%s*w%s*power%s*cap")
  return w and tonumber(w) or nil
end

-- Values as case files write them ---------------------------------------------------------

-- count(v) -> a positive integer degree, or nil for null/false/0/"none"/"-".
-- (0 is truthy in Lua: `fsdp: 0` must read as "off", not as a degree.)
function M.count(v)
  if v == nil or v == false then return nil end
  if v == true then return true end
  local n = tonumber(v)
  if n == nil and type(v) == "string" then n = tonumber(v:match("^%s*(%d+)")) end
  if n == nil or n < 1 then return nil end
  return math.tointeger(n) or math.floor(n)
end

-- flag(v) -> true/false for booleans written as true/1/"yes"/"on"/"true" or false/0/null.
-- lora_rank(case) -> the LoRA rank a case states, or nil: a number under training.lora_rank,
-- training.lora.{rank, r, dim} or training.peft.{rank, r, dim}, else "LoRA rank 16", "LoRA
-- dim 16", "rank=16", "r=16" in the training strings or the notes.
function M.lora_rank(case)
  local tr = case.training or {}
  local function num(v)
    local n = tonumber(v)
    return n and n >= 1 and n == math.floor(n) and n <= 65536 and n or nil
  end
  local r = num(tr.lora_rank)
  for _, k in ipairs({ "lora", "peft" }) do
    local t = tr[k]
    if not r and type(t) == "table" then r = num(t.rank) or num(t.r) or num(t.dim) end
  end
  if r then return r end
  local text = {}
  for _, k in ipairs({ "task", "method", "peft", "lora", "finetuning", "notes" }) do
    if type(tr[k]) == "string" then text[#text + 1] = tr[k] end
  end
  if type(case.notes) == "string" then text[#text + 1] = case.notes end
  local s = table.concat(text, " "):lower()
  return num(s:match("lora[%s_%-]*rank[%s:=]*(%d+)")) or num(s:match("lora[%s_%-]*dim[%s:=]*(%d+)"))
    or num(s:match("lora[%s_%-]*r[%s]*=[%s]*(%d+)")) or num(s:match("rank[%s]*=[%s]*(%d+)"))
end

function M.flag(v)
  if v == nil or v == false or v == 0 then return false end
  if v == true then return true end
  if type(v) == "number" then return v ~= 0 end
  local s = tostring(v):lower()
  return not (s == "" or s:find("^%s*false") or s:find("^%s*no") or s:find("^%s*off") or s:find("^%s*none")
    or s:find("^%s*0%s*$") or s:find("^%s*null"))
end

local function lower(s) return tostring(s or ""):lower() end

-- Architecture -----------------------------------------------------------------------------

-- Families whose public configs fix what an `arch` string may leave unsaid.
local families = {
  { pattern = "gpt%-j", gated = false, tied = false, learned = false },
  { pattern = "gpt%-oss", gated = true, tied = false, learned = false },
  { pattern = "gpt", gated = false, tied = true, learned = true },
  { pattern = "mpt", gated = false, tied = true, learned = false },
  { pattern = "falcon", gated = false, tied = true, learned = false },
  -- NeMo's / Megatron-Bridge's Nemotron-H configs set first_last_layers_bf16 (Megatron-Core:
  -- one layer at each end, here sub-layers, runs outside the FP8 recipe)
  { pattern = "nemotron%-h", gated = false, tied = false, learned = false, bf16_edge_layers = 1 },
  { pattern = "nemotron", gated = false, tied = false, learned = false },
  { pattern = "grok", gated = true, tied = false, learned = false },
  { pattern = "gemma", gated = true, tied = true, learned = false },
  { pattern = "llama", gated = true, tied = false, learned = false },
  { pattern = "mistral", gated = true, tied = false, learned = false },
  { pattern = "mixtral", gated = true, tied = false, learned = false },
  { pattern = "qwen", gated = true, tied = false, learned = false },
  { pattern = "deepseek", gated = true, tied = false, learned = false },
  { pattern = "kimi", gated = true, tied = false, learned = false },
  { pattern = "bloom", gated = false, tied = true, learned = false },
  { pattern = "opt", gated = false, tied = true, learned = true },
}

-- arch(model) -> {gated, tied, learned, moe_interval, notes = {...}, unsupported = reason|nil}
-- from model.arch (and the model's name for what the arch string leaves unsaid).
function M.arch(mdl)
  local a = lower(mdl.arch)
  local name = lower(mdl.name)
  local fam
  for _, f in ipairs(families) do
    if a:find(f.pattern) or name:find(f.pattern) then fam = f break end
  end
  local out = { notes = {}, bf16_edge_layers = fam and fam.bf16_edge_layers }
  -- gated MLP (SwiGLU, GeGLU, ReGLU) versus a plain two-matrix MLP (GeLU, ReLU, squared ReLU)
  if a:find("swiglu") or a:find("geglu") or a:find("reglu") or a:find("gated") or a:find("silu") then
    out.gated = true
  elseif a:find("gelu") or a:find("relu") then
    out.gated = false
  else
    out.gated = fam and fam.gated or false
  end
  if mdl.gated_mlp ~= nil then out.gated = M.flag(mdl.gated_mlp) end
  -- positions: learned absolute embeddings add a seq x d_model table; RoPE/ALiBi/NoPE do not
  if a:find("learned pos") or a:find("learned%-pos") or a:find("absolute pos") then
    out.learned = true
  elseif a:find("rope") or a:find("rotary") or a:find("alibi") or a:find("nope") then
    out.learned = false
  else
    out.learned = fam and fam.learned or false
  end
  -- tied input/output embeddings
  if mdl.tied_embeddings ~= nil or mdl.tie_word_embeddings ~= nil then
    out.tied = M.flag(mdl.tied_embeddings == nil and mdl.tie_word_embeddings or mdl.tied_embeddings)
  elseif a:find("untied") then
    out.tied = false
  elseif a:find("tied") then
    out.tied = true
  else
    out.tied = fam and fam.tied or false
  end
  -- what the model schema cannot say: kept as notes (their cost is measured in the README)
  -- squared ReLU (Nemotron-4, Nemotron-H): a plain MLP whose activation runs as relu then square
  out.squared = not out.gated and (a:find("squared") ~= nil or a:find("relu2") ~= nil or a:find("relu%^2") ~= nil)
  if a:find("parallel attn") or a:find("parallel attention") then
    out.notes[#out.notes + 1] = "parallel attention/MLP run sequentially"
  end
  -- sliding windows: "128-token sliding-window", "sliding window 4096", sliding_window: N;
  -- "alternating" / "interleaved" windowed and full layers -> every 2nd full; "5:1 local/global"
  -- -> every 6th full; otherwise every layer windowed. Chunked attention (Llama 4's iRoPE)
  -- stays full causal, noted.
  out.window = M.count(mdl.sliding_window or mdl.attention_window)
    or M.count(a:match("(%d+)[%s%-]*token[%s%-]*sliding")) or M.count(a:match("sliding[%s%-]*window[%s:=]*(%d+)"))
  if out.window then
    local loc, glob = a:match("(%d+)%s*:%s*(%d+)%s*local")
    if not loc then loc, glob = a:match("(%d+)%s*local%s*:%s*(%d+)%s*global") end
    out.full_interval = M.count(mdl.full_attention_interval or mdl.sliding_window_pattern)
      or (loc and (tonumber(loc) + tonumber(glob)) // tonumber(glob))
      or ((a:find("alternat") or a:find("interleav")) and 2) or 0
  elseif a:find("sliding") then
    out.notes[#out.notes + 1] = "sliding-window attention without a window size: run as full causal attention"
  end
  -- attention sinks (gpt-oss: a learned per-head softmax offset), as the arch or the model states them
  out.sinks = a:find("sink") ~= nil or M.flag(mdl.attention_sinks) or false
  if a:find("chunked") or a:find("irope") then
    out.notes[#out.notes + 1] = "chunked attention run as full causal attention"
  end
  -- MoE layer placement: "MoE in every other layer", "alternating dense/MoE", "interleaved"
  out.moe_interval = M.count(mdl.moe_layer_interval or mdl.moe_layer_freq or mdl.interleave_moe_layer_step)
  if not out.moe_interval and (a:find("every other") or a:find("alternat.-moe") or a:find("interleaved moe")) then
    out.moe_interval = 2
  end
  -- hybrid Mamba2-Transformer: its sub-layer counts (M.hybrid_doc); Mamba/SSM models
  -- without them the core has no layer type for
  local mamba = type(mdl.mamba) == "table" and mdl.mamba or {}
  local pat = mdl.hybrid_override_pattern or mamba.hybrid_override_pattern or mamba.pattern
  if not mdl.mamba and not pat and (a:find("mamba") or a:find("ssm")) then
    out.unsupported = "Mamba/SSM layers without model.mamba counts or a hybrid_override_pattern"
  end
  return out
end

-- Group-limited routing is part of a model's router, so a case of a published architecture
-- that leaves it out runs with its public config's (HF config.json n_group / topk_group):
-- DeepSeek-V3 and R1 (deepseek-ai/DeepSeek-V3 config.json: 256 routed experts in 8 groups,
-- each token to at most 4; DeepSeek-AI 2024 Sec. 2.1.2). Kimi K2's config has n_group 1,
-- topk_group 1 (unrestricted) and Qwen3, gpt-oss, Llama 4 and Grok-1 no groups: nothing to add.
-- `mtp`: the multi-token-prediction layers the config publishes (num_nextn_predict_layers),
-- which a framework whose pretraining recipes train them (frameworks' trains_published_mtp)
-- runs where the case does not say.
M.routing_configs = {
  { pattern = "deepseek%-[vr][13]", experts = 256, top_k = 8, n_group = 8, topk_group = 4, mtp = 1,
    source = "deepseek-ai/DeepSeek-V3 config.json" },
}

-- The model fields a case may name its multi-token-prediction layers by.
local MTP_KEYS = { "num_nextn_predict_layers", "mtp_num_layers", "mtp_layers", "mtp" }

-- mtp_stated(mdl) -> whether a case's model names its MTP layers (0 included).
function M.mtp_stated(mdl)
  for _, k in ipairs(MTP_KEYS) do
    if mdl[k] ~= nil then return true end
  end
  return false
end

-- published_routing(mdl, doc) -> {n_group, topk_group, note} for a case whose model is a
-- published architecture with group-limited routing (by name and expert count), or nil.
function M.published_routing(mdl, doc)
  local name = lower(mdl.name) .. " " .. lower(mdl.arch_source)
  for _, r in ipairs(M.routing_configs) do
    if name:find(r.pattern) and doc.num_regular_experts == r.experts and doc.num_selected_experts == r.top_k then
      return { n_group = r.n_group, topk_group = r.topk_group, mtp = r.mtp, source = r.source,
        note = string.format("group-limited routing from %s: %d groups, at most %d a token", r.source,
          r.n_group, r.topk_group) }
    end
  end
end

-- model_doc(mdl, seq) -> a model spec table (lua/fathom/spec.lua schema), notes, or nil, reason.
function M.model_doc(mdl, seq)
  local arch = M.arch(mdl)
  if arch.unsupported then return nil, arch.unsupported end
  for _, k in ipairs({ "layers", "hidden", "heads", "vocab" }) do
    if not M.count(mdl[k]) then return nil, "model." .. k .. " is not given" end
  end
  local heads = M.count(mdl.heads)
  local doc = {
    name = mdl.name, d_model = M.count(mdl.hidden), n_layers = M.count(mdl.layers), num_heads = heads,
    num_kv_heads = M.count(mdl.kv_heads) or heads, head_dim = M.count(mdl.head_dim),
    vocab_size = M.count(mdl.vocab), max_sequence_length = math.max(seq or 2048, 1),
    gated_mlp = arch.gated, squared_relu = arch.squared or nil, tied_embeddings = arch.tied,
    learned_pos_emb = arch.learned,
    attention_window = arch.window, full_attention_interval = arch.window and arch.full_interval or nil,
    attention_sinks = arch.sinks or nil,
  }
  local experts = M.count(mdl.experts or mdl.num_experts)
  if experts and experts > 1 then
    doc.num_regular_experts = experts
    doc.num_selected_experts = M.count(mdl.top_k or mdl.experts_per_token) or 1
    doc.num_shared_experts = M.count(mdl.shared_experts) or 0
    local effn = M.count(mdl.expert_ffn or mdl.moe_ffn)
    if not effn then return nil, "MoE model without model.expert_ffn" end
    doc.expert_ffn_hidden_size = effn
    local sffn = M.count(mdl.shared_expert_ffn)
    if sffn and sffn ~= effn and doc.num_shared_experts > 0 then
      -- the core sizes shared experts like routed ones: keep their FLOPs by scaling the count
      if sffn % effn == 0 then
        doc.num_shared_experts = doc.num_shared_experts * (sffn // effn)
      else
        arch.notes[#arch.notes + 1] = "shared expert ffn differs from the routed experts'"
      end
    end
    local dense = M.count(mdl.dense_layers) or 0
    if arch.moe_interval and arch.moe_interval > 1 then
      -- interleaved: every interval-th layer is MoE; dense_layers counts all dense layers
      doc.moe_layer_interval = arch.moe_interval
      local moe_layers = doc.n_layers // arch.moe_interval
      doc.first_dense_layers = math.max(0, dense - (doc.n_layers - moe_layers))
    else
      doc.first_dense_layers = dense
    end
    -- the dense layers' MLP width
    doc.ffn_hidden_size = M.count(mdl.ffn) or effn
  else
    local ffn = M.count(mdl.ffn)
    if not ffn then return nil, "model.ffn is not given" end
    doc.ffn_hidden_size = ffn
  end
  -- node-limited routing (DeepSeek-V3's n_group / topk_group, the HF config's names)
  doc.n_group = M.count(mdl.n_group) or M.count(mdl.routed_groups) or nil
  doc.topk_group = M.count(mdl.topk_group) or M.count(mdl.max_groups_per_token) or nil
  -- multi-token prediction modules (HF num_nextn_predict_layers, Megatron mtp_num_layers)
  for _, k in ipairs(MTP_KEYS) do
    doc.num_nextn_predict_layers = doc.num_nextn_predict_layers or M.count(mdl[k])
  end
  local mla = mdl.mla
  if type(mla) == "table" then
    doc.q_lora_rank = M.count(mla.q_lora_rank) or 0
    doc.kv_lora_rank = M.count(mla.kv_lora_rank) or 0
    doc.qk_nope_head_dim = M.count(mla.qk_nope_head_dim) or 0
    doc.qk_rope_head_dim = M.count(mla.qk_rope_head_dim) or 0
    doc.v_head_dim = M.count(mla.v_head_dim) or 0
    doc.num_kv_heads = heads
  end
  if doc.num_heads % doc.num_kv_heads ~= 0 then
    return nil, string.format("heads %d is not a multiple of kv_heads %d", doc.num_heads, doc.num_kv_heads)
  end
  local why = M.hybrid_doc(mdl, doc)
  if why then return nil, why end
  return doc, arch.notes
end

-- hybrid_doc(mdl, doc) -> nil, or why not: a hybrid Mamba2-Transformer case's sub-layers and
-- Mamba2 dimensions into the model spec: model.mamba {mamba_layers, attention_layers,
-- mlp_layers, moe_layers, state_dim, head_dim, num_heads, groups, conv_kernel, chunk_size}
-- (the MoE sub-layers' experts as any MoE case gives them: experts, top_k, expert_ffn) or a
-- hybrid_override_pattern (model or model.mamba); model.layers counts the sub-layers.
function M.hybrid_doc(mdl, doc)
  local mb = type(mdl.mamba) == "table" and mdl.mamba or nil
  local pat = mdl.hybrid_override_pattern or (mb and (mb.hybrid_override_pattern or mb.pattern))
  if not mb and not pat then return nil end
  mb = mb or {}
  if type(pat) == "string" then
    doc.hybrid_override_pattern = pat
  else
    doc.mamba_layers = M.count(mb.mamba_layers) or 0
    doc.attention_layers = M.count(mb.attention_layers) or 0
    doc.mlp_layers = M.count(mb.mlp_layers) or 0
    doc.moe_layers = M.count(mb.moe_layers) or 0
    if doc.moe_layers == 0 and doc.num_regular_experts then
      -- experts beside Mamba2 and attention counts: the FFN sub-layers are the MoE ones
      doc.moe_layers, doc.mlp_layers = doc.mlp_layers, 0
    end
    local sub = doc.mamba_layers + doc.attention_layers + doc.mlp_layers + doc.moe_layers
    if sub ~= doc.n_layers then
      return string.format("model.mamba: %d + %d + %d + %d sub-layers, model.layers %d", doc.mamba_layers,
        doc.attention_layers, doc.mlp_layers, doc.moe_layers, doc.n_layers)
    end
  end
  doc.mamba_state_dim = M.count(mb.state_dim or mb.d_state or mb.ssm_state_size)
  doc.mamba_head_dim = M.count(mb.head_dim)
  doc.mamba_num_heads = M.count(mb.num_heads or mb.heads)
  doc.mamba_num_groups = M.count(mb.groups or mb.n_groups or mb.num_groups)
  doc.mamba_conv_kernel = M.count(mb.conv_kernel or mb.d_conv)
  doc.mamba_chunk_size = M.count(mb.chunk_size)
  return nil
end

-- Precision --------------------------------------------------------------------------------

-- precision(s [, default_recipe]) -> {bytes, gemm_bytes, recipe, fp8, fp4, fp8_attention, note}
--   bytes       the activation width the model runs at (training: 2 under every FP8/FP4
--               recipe, the core's precision_recipe puts the linear GEMMs at FP8/FP4 with
--               their cast kernels and cached quantised weights; attention, norms, router,
--               LM head stay at 2 bytes)
--   gemm_bytes  the linear layers' operand width (1 for FP8 and FP4): serving runs every
--               kernel at this width (fth_infer has weight/KV/activation widths, no recipe)
--   recipe      the core's precision_recipe (fathom.names), "none" for BF16/FP16/FP32
-- Recipes as sources write them: delayed -> fp8_delayed; current, tensorwise, FP8-CS,
-- dynamic -> fp8_current; MXFP8/FP8-MX -> mxfp8; blockwise, block-scaled, DeepSeek-style,
-- Float8BlockScaling, DeepGEMM -> fp8_blockwise; NVFP4/MXFP4/FP4 -> nvfp4; rowwise or
-- axiswise (torchao Float8 rowwise) -> fp8_rowwise (every operand quantised along both axes).
-- A plain "FP8" takes the framework's recipe (default_recipe), else fp8_current.
function M.precision(s, default_recipe)
  local out = M.precision_width(s, default_recipe)
  -- FP8 attention (FP8 FMHA with an FP8 KV cache) where the source says so; recipes
  -- otherwise keep attention in BF16
  local p = lower(s)
  out.fp8_attention = out.fp8 and (p:find("fp8 kv") or p:find("fp8 attention") or p:find("fp8 fmha")
    or p:find("kv cache/attention") or p:find("fp8 kv cache")) ~= nil
  -- FP8 weights all-gathered by the distributed optimizer ("FP8 params", "FP8 param gather",
  -- NeMo's fp8_params, Megatron's fp8_param_gather) where the source says so
  out.fp8_param_gather = out.fp8 and not out.fp4 and p:find("fp8[%s_%-]*param") ~= nil
  return out
end

function M.precision_width(s, default_recipe)
  local R = names.key("precision_recipe")
  local p = lower(s)
  local function low(recipe, gemm, note)
    return { bytes = 2, gemm_bytes = gemm, recipe = recipe, fp8 = true, fp4 = gemm < 1, note = note }
  end
  if p:find("nvfp4") or p:find("mxfp4") or p:find("fp4") then return low(R.nvfp4, 0.5) end
  if p:find("mxfp8") or p:find("fp8%-mx") or p:find("mx%s*fp8") then return low(R.mxfp8, 1) end
  if p:find("fp8") or p:find("float8") or p:find("e4m3") then
    if p:find("delayed") then return low(R.fp8_delayed, 1) end
    if p:find("current") or p:find("tensorwise") or p:find("fp8%-cs") or p:find("dynamic") then
      return low(R.fp8_current, 1)
    end
    if p:find("rowwise") or p:find("axiswise") then return low(R.fp8_rowwise, 1) end
    if p:find("block") or p:find("deepseek") or p:find("deepgemm") then return low(R.fp8_blockwise, 1) end
    return low(R[default_recipe or R.fp8_current], 1)
  end
  if p:find("fp6") then
    -- FP6 GEMMs run at the FP4 rate on CDNA 4 and at the FP8 rate on Blackwell; the core has
    -- no FP6 precision, so the case is costed at BF16 and says so
    return { bytes = 2, gemm_bytes = 2, recipe = R.none, fp8 = false, fp4 = false,
      note = "MXFP6/FP6 GEMMs are not modelled (no FP6 rate in the core): costed at BF16" }
  end
  if p:find("fp32") and not (p:find("bf16") or p:find("fp16") or p:find("mixed")) then
    return { bytes = 4, gemm_bytes = 4, recipe = R.none, fp8 = false, fp4 = false }
  end
  return { bytes = 2, gemm_bytes = 2, recipe = R.none, fp8 = false, fp4 = false }
end

-- recompute(s, default) -> "none" | "selective" | "full" | "op"
-- `default` is the framework's (frameworks.lua). PyTorch's per-op selective checkpointing
-- ("per-op", "selective (op)", "op SAC") is "op". A bare "selective" means the framework's own
-- selective mode: torchtitan's activation_checkpoint.mode = "selective" defaults to
-- selective_ac_option = "op", so where the framework's default is "op" the word is read as
-- "op"; elsewhere it is Megatron's attention-core recomputation, "selective".
-- recompute_modules(s) -> the Megatron-Core recompute modules a recompute string names
-- ("selective (mla_up_proj, layernorm)", DeepSeek-V3's "RMSNorm and MLA up-projection"), or nil.
function M.recompute_modules(s)
  local r = lower(s):gsub("[%s%-]", "_")
  local out = {}
  if r:find("layer_*norm") or r:find("rms_*norm") then out[#out + 1] = "layernorm" end
  if r:find("mla_*up") then out[#out + 1] = "mla_up_proj" end
  if r:find("moe_*act") or r:find("expert_*activation") then out[#out + 1] = "moe_act" end
  return #out > 0 and out or nil
end

-- remat_saved(s) -> the names a MaxText remat policy in a recompute string saves (the core's
-- recompute op with recompute_saved; MaxText's decoders.get_remat_policy, save_only_these_names),
-- or nil when the string names none: minimal_with_context every projection and the attention
-- context; minimal every projection (checkpoint_dots_with_no_batch_dims: not the batched
-- attention dots); save_dot_with_context_except_mlp, save_dot_except_mlpwi, save_dot_except_mlp,
-- save_qkv_proj, save_out_proj as named; custom the names the string puts on the device
-- ("query_proj=device", or "query_proj, out_proj on device"; qkv_proj is query, key and value).
local QKV = { "query_proj", "key_proj", "value_proj" }
local REMAT_POLICIES = {
  { "minimal_with_context", { "query_proj", "key_proj", "value_proj", "context", "out_proj", "mlpwi_0", "mlpwi_1",
    "mlpwo" } },
  { "save_dot_with_context_except_mlp", { "query_proj", "key_proj", "value_proj", "context", "out_proj" } },
  { "save_dot_except_mlpwi", { "query_proj", "key_proj", "value_proj", "out_proj", "mlpwo" } },
  { "save_dot_except_mlp", { "query_proj", "key_proj", "value_proj", "out_proj" } },
  { "save_qkv_proj", QKV },
  { "save_out_proj", { "out_proj" } },
  { "minimal", { "query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwo" } },
}
function M.remat_saved(s)
  local r = lower(s)
  if r:find("offload") then return nil end -- host offloading is not this policy
  for _, p in ipairs(REMAT_POLICIES) do
    if r:find(p[1], 1, true) and not (p[1] == "minimal" and not r:find("remat")) then return p[2] end
  end
  if not (r:find("remat") and r:find("custom")) then return nil end
  local listed = r:match("([%w_,%s]+)%s+on%s+device")
  local function named(n) return r:find(n .. "%s*=%s*device") or (listed and listed:find(n, 1, true)) end
  local qkv = named("qkv_proj")
  local out = {}
  for _, n in ipairs(require("fathom.names").op_keep) do
    local in_qkv = n == QKV[1] or n == QKV[2] or n == QKV[3]
    if named(n) or (qkv and in_qkv) then out[#out + 1] = n end
  end
  return #out > 0 and out or nil
end

-- recompute_num_layers(s) -> the blocks per stage Megatron's block method re-runs
-- ("method block, 21 layers", "ACM=block ACL=21", "recompute_num_layers: 21"), or nil
-- (every block: the uniform method re-runs them all, in groups).
function M.recompute_num_layers(s)
  local r = lower(s)
  if not r:find("block") then return nil end
  local n = r:match("acl%s*=%s*(%d+)") or r:match("recompute_num_layers[%s:=]+(%d+)")
    or r:match("num_layers[%s:=]+(%d+)") or r:match("(%d+)%s*layers")
  n = tonumber(n)
  return n and n >= 1 and math.tointeger(n) or nil
end

-- activation_offload_layers(tr) -> the blocks per stage whose activations Megatron-Core offloads
-- to host memory (cpu_offloading_num_layers), from the training section: a count field
-- (cpu_offloading_num_layers, activation_offload_layers) or a recompute / kernels string
-- ("activation CPU offloading of 40 layers", "cpu_offloading_num_layers: 20"); nil when none.
function M.activation_offload_layers(tr)
  local n = M.count(tr.cpu_offloading_num_layers) or M.count(tr.activation_offload_layers)
  if type(n) ~= "number" then n = nil end
  if not n then
    for _, key in ipairs({ "recompute", "kernels" }) do
      local r = lower(tr[key])
      n = n or tonumber(r:match("cpu_offloading_num_layers[%s:=]+(%d+)")
        or r:match("offload%a*%s+of%s+(%d+)%s+layers") or r:match("offload%a*%s+(%d+)%s+layers"))
    end
  end
  return n and n >= 1 and math.tointeger(n) or nil
end

-- LoRA target module names (HF PEFT, NeMo, Megatron) by the part of the block they adapt.
local lora_attention = { attention = true, qkv = true, linear_qkv = true, linear_proj = true, q_proj = true,
  k_proj = true, v_proj = true, o_proj = true, query_key_value = true, wq = true, wk = true, wv = true,
  wo = true, self_attn = true, attn = true, qkv_proj = true }
local lora_mlp = { mlp = true, linear_fc1 = true, linear_fc2 = true, gate_proj = true, up_proj = true,
  down_proj = true, w1 = true, w2 = true, w3 = true, fc1 = true, fc2 = true, gate_up_proj = true }

-- mlperf(case) -> whether the case is an MLPerf Training submission: its source, framework or
-- benchmark names an MLPerf round
function M.mlperf(case)
  local tr = case.training or {}
  local s = lower(case.source) .. " " .. lower(tr.framework) .. " " .. lower(tr.benchmark)
    .. " " .. lower(case.benchmark)
  return s:find("mlperf") ~= nil
end

-- lora_targets(case) -> "all_linear", "attention" or "mlp" from training.lora_targets,
-- training.{lora,peft}.target_modules (a list or a string) or "target_modules [...]" in
-- the training strings and notes; nil when not stated.
function M.lora_targets(case)
  local tr = case.training or {}
  local list = tr.lora_targets
  for _, k in ipairs({ "lora", "peft" }) do
    if list == nil and type(tr[k]) == "table" then list = tr[k].target_modules end
  end
  local text
  if type(list) == "table" then
    local parts = {}
    for _, v in ipairs(list) do parts[#parts + 1] = tostring(v) end
    text = table.concat(parts, " ")
  elseif list ~= nil then
    text = tostring(list)
  else
    local all = {}
    for _, k in ipairs({ "task", "method", "peft", "lora", "finetuning", "notes" }) do
      if type(tr[k]) == "string" then all[#all + 1] = tr[k] end
    end
    if type(case.notes) == "string" then all[#all + 1] = case.notes end
    text = table.concat(all, " "):lower():match("target_modules%s*[:=]?%s*(%b[])")
    if not text then return nil end
  end
  text = text:lower()
  if text:find("all[%-_]linear") or text:find("all_linear") then return "all_linear" end
  local attn, mlp = false, false
  for word in text:gmatch("[%w_]+") do
    if lora_attention[word] then attn = true end
    if lora_mlp[word] then mlp = true end
  end
  if attn and mlp then return "all_linear" end
  if attn then return "attention" end
  if mlp then return "mlp" end
  return nil
end

-- The word "full" counts only as a word: "full_iter" (a CUDA-graph or FP8 setting named in
-- the detail) is not full recomputation. A leading "none"/"off"/"no" decides before the
-- parenthesised detail is read: "none (recompute_modules [] after ..._full_iter_...)" is none.
local function full_word(r) return r:find("%f[%w_]full%f[^%w_]") ~= nil end

local function leading_none(r)
  return r:find("^%s*none%f[^%w_]") or r:find("^%s*off%f[^%w_]") or r:find("^%s*no%f[^%w_]")
    or r:find("^%s*disabled%f[^%w_]")
end

local function recompute_unstated(r)
  return r:find("not stated") or r:find("default") or r:find("not set") or r == ""
end

function M.recompute(s, default)
  local r = lower(s)
  if recompute_unstated(r) then return default or "none" end
  if leading_none(r) then return "none" end
  if r:find("per%-op") or r:find("%(op%)") or r:find("op sac") then return "op" end
  if r:find("selective") or r:find("remat_policy") or r:find("custom") then
    return default == "op" and "op" or "selective"
  end
  if full_word(r) then return "full" end
  if r:find("null") or r:find("false") then return "none" end
  if r:find("checkpoint") or r:find("%f[%w]on%f[^%w]") then return "full" end
  return default or "none"
end

-- recompute_assumed(s) -> whether a recompute string leaves the recomputation to the recipe's
-- default without stating it ("recipe default (not stated)", "not set in the workload base
-- config"). validate then takes the least recomputation that fits (M.RECOMPUTE_ESCALATION):
-- the run was measured, so its recipe made it fit.
function M.recompute_assumed(s)
  return recompute_unstated(lower(s)) and true or false
end

-- The recomputation a recipe steps up to when its run would not fit, least first: from none to
-- Megatron-Core's selective (the attention core: NeMo 25.04's DeepSeek-V3 recipes on B200/
-- GB200 recompute core_attn). No further: full recomputation costs a third of the step, a
-- case that ran it would say so, and where selective does not fit the memory model is the
-- question (such rows stay "does not fit", counted).
M.RECOMPUTE_ESCALATION = { none = { "selective" } }

-- Parallelism ------------------------------------------------------------------------------

local function gcd(a, b)
  while b ~= 0 do a, b = b, a % b end
  return a
end

-- split(dims, capacity) -> inner, outer parts of each {tag, n} (innermost first) when the
-- innermost dimensions fill a scale-up domain of `capacity`, and the capacity left.
local function split(dims, capacity)
  local out, rem = {}, capacity
  for i, d in ipairs(dims) do
    local inner = gcd(d[2], rem)
    rem = rem // inner
    out[i] = { tag = d[1], inner = inner, outer = d[2] // inner }
  end
  return out, rem
end

-- layout(p, domain) -> physical dims, logical dims, or nil, reason. p: tp, cp, dp, pp and
-- for MoE etp, ep, dp_moe. Megatron's rank order (tp-cp-ep-dp-pp): the innermost
-- dimensions fill the scale-up domain, pipeline stages are outermost.
function M.layout(p, gpus, domain)
  local su = math.min(domain, gpus)
  local attn = { { "TP_Attn", p.tp }, { "CP", p.cp }, { "DP_Attn", p.dp } }
  local a, arem = split(attn, su)
  local pp_in = gcd(p.pp, arem)
  if arem // pp_in ~= 1 then
    return nil, string.format("TP x CP x DP x PP does not fill a scale-up domain of %d GPUs", su)
  end
  local m
  if p.ep then
    local moe = { { "TP_MoE", p.etp }, { "EP", p.ep }, { "DP_MoE", p.dp_moe } }
    local mrem
    m, mrem = split(moe, su)
    if mrem ~= arem then
      return nil, "the expert view (ETP x EP x DP) and the attention view place PP differently"
    end
  end
  local phys = { { name = "scale_up", interconnect_name = "scale_up", topology_type = "switched", size = su } }
  if gpus > su then
    phys[2] = { name = "scale_out", interconnect_name = "scale_out", topology_type = "two_tier",
      size = gpus // su }
  end
  local logical = {}
  local function add(tag, dim, n)
    if n > 1 then
      logical[#logical + 1] = { logical_tag = tag, maps_to_physical_dimension_name = dim, size = n }
    end
  end
  local views = { a, m or {} }
  for _, parts in ipairs(views) do
    for _, d in ipairs(parts) do add(d.tag == "EP" and "EP_SU" or d.tag, "scale_up", d.inner) end
  end
  add("PP", "scale_up", pp_in)
  if phys[2] then
    for _, parts in ipairs(views) do
      for _, d in ipairs(parts) do add(d.tag == "EP" and "EP_SO" or d.tag, "scale_out", d.outer) end
    end
    add("PP", "scale_out", p.pp // pp_in)
  end
  if #logical == 0 then
    logical[1] = { logical_tag = "DP_Attn", maps_to_physical_dimension_name = "scale_up", size = 1 }
  end
  return phys, logical
end

-- scale_out(sys) -> {bits_per_s = the scale-out bandwidth per GPU, roce = true for an Ethernet
-- fabric, false for InfiniBand, nil where the string does not say} as
-- system.inter_node_interconnect states it, or nil (not stated, or no count and rate
-- to read). Read as vendors write it: "8x 400 Gb/s InfiniBand compute links per node", "1600
-- Gb/s RoCE per node", "RDMA backend network, 400 Gb/s per GPU", "4x ConnectX-8 IB XDR 800 Gb/s
-- per node (4-GPU tray)", "BF3 200Gbps for NS and 2xBF3 400Gbps for EW" (east-west is the
-- compute fabric). Storage, management, north-south and PCIe figures are not the compute
-- fabric; a "not stated (...)" string gives what its parenthesis infers, which the node
-- already is. Gb/s are bits; GB/s (bytes) are PCIe figures here and are not read.
function M.scale_out(sys)
  local s = tostring(sys.inter_node_interconnect or "")
  local low = s:lower()
  if low == "" or low:find("^%s*not stated") or low:find("^%s*single node") or low:find("^%s*not used")
    or low:find("^%s*none") then
    return nil
  end
  local gpn = M.count(sys.gpus_per_node) or 8
  -- the compute fabric's segment: "Compute: ...", "... for EW", else the whole string less
  -- the segments naming storage, management, north-south or PCIe
  local segs = {}
  for seg in (s:gsub("%s+and%s+", ";") .. ","):gmatch("([^,;]*)[,;]") do segs[#segs + 1] = seg end
  local pick
  for _, seg in ipairs(segs) do
    local l = seg:lower()
    if l:find("compute") or l:find("%f[%w]ew%f[%W]") or l:find("east") then pick = seg break end
  end
  local keep = {}
  for _, seg in ipairs(segs) do
    local l = seg:lower()
    if not (l:find("storage") or l:find("management") or l:find("mgmt") or l:find("%f[%w]ns%f[%W]")
      or l:find("north") or l:find("pcie")) then
      keep[#keep + 1] = seg
    end
  end
  local fabric = table.concat(keep, ",")
  pick = pick or fabric
  fabric = fabric:lower()
  -- a rate in bits: "400 Gb/s", "400Gbps", "400 Gbit/s", "100GbE"
  local at, r = pick:match("()(%d+%.?%d*)%s*Gb[/pi%s]")
  if not at then at, r = pick:match("()(%d+%.?%d*)%s*GbE") end
  local rate = tonumber(r)
  if not rate or rate <= 0 then return nil end
  local before, count = pick:sub(1, at - 1), nil
  for n in before:gmatch("(%d+)%s*[xX]") do count = tonumber(n) end -- the last "N x" before the rate
  local rest = pick:sub(at):lower()
  local per_gpu
  if rest:find("^[%d%.]+%s*gb%S*%s*per gpu") then
    per_gpu = rate -- "400 Gb/s per GPU"
  elseif count then
    per_gpu = count * rate / gpn -- "8x 400 Gb/s ... per node", "8x 400 Gb/s (one per GPU)"
  elseif rest:find("per node") then
    per_gpu = rate / gpn
  elseif rest:find("per gpu") then
    per_gpu = rate -- "400 Gb/s (ConnectX-7) per GPU"
  else
    return nil -- a rate without a count or a unit of what it is per: not read
  end
  -- a fabric per GPU between 1 Gb/s and 100 Tb/s, else the string is not read as one
  if not (per_gpu >= 1 and per_gpu <= 1e5) then return nil end
  -- the fabric's kind where the case says it (nil: not said, the node's stands)
  local low_pick = pick:lower()
  local roce
  if low_pick:find("infiniband") or low_pick:find("%f[%w]ib%f[%W]") then
    roce = false
  elseif fabric:find("roce") or fabric:find("ethernet") then
    roce = true
  end
  return { bits_per_s = per_gpu * 1e9, roce = roce }
end

-- scale_up_domain(sys, gpu_row) -> GPUs that share one NVLink/Infinity Fabric domain.
-- GB200/GB300 NVL72: the domain is the 72-GPU rack, not the 4 GPUs of a tray.
function M.scale_up_domain(sys, g)
  local n = M.count(sys.scale_up_domain or sys.nvlink_domain or sys.scale_up_domain_size)
  if n then return n end
  local s = lower(sys.intra_node_interconnect) .. " " .. lower(sys.cluster)
  n = tonumber(s:match("nvl%s*(%d+)")) or tonumber(s:match("domain of (%d+)"))
  if n then return n end
  if g and g.scale_up_domain then return g.scale_up_domain end
  return M.count(sys.gpus_per_node) or 8
end

-- Megatron-Core's pipeline_model_parallel_layout: a string ("Et*4|(tttt|)*14tmL": stages
-- split by "|", E the embedding, t a decoder layer, m an MTP layer, L the loss, "*N" repeating
-- the symbol or parenthesised group before it; spaces ignored) or a list of stages, each a
-- list of "embedding", "decoder", "mtp", "loss". expand_layout(s) -> the string with repeats
-- expanded, or nil and why (positions in the layout without its spaces).
local LAYOUT_MAX = 1000000 -- symbols a layout may expand to (a pipeline has at most thousands)
local function expand_layout(text)
  local s = text:gsub("%s+", "")
  local i, n = 1, #s
  local function group()
    local out, len = {}, 0
    while i <= n do
      local c = s:sub(i, i)
      if c == ")" then return table.concat(out) end
      local piece, why
      if c == "(" then
        i = i + 1
        piece, why = group()
        if not piece then return nil, why end
        if s:sub(i, i) ~= ")" then return nil, "an unclosed '('" end
        i = i + 1
      elseif c:match("[EtmL|,]") then
        piece, i = c, i + 1
      else
        return nil, string.format("'%s' at %d is not one of E t m L | ( ) *N", c, i)
      end
      local reps = s:match("^%*(%d+)", i)
      if reps then
        i = i + 1 + #reps
        local r = tonumber(reps)
        if r * #piece > LAYOUT_MAX then
          return nil, string.format("'*%s' expands the layout past %d symbols", reps, LAYOUT_MAX)
        end
        piece = piece:rep(math.tointeger(r))
      end
      len = len + #piece
      if len > LAYOUT_MAX then return nil, string.format("the layout expands past %d symbols", LAYOUT_MAX) end
      out[#out + 1] = piece
    end
    return table.concat(out)
  end
  local out, why = group()
  if not out then return nil, why end
  if i <= n then return nil, string.format("an unmatched ')' at %d", i) end
  return out
end

-- layout_split(layout, pp, vpp, layers) -> the decoder layers of the first and of the last
-- GPU (virtual stage k runs on GPU k mod PP) and the virtual stages (vpp, or the layout's
-- stages / PP when vpp is nil), or nil and why.
function M.layout_split(layout, pp, vpp, layers)
  local stages = {}
  if type(layout) == "table" then
    for _, st in ipairs(layout) do
      local t = 0
      for _, name in ipairs(type(st) == "table" and st or { st }) do
        if tostring(name):lower() == "decoder" then t = t + 1 end
      end
      stages[#stages + 1] = t
    end
  else
    local text, why = expand_layout(tostring(layout))
    if not text then return nil, why end
    for st in (text:gsub(",", "|") .. "|"):gmatch("([^|]*)|") do
      local _, t = st:gsub("t", "")
      stages[#stages + 1] = t
    end
  end
  -- the virtual stages, where the case does not state them, are the layout's (as Megatron-Core
  -- infers them from it)
  if vpp == nil and #stages % pp == 0 and #stages > 0 then vpp = #stages // pp end
  local want = pp * (vpp or 1)
  if #stages ~= want then
    return nil, string.format("%d stages, but PP x virtual stages = %d", #stages, want)
  end
  local first, last, total = 0, 0, 0
  for k, t in ipairs(stages) do
    total = total + t
    if (k - 1) % pp == 0 then first = first + t end
    if (k - 1) % pp == pp - 1 then last = last + t end
  end
  if layers and total ~= layers then
    return nil, string.format("%d decoder layers, but the model has %d", total, layers)
  end
  if first < 1 or last < 1 then return nil, "the first or the last GPU holds no decoder layer" end
  return first, last, vpp
end

-- parallelism(case) -> normalised degrees, or nil, reason
function M.parallelism(case, fw)
  local par, sys = case.parallelism or {}, case.system or {}
  local gpus = M.count(sys.num_gpus)
  if not gpus and M.count(sys.num_nodes) then gpus = M.count(sys.num_nodes) * (M.count(sys.gpus_per_node) or 8) end
  if not gpus then return nil, "system.num_gpus is not given" end
  local p = {}
  p.tp = M.count(par.tp) or 1
  p.pp = M.count(par.pp) or 1
  p.cp = M.count(par.cp) or 1
  p.ep = M.count(par.ep)
  if p.ep == 1 then p.ep = nil end
  local dp = M.count(par.dp)
  local rest = p.tp * p.pp * p.cp
  if gpus % rest ~= 0 then
    return nil, string.format("tp x pp x cp = %d x %d x %d does not divide %d GPUs", p.tp, p.pp, p.cp, gpus)
  end
  if dp and dp * rest ~= gpus then
    -- some sources count DP including CP (torchtitan's dp_shard x cp): accept that reading too
    if dp * p.tp * p.pp == gpus and p.cp > 1 and dp % p.cp == 0 then
      dp = dp // p.cp
    else
      return nil, string.format("tp x pp x cp x dp = %d x %d x %d x %d is not %d GPUs", p.tp, p.pp, p.cp,
        dp, gpus)
    end
  end
  p.dp = dp or gpus // rest
  if p.ep then
    p.etp = M.count(par.expert_tp) or (fw.expert_tp_is_tp and p.tp or 1)
    local moe = p.etp * p.ep * p.pp
    if gpus % moe ~= 0 then
      return nil, string.format("expert tp x ep x pp = %d x %d x %d does not divide %d GPUs", p.etp, p.ep,
        p.pp, gpus)
    end
    p.dp_moe = gpus // moe
  end
  p.sp = M.flag(par.sp) or (p.tp > 1 and fw.sequence_parallel == true and par.sp == nil)
  -- Megatron-Core's cp_comm_type as the run's config sets it (its default: p2p, the ring)
  if par.cp_comm_type ~= nil and p.cp > 1 then
    local c = lower(par.cp_comm_type)
    p.cp_comm = names.canonical("cp_comm", c)
    if not p.cp_comm then
      return nil, string.format("parallelism.cp_comm_type '%s' is not modelled (choices: %s)",
        tostring(par.cp_comm_type), table.concat(names.cp_comm, ", "))
    end
  end
  p.vpp = M.count(par.vpp) or 1
  local lpvs = M.count(par.layers_per_virtual_stage)
  local layers = M.count((case.model or {}).layers)
  if not M.count(par.vpp) and lpvs and layers and p.pp > 1 and layers % (p.pp * lpvs) == 0 then
    p.vpp = layers // (p.pp * lpvs)
  end
  if p.pp == 1 then p.vpp = 1 end
  -- Megatron-Core's uneven split: fewer layers beside the embedding and the LM head, as
  -- counts or as a pipeline layout; else, where the chunks do not divide the layers, the
  -- framework's way out (frameworks.megatron_split)
  p.first_layers = p.pp > 1 and M.count(par.num_layers_in_first_pipeline_stage) or nil
  p.last_layers = p.pp > 1 and M.count(par.num_layers_in_last_pipeline_stage) or nil
  local layout = par.pipeline_model_parallel_layout or par.pipeline_layout
  if p.pp > 1 and layout ~= nil and not (p.first_layers or p.last_layers) then
    local stated = M.count(par.vpp) or (p.vpp > 1 and p.vpp or nil)
    local first, last, vpp = M.layout_split(layout, p.pp, stated, layers)
    if not first then return nil, "parallelism.pipeline_model_parallel_layout: " .. last end
    p.first_layers, p.last_layers, p.vpp = first, last, vpp
  elseif p.pp > 1 and layers and fw.megatron_split and not (p.first_layers or p.last_layers) then
    p.first_layers, p.last_layers = require("fathom.frameworks").megatron_split(layers, p.pp, p.vpp)
  end
  -- sharded data parallelism: fsdp (a degree, true or a strategy name), zero_stage, or
  -- the framework's distributed optimizer
  local fsdp = par.fsdp
  local zero = M.count(par.zero_stage)
  p.dp_variant = fw.dp_variant or "DDP"
  if type(fsdp) == "string" and not tonumber(fsdp) then
    local f = fsdp:upper()
    if f:find("SHARD_GRAD_OP") then p.dp_variant = "ZERO2"
    elseif f:find("NO_SHARD") then p.dp_variant = "DDP"
    else p.dp_variant = "ZERO3" end
  elseif fsdp == true or (M.count(fsdp) or 0) > 1 then
    p.dp_variant = "ZERO3"
  elseif zero then
    p.dp_variant = ({ "ZERO1", "ZERO2", "ZERO3" })[zero] or p.dp_variant
  elseif tonumber(par.zero_stage) == 0 then
    p.dp_variant = "DDP"
  elseif (fsdp == false or tonumber(fsdp) == 0) and p.dp_variant == "ZERO3" then
    p.dp_variant = "DDP"   -- FSDP stated off in a framework that shards by default
  end
  local framework = lower((case.training or {}).framework)
  if zero == nil and fsdp == nil and framework:find("zero%-3") then p.dp_variant = "ZERO3" end
  -- batch: global = micro x dp x grad_accum
  local mb, gb, ga = M.count(par.micro_batch), M.count(par.global_batch), M.count(par.grad_accum)
  if not mb and gb and ga then mb = gb // (p.dp * ga) end
  if not mb and par.local_batch and not ga then mb = M.count(par.local_batch) end
  if not gb and mb and ga then gb = mb * p.dp * ga end
  if not gb and mb then gb = mb * p.dp end
  if not mb and gb then
    if p.pp == 1 then mb = math.max(1, gb // p.dp)
    elseif fw.pp_micro_batch then mb = fw.pp_micro_batch   -- the framework's pipeline default
    else return nil, "parallelism.micro_batch is not given (pipeline micro-batch count unknown)" end
  end
  if not mb or not gb then return nil, "parallelism.micro_batch and global_batch are not given" end
  if gb % (mb * p.dp) ~= 0 then
    return nil, string.format("global_batch %d is not a multiple of micro_batch %d x dp %d", gb, mb, p.dp)
  end
  p.micro_batch, p.global_batch = mb, gb
  p.seq_len = M.count(par.seq_len)
  if not p.seq_len then return nil, "parallelism.seq_len is not given" end
  p.gpus = gpus
  local sched = lower(par.pp_schedule)
  if sched:find("interleav") and p.vpp == 1 then p.vpp_unknown = true end
  if sched:find("gpipe") then p.pp_variant = "GPIPE" end
  if sched:find("dualpipe") then p.pp_variant = "DUALPIPE" end
  return p
end

-- Training ---------------------------------------------------------------------------------

-- microbatches_per_run(case, p, fw) -> the micro-batches of one run of the pipeline schedule
-- under a framework that steps PyTorch's pipeline schedules once per local batch
-- (fw.fsdp_gather_per_run) with PP > 1: the case's local_batch (per DP rank) over the
-- micro-batch, else every micro-batch of the step (one run).
function M.microbatches_per_run(case, p, fw)
  if not fw.fsdp_gather_per_run or (p.pp or 1) <= 1 then return nil end
  local step = p.global_batch // (p.micro_batch * p.dp)
  local lbs = M.count((case.parallelism or {}).local_batch)
  local run = lbs and lbs % p.micro_batch == 0 and lbs // p.micro_batch or step
  return math.max(1, math.min(run, step))
end

-- microbatches_per_gather(case, p, fw) -> ZeRO-3's micro-batches per weight gather, or nil (one
-- each): FSDP2 inside such a schedule gathers once a run (microbatches_per_run).
function M.microbatches_per_gather(case, p, fw)
  if p.dp_variant ~= "ZERO3" then return nil end
  local run = M.microbatches_per_run(case, p, fw)
  return run and run > 1 and run or nil
end

-- training_docs(case, lib_doc) -> docs {physical, logical, model, workload, node, gpu, fw,
-- precision, notes}, or nil, reason.
function M.training_docs(case)
  local sys, mdl, tr = case.system or {}, case.model or {}, case.training or {}
  local g = M.gpu(sys.gpu, sys.gpu_memory_gb)
  if not g then return nil, "no hardware library node matches GPU '" .. tostring(sys.gpu) .. "'" end
  local fw = frameworks.lookup(tr.framework)
  local p, why = M.parallelism(case, fw)
  if not p then return nil, why end
  -- a pipeline schedule the framework string names (HAI-LLM's "DualPipe"), else the
  -- framework's own, where the case names none
  if not p.pp_variant and p.pp > 1 and p.vpp == 1 then
    local sched = lower(tr.framework):find("dualpipe") and "DUALPIPE" or fw.pp_schedule
    -- DualPipe runs an even number of stages on an even count of at least twice as many
    -- micro-batches (DeepSeek-AI 2024 Sec. 3.2.1); elsewhere the framework runs 1F1B
    local micro = p.global_batch // (p.micro_batch * p.dp)
    if sched == "DUALPIPE" and (p.pp % 2 ~= 0 or micro % 2 ~= 0 or micro < 2 * p.pp) then sched = "1F1B" end
    if sched ~= "1F1B" then p.pp_variant = sched end
  end
  if p.vpp_unknown then return nil, "interleaved pipeline schedule without the number of virtual stages" end
  local model, notes = M.model_doc(mdl, p.seq_len)
  if not model then return nil, notes end
  notes = notes or {}
  -- A published architecture's group-limited routing where the case leaves it out. Training
  -- only for now: serving cases (validate.inference_docs) get it once their missing serving
  -- costs land (issue 18); today it takes SGLang's DeepSeek-V3 prefill on H100 from +23% to
  -- +57% (predicted too fast already) and, through the shared Hopper calibration, the DGX
  -- Cloud recipes' leave-one-source-out median from 5% to 22%.
  if not model.n_group and model.num_regular_experts then
    local known = M.published_routing(mdl, model)
    if known then
      model.n_group, model.topk_group = known.n_group, known.topk_group
      notes[#notes + 1] = known.note
    end
  end
  local task = lower(tr.task) .. " " .. lower(tr.method) .. " " .. lower(tr.peft) .. " " .. lower(tr.finetuning)
    .. " " .. lower(tr.objective)
  local lora_rank
  -- LoRA when the training strings say so, or a rank is stated under training (lora_rank,
  -- lora.{rank,r,dim}, peft.{...}), or the model or framework is named as a LoRA run
  local named = lower((case.model or {}).name) .. " " .. lower(tr.framework)
  local lora_targets
  if task:find("lora") or task:find("adapter") or task:find("peft") or M.flag(tr.lora)
    or tonumber(tr.lora_rank) or type(tr.lora) == "table" or type(tr.peft) == "table"
    or named:find("lora") then
    lora_rank = M.lora_rank(case)
    if not lora_rank then
      lora_rank = 16
      notes[#notes + 1] = "LoRA rank not stated: 16 assumed (PEFT recipes' common rank)"
    end
    lora_targets = M.lora_targets(case)
    if not lora_targets and M.mlperf(case) then
      -- the MLPerf Training benchmark fixes the adapters for every submission (closed division):
      -- its reference (mlcommons/training llama2_70b_lora, run_llama_70B_scrolls_r16.sh) sets
      -- --lora_target_modules "qkv_proj,o_proj", rank 16
      lora_targets = "attention"
      notes[#notes + 1] = "LoRA target modules not stated: the MLPerf benchmark's, the attention (qkv_proj, o_proj)"
    elseif not lora_targets then
      lora_targets = "all_linear"
      notes[#notes + 1] = "LoRA target modules not stated: every linear assumed (PEFT all-linear)"
    end
  end
  -- A published architecture's multi-token-prediction layers where the framework's pretraining
  -- recipes train them and the case names none (fine-tuning recipes do not: NeMo's DeepSeek-V3
  -- finetune_recipe builds the model without them)
  local pretraining = not lora_rank and not task:find("fine") and not task:find("sft")
  if not M.mtp_stated(mdl) and fw.trains_published_mtp and pretraining then
    local known = model.num_regular_experts and M.published_routing(mdl, model)
    if known and known.mtp then
      model.num_nextn_predict_layers = known.mtp
      notes[#notes + 1] = string.format("%d multi-token-prediction layer(s) from %s, as %s's pretraining recipes "
        .. "train them", known.mtp, known.source, fw.name)
    end
  end
  if p.ep and (model.num_regular_experts or 0) <= 1 then
    p.ep, p.etp, p.dp_moe = nil, nil, nil
    notes[#notes + 1] = "ep given for a dense model: ignored"
  end
  if model.num_regular_experts and model.num_regular_experts > 1 and not p.ep then
    -- experts replicated: EP 1 in the expert view
    p.ep, p.etp, p.dp_moe = 1, p.tp, p.gpus // (p.tp * p.pp)
  end
  if p.ep and model.num_regular_experts % p.ep ~= 0 then
    return nil, string.format("%d experts do not divide over EP %d", model.num_regular_experts, p.ep)
  end
  if model.n_layers < p.pp then return nil, "fewer layers than pipeline stages" end
  local domain = M.scale_up_domain(sys, g)
  local gpn = M.count(sys.gpus_per_node) or 8
  -- the largest scale-up domain (<= the fabric's, a multiple of the node, dividing the job)
  -- in which the rank order places whole groups
  local phys, logical
  local d = math.min(domain, p.gpus)
  while d >= 1 do
    if p.gpus % d == 0 and (d % gpn == 0 or d == p.gpus or gpn % d == 0) then
      phys, logical = M.layout({ tp = p.tp, cp = p.cp, dp = p.dp, pp = p.pp, etp = p.ep and p.etp,
        ep = p.ep, dp_moe = p.dp_moe }, p.gpus, d)
      if phys then break end
    end
    d = d - 1
  end
  if not phys then return nil, "no placement of TP/CP/DP/PP fits the scale-up domains" end
  if p.tp > phys[1].size then return nil, "TP spans more than one scale-up domain" end
  local prec = M.precision(tr.precision, fw.fp8_recipe)
  if prec.note then notes[#notes + 1] = prec.note end
  -- FP8 attention as the precision string or training.attention_fp8 states it, under a recipe
  local attention_fp8 = prec.recipe ~= nil and prec.recipe ~= "none"
    and (prec.fp8_attention or M.flag(tr.attention_fp8))
  -- first and last layers kept in BF16 under a recipe: as the case states it
  -- (training.first_last_layers_bf16), else as the model family's configs set it
  local edges = M.arch(mdl).bf16_edge_layers
  if tr.first_last_layers_bf16 ~= nil then edges = M.flag(tr.first_last_layers_bf16) and 1 or nil end
  if not (prec.recipe ~= nil and prec.recipe ~= "none") then edges = nil end
  local fsdp = M.count((case.parallelism or {}).fsdp)
  if fsdp and fsdp > 1 and fsdp < p.dp then
    notes[#notes + 1] = string.format("hybrid sharding (FSDP %d within DP %d) costed as ZeRO-3 over all of DP",
      fsdp, p.dp)
  end
  local recompute = M.recompute(tr.recompute, fw.recompute)
  -- a MaxText remat policy: per-op recomputation of what it does not save
  local remat = M.remat_saved(tr.recompute)
  if remat then recompute = "op" end
  local modules = M.recompute_modules(tr.recompute)
  -- modules named: Megatron's granularity selective, unless the string says full
  if modules and recompute ~= "op" and not full_word(lower(tr.recompute)) then recompute = "selective" end
  if modules and recompute ~= "selective" then
    notes[#notes + 1] = "recompute modules on top of " .. recompute .. " recomputation: ignored"
    modules = nil
  end
  local fused, unfused_note = frameworks.fused_attention(fw, g.generation, model)
  if unfused_note then notes[#notes + 1] = unfused_note end
  local workload = {
    global_batch_size = p.global_batch, micro_batch_size = p.micro_batch, seq_length = p.seq_len,
    float_size_bytes = prec.bytes, full_precision_param_float_size = 4, precision_recipe = prec.recipe,
    gradient_float_size = fw.grad_bytes, recompute = recompute, recompute_modules = modules,
    recompute_saved = remat,
    flash_attention = fused,
    cp_comm = p.cp_comm,
    eager_elementwise = fw.eager_elementwise,
    -- the host's time per operator, where CUDA graphs do not replay them: the scope as the
    -- kernels string states it, else a statement in the notes, else none
    host_op_sec = fw.host_op_sec,
    cuda_graph_scope = require("fathom.frameworks").cuda_graph_scope(tr.kernels)
      or require("fathom.frameworks").cuda_graph_scope(case.notes) or nil,
    cast_kernels = fw.cast_kernels,
    lora_rank = lora_rank,
    lora_targets = lora_targets,
    -- "FP8 activation input store": the MLP activation's input cached in FP8
    attention_fp8 = attention_fp8,
    num_layers_at_start_in_bf16 = edges, num_layers_at_end_in_bf16 = edges,
    activation_input_fp8 = prec.recipe ~= nil and (lower(tr.precision):find("activation input store") ~= nil
      or lower(tr.precision):find("fp8 activation input") ~= nil),
    recompute_num_layers = recompute == "full" and M.recompute_num_layers(tr.recompute) or nil,
    activation_offload_layers = M.activation_offload_layers(tr),
    -- async TP as the case states it (torchtitan's async_tp), else the framework's convention
    tp_comm_overlap = (case.parallelism or {}).async_tp == nil and fw.tp_comm_overlap
      or M.flag((case.parallelism or {}).async_tp),
    -- whether that overlap covers the backward's reduce-scatters (not PyTorch's async TP)
    tp_overlap_backward_rs = fw.tp_overlap_backward_rs,
    -- EP overlap as the framework runs it, or as the case's training notes say
    ep_comm_overlap = fw.ep_comm_overlap or require("fathom.frameworks").ep_overlap(tr.recompute)
      or require("fathom.frameworks").ep_overlap(tr.kernels) or false,
    -- an A2A overlap or DualPipe the strings name pairs a forward and a backward
    ep_overlap_pairs = fw.ep_overlap_pairs or require("fathom.frameworks").ep_overlap_pairs(tr.recompute)
      or require("fathom.frameworks").ep_overlap_pairs(tr.kernels) or p.pp_variant == "DUALPIPE" or false,
    -- FP8 dispatch (1x128 scales) with a BF16 combine where the framework sends it so under an
    -- FP8 recipe, or the kernels string says so
    moe_dispatch_float_size_bytes = (prec.gemm_bytes == 1 and (fw.fp8_dispatch
      or lower(tr.kernels):find("fp8[%s%-_]*dispatch") ~= nil)) and 1 or nil,
    ep_dispatch_per_node = fw.ep_dispatch_per_node or require("fathom.frameworks").ep_per_node(tr.kernels)
      or false,
    -- the experts as one fused grouped kernel (no FP8/FP4 recipe's cost per expert)
    grouped_expert_kernel = fw.grouped_expert_kernel or require("fathom.frameworks").grouped_expert_kernel(tr.kernels)
      or false,
    -- the SMs a DeepEP/HybridEP dispatcher holds while it runs (what an overlap slows)
    ep_comm_compute_units = require("fathom.frameworks").ep_comm_units(tr.kernels, fw),
    -- attention with sinks as the framework's attention kernel runs it
    attention_sink_rate_share = fw.attention_sink_rate_share,
    sequence_parallel = p.sp and p.tp > 1,
    -- FP8 parameters where the source says so, else where the framework's recipe holds them
    fp8_param_gather = prec.fp8_param_gather or require("fathom.frameworks").holds_fp8_params(fw, prec.recipe),
    -- the SP all-gathers quantised where the framework casts before gathering
    tp_gather_quantized = require("fathom.frameworks").gathers_quantized(fw, prec.recipe),
    dp_spec = { variant = p.dp_variant, zero3_microbatches_per_gather = M.microbatches_per_gather(case, p, fw) },
    pp_spec = { variant = p.pp_variant or (p.vpp > 1 and "INTERLEAVED" or "1F1B"),
      virtual_stages = p.vpp > 1 and p.vpp or nil,
      num_layers_in_first_pipeline_stage = p.first_layers, num_layers_in_last_pipeline_stage = p.last_layers,
      microbatches_per_run = M.microbatches_per_run(case, p, fw) },
    comp_comm_efficiency = fw.comp_comm_efficiency,
    comp_mem_efficiency = fw.comp_mem_efficiency,
    comm_mem_efficiency = fw.comm_mem_efficiency,
    kernel_launch_sec = fw.kernel_launch_sec, kernel_model = "tiled",
  }
  -- Uneven pipeline splits (126 layers over 16 stages, or 8 x 8 chunks) are the core's: it
  -- costs the busiest stage (layers rounded up per stage and chunk) and counts the model's
  -- FLOPs for the layers there are.
  local layer_scale = 1
  return {
    physical = { name = case.id, node_definition_ref = g.node, dimensions = phys },
    logical = { name = case.id, dimensions = logical },
    model = model, workload = workload, gpu = g, fw = fw, precision = prec, parallel = p, notes = notes,
    layer_scale = layer_scale, power_limit_watts = M.power_limit(sys), scale_out = M.scale_out(sys),
    recompute_assumed = M.recompute_assumed(tr.recompute) and not modules and not remat,
  }
end

return M
