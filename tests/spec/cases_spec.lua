-- The case reader (fathom.cases) and the framework table (fathom.frameworks): every field of
-- the validation schema read as its source means it.
local cases = require("fathom.cases")
local frameworks = require("fathom.frameworks")
local config = require("fathom.config")
local h = require("helpers")

describe("fathom.cases", function()
  it("matches GPU names as vendors write them to library nodes", function()
    local lib = config.load_mapping("configs/hardware/hardware_library.yaml", "hardware library")
    local want = {
      ["NVIDIA GB200 (Blackwell)"] = "GB200",
      ["AMD Instinct MI300X (192GB HBM3, 750W)"] = "MI300X",
      ["NVIDIA B200-SXM-180GB"] = "B200",
      ["NVIDIA GB300 (Blackwell Ultra)"] = "GB300",
      ["NVIDIA B300"] = "B300",
      ["NVIDIA H100 SXM5 80GB"] = "H100_SXM",
      ["NVIDIA H100 PCIe"] = "H100_PCIE",
      ["NVIDIA H100 NVL"] = "H100_NVL",
      ["NVIDIA H800"] = "H800_SXM",
      ["NVIDIA H200 (SXM, 141 GB)"] = "H200_SXM",
      ["NVIDIA H200 NVL (PCIe, 141 GB)"] = "H200_NVL",
      ["NVIDIA H200-NVL-141GB"] = "H200_NVL",
      ["NVIDIA H20"] = "H20",
      ["NVIDIA A100-SXM4-40GB"] = "A100_40GB_SXM",
      ["NVIDIA A100 80GB"] = "A100_80GB_SXM",
      ["AMD Instinct MI250X"] = "MI250X",
      ["AMD MI325X"] = "MI325X",
      ["AMD Instinct MI350X"] = "MI350X",
      ["AMD Instinct MI355X"] = "MI355X",
      ["Intel Gaudi 3"] = "GAUDI3",
      ["Google TPU v5p"] = "TPU_V5P",
      ["TPU v6e (Trillium)"] = "TPU_V6E",
    }
    for name, node in pairs(want) do
      local g = cases.gpu(name)
      assert.is_truthy(g, name)
      assert.are.equal(node, g.node, name)
    end
    assert.are.equal("A100_40GB_SXM", cases.gpu("NVIDIA A100", 40).node)
    assert.are.equal("H100_SXM", cases.gpu("NVIDIA H100 SXM5 80GB (NVLink)").node)
    assert.are.equal("H200_SXM", cases.gpu("NVIDIA GH200 Grace Hopper").node)
    assert.is_nil(cases.gpu("NVIDIA V100"))
    assert.are.equal("H100_SXM_96GB", cases.gpu("NVIDIA H100 (SXM)", 96).node)
    -- every node the table names exists in the library
    for _, g in ipairs(cases.gpus) do assert.is_truthy(lib.nodes[g.node], g.node) end
  end)

  it("reads 0, 1, true and strings in parallelism fields (fsdp: 0 is off)", function()
    assert.is_nil(cases.count(0))
    assert.is_nil(cases.count(false))
    assert.are.equal(8, cases.count("8"))
    assert.are.equal(4, cases.count(4))
    assert.is_false(cases.flag(0))
    assert.is_false(cases.flag("false"))
    assert.is_true(cases.flag(true))
    local case = { id = "x", system = { num_gpus = 64 }, training = { framework = "NeMo 25.04" },
      parallelism = { tp = 4, pp = 8, dp = 2, fsdp = 0, micro_batch = 1, global_batch = 64, seq_len = 8192 } }
    local p = assert(cases.parallelism(case, frameworks.lookup("NeMo 25.04")))
    assert.are.equal("ZERO1", p.dp_variant)   -- Megatron's distributed optimizer, not FSDP
    case.parallelism.fsdp = 2
    assert.are.equal("ZERO3", cases.parallelism(case, frameworks.lookup("NeMo 25.04")).dp_variant)
    -- num_gpus from nodes x GPUs per node; virtual stages from layers per virtual stage
    local c2 = { id = "y", system = { num_nodes = 8, gpus_per_node = 8 }, model = { layers = 96 },
      parallelism = { tp = 8, pp = 8, micro_batch = 1, global_batch = 64, seq_len = 2048,
        layers_per_virtual_stage = 4 } }
    local p2 = assert(cases.parallelism(c2, frameworks.lookup("Megatron-LM (2021)")))
    assert.are.equal(64, p2.gpus)
    assert.are.equal(3, p2.vpp)
    -- Megatron-Core's uneven split is carried as the case states it
    c2.parallelism.num_layers_in_first_pipeline_stage = 10
    c2.parallelism.num_layers_in_last_pipeline_stage = 11
    local p3 = assert(cases.parallelism(c2, frameworks.lookup("Megatron-LM (2021)")))
    assert.are.equal(10, p3.first_layers)
    assert.are.equal(11, p3.last_layers)
    case.parallelism.fsdp = 0
    assert.are.equal("DDP", cases.parallelism(case, frameworks.lookup("torchtitan 2025")).dp_variant)
    case.parallelism.fsdp = nil
    case.parallelism.zero_stage = 0
    assert.are.equal("DDP", cases.parallelism(case, frameworks.lookup("NeMo 25.04")).dp_variant)
    case.parallelism.zero_stage = 2
    assert.are.equal("ZERO2", cases.parallelism(case, frameworks.lookup("NeMo 25.04")).dp_variant)
    case.parallelism.zero_stage = nil
    case.parallelism.fsdp = "FULL_SHARD (ZeRO-3 equivalent)"
    assert.are.equal("ZERO3", cases.parallelism(case, frameworks.lookup("")).dp_variant)
  end)

  it("maps model.arch onto the model schema", function()
    local a = cases.arch({ arch = "Llama-style (RoPE, SwiGLU, RMSNorm, GQA)" })
    assert.is_true(a.gated)
    assert.is_false(a.tied)
    assert.is_false(a.learned)
    a = cases.arch({ arch = "GPT (learned pos-emb, GeLU MLP, MHA)" })
    assert.is_false(a.gated)
    assert.is_true(a.tied)
    assert.is_true(a.learned)
    a = cases.arch({ arch = "Nemotron-4 (RoPE, squared-ReLU MLP, LayerNorm, GQA)" })
    assert.is_false(a.gated)
    assert.is_true(a.squared)
    assert.is_nil(a.notes[1])
    assert.is_false(cases.arch({ arch = "GPT (GeLU MLP)" }).squared)
    a = cases.arch({ arch = "Llama 4 (SwiGLU, GQA; MoE in every other layer, 1 shared expert)" })
    assert.are.equal(2, a.moe_interval)
    -- Mamba2 hybrids are modelled (with or without MoE sub-layers); SSM models without counts are not
    assert.is_nil(cases.arch({ arch = "hybrid Mamba2 + MoE", hybrid_override_pattern = "MEME*E" }).unsupported)
    assert.is_nil(cases.arch({ arch = "hybrid: 54 Mamba2 layers", mamba = {} }).unsupported)
    assert.is_truthy(cases.arch({ arch = "Mamba-2 SSM" }).unsupported)
  end)

  it("reads a hybrid Mamba2 model's sub-layers and dimensions", function()
    local mdl = { name = "Nemotron-H 56B", arch = "hybrid: Mamba2 + attention + squared-ReLU MLP",
      layers = 118, hidden = 8192, heads = 64, kv_heads = 8, head_dim = 128, ffn = 32768, vocab = 131072,
      mamba = { mamba_layers = 54, attention_layers = 10, mlp_layers = 54, state_dim = 256, groups = 8,
        head_dim = 64 } }
    local m = assert(cases.model_doc(mdl, 8192))
    assert.are.same({ 54, 10, 54, 256, 8, 64 }, { m.mamba_layers, m.attention_layers, m.mlp_layers,
      m.mamba_state_dim, m.mamba_num_groups, m.mamba_head_dim })
    -- counts that do not add up to model.layers: skipped with the reason
    mdl.mamba.mlp_layers = 53
    local none, why = cases.model_doc(mdl, 8192)
    assert.is_nil(none)
    assert.matches("54 %+ 10 %+ 53 %+ 0 sub%-layers, model.layers 118", why)
    -- with experts, the FFN sub-layers are the MoE ones (Nemotron 3)
    mdl.mamba.mlp_layers, mdl.experts, mdl.top_k, mdl.expert_ffn = 54, 128, 6, 1856
    m = assert(cases.model_doc(mdl, 8192))
    assert.are.same({ 0, 54, 128 }, { m.mlp_layers, m.moe_layers, m.num_regular_experts })
  end)

  it("reads MoE and MLA fields", function()
    local m = assert(cases.model_doc({ name = "DeepSeek-V3", arch = "MLA + DeepSeekMoE", layers = 61,
      hidden = 7168, heads = 128, head_dim = 128, ffn = 18432, vocab = 129280, experts = 256,
      shared_experts = 1, top_k = 8, expert_ffn = 2048, dense_layers = 3,
      mla = { q_lora_rank = 1536, kv_lora_rank = 512, qk_nope_head_dim = 128, qk_rope_head_dim = 64,
        v_head_dim = 128 } }, 4096))
    assert.are.equal(256, m.num_regular_experts)
    assert.are.equal(8, m.num_selected_experts)
    assert.are.equal(3, m.first_dense_layers)
    assert.are.equal(512, m.kv_lora_rank)
    assert.is_true(m.gated_mlp)
    assert.is_nil(m.topk_group) -- unrestricted routing unless the case says otherwise
    -- node-limited routing as the HF config names it
    m = assert(cases.model_doc({ arch = "MLA + DeepSeekMoE", layers = 61, hidden = 7168, heads = 128,
      head_dim = 128, ffn = 18432, vocab = 129280, experts = 256, top_k = 8, expert_ffn = 2048,
      n_group = 8, topk_group = 4 }, 4096))
    assert.are.equal(8, m.n_group)
    assert.are.equal(4, m.topk_group)
    assert.is_nil(m.num_nextn_predict_layers)
    -- multi-token prediction modules, as HF and Megatron name them
    for _, key in ipairs({ "num_nextn_predict_layers", "mtp_num_layers" }) do
      m = assert(cases.model_doc({ arch = "MLA + DeepSeekMoE", layers = 61, hidden = 7168, heads = 128,
        head_dim = 128, ffn = 18432, vocab = 129280, experts = 256, top_k = 8, expert_ffn = 2048, [key] = 1 },
        4096))
      assert.are.equal(1, m.num_nextn_predict_layers)
    end
    -- Llama 4: 24 dense layers interleaved with 24 MoE layers
    m = assert(cases.model_doc({ arch = "Llama 4 (MoE in every other layer)", layers = 48, hidden = 5120,
      heads = 40, kv_heads = 8, ffn = 16384, vocab = 202048, experts = 128, top_k = 1, shared_experts = 1,
      expert_ffn = 8192, dense_layers = 24 }, 8192))
    assert.are.equal(2, m.moe_layer_interval)
    assert.are.equal(0, m.first_dense_layers)
  end)

  it("reads sliding windows from arch strings and fields", function()
    local m = assert(cases.model_doc({ arch = "GPT-OSS (alternating 128-token sliding-window / full attention, GQA)",
      layers = 24, hidden = 2880, heads = 64, kv_heads = 8, head_dim = 64, ffn = 2880, vocab = 201088 }, 4096))
    assert.are.equal(128, m.attention_window)
    assert.are.equal(2, m.full_attention_interval)
    m = assert(cases.model_doc({ arch = "Mistral (sliding window 4096, SwiGLU)", layers = 32, hidden = 4096,
      heads = 32, ffn = 14336, vocab = 32000 }, 8192))
    assert.are.equal(4096, m.attention_window)
    assert.are.equal(0, m.full_attention_interval)
    m = assert(cases.model_doc({ arch = "Gemma 3 (5:1 local/global, sliding window 1024)", layers = 48,
      hidden = 3840, heads = 16, ffn = 15360, vocab = 262144 }, 8192))
    assert.are.equal(1024, m.attention_window)
    assert.are.equal(6, m.full_attention_interval)
    m = assert(cases.model_doc({ arch = "Llama", sliding_window = 512, layers = 2, hidden = 64, heads = 4, ffn = 128,
      vocab = 100 }, 1024))
    assert.are.equal(512, m.attention_window)
    m = assert(cases.model_doc({ arch = "Llama (RoPE, SwiGLU)", layers = 2, hidden = 64, heads = 4, ffn = 128,
      vocab = 100 }, 1024))
    assert.is_nil(m.attention_window)
  end)

  it("reads a LoRA case's rank wherever the case states it", function()
    assert.are.equal(16, cases.lora_rank({ training = { task = "LoRA fine-tuning" }, notes = "LoRA dim 16" }))
    assert.are.equal(8, cases.lora_rank({ training = { lora_rank = 8 } }))
    assert.are.equal(32, cases.lora_rank({ training = { peft = { r = 32 } } }))
    assert.are.equal(64, cases.lora_rank({ training = { method = "LoRA, rank=64" } }))
    assert.is_nil(cases.lora_rank({ training = { task = "LoRA fine-tuning" } }))
    assert.is_nil(cases.lora_rank({ training = { lora_rank = 2.5 } }))
  end)

  it("models a LoRA case with the base frozen, and notes a rank it had to assume", function()
    local case = { id = "lora_t", source = "t", workload = "training",
      model = { layers = 4, hidden = 1024, heads = 16, ffn = 4096, vocab = 32000, arch = "Llama (SwiGLU, RoPE)" },
      system = { gpu = "NVIDIA H100 80GB", num_gpus = 1, gpus_per_node = 8 },
      parallelism = { tp = 1, pp = 1, dp = 1, micro_batch = 1, global_batch = 8, seq_len = 2048 },
      training = { precision = "BF16", framework = "NeMo AutoModel", task = "LoRA fine-tuning" },
      measured = { { metric = "step_time_s", value = 1.0, unit = "s" } } }
    local docs = assert(cases.training_docs(case))
    assert.are.equal(16, docs.workload.lora_rank)
    local assumed = false
    for _, n in ipairs(docs.notes or {}) do if n:find("LoRA rank not stated") then assumed = true end end
    assert.is_true(assumed)
  end)

  it("reads which linears carry the adapters, as PEFT and NeMo name them", function()
    assert.are.equal("attention",
      cases.lora_targets({ training = { lora = { target_modules = { "q_proj", "v_proj" } } } }))
    assert.are.equal("mlp", cases.lora_targets({ training = { peft = { target_modules = "linear_fc1,linear_fc2" } } }))
    assert.are.equal("all_linear", cases.lora_targets({ training = { lora_targets = "all-linear" } }))
    assert.are.equal("all_linear", cases.lora_targets({ training = { lora = { target_modules = { "linear_qkv",
      "linear_proj", "linear_fc1", "linear_fc2" } } } }))
    assert.are.equal("attention", cases.lora_targets({ training = {},
      notes = "adapters on the attention block only (NeMo peft target_modules ['attention'] = fused QKV)" }))
    assert.is_nil(cases.lora_targets({ training = { task = "LoRA" }, notes = "rank 16" }))
  end)

  it("reads MaxText's remat policies as per-op recomputation of what they do not save", function()
    local qkv = { "query_proj", "key_proj", "value_proj" }
    assert.are.same({ "query_proj", "key_proj", "value_proj", "out_proj", "mlpwo" },
      cases.remat_saved("remat_policy save_dot_except_mlpwi"))
    assert.are.same(qkv, cases.remat_saved("remat_policy=save_qkv_proj"))
    assert.are.same({ "out_proj" }, cases.remat_saved("remat_policy save_out_proj"))
    assert.are.same({ "query_proj", "key_proj", "value_proj", "context", "out_proj" },
      cases.remat_saved("remat_policy save_dot_with_context_except_mlp"))
    assert.are.equal(7, #cases.remat_saved("remat_policy=minimal"))
    assert.are.equal(8, #cases.remat_saved("remat_policy minimal_with_context"))
    -- custom: the names the string puts on the device; qkv_proj is the three
    assert.are.same({ "query_proj", "key_proj", "value_proj", "out_proj" },
      cases.remat_saved("remat_policy custom (qkv_proj, out_proj on device)"))
    assert.are.same({ "query_proj", "out_proj" },
      cases.remat_saved("remat_policy=custom query_proj=device out_proj=device"))
    -- not a policy it can read: offloading, an unnamed custom one, Megatron's strings
    assert.is_nil(cases.remat_saved("remat_policy minimal_offloaded"))
    assert.is_nil(cases.remat_saved("custom remat_policy (MaxText)"))
    assert.is_nil(cases.remat_saved("selective (core_attn)"))
    -- a MaxText case: recompute op with the policy's names, and it fits where selective did not
    local c
    for _, x in ipairs(require("fathom.validate").load({ "validation/modern_cases.yaml" })) do
      if x.id == "dgxc2501_maxtext_llama2_70b_BF16_64gpu" then c = x end
    end
    local docs = assert(cases.training_docs(c))
    assert.are.equal("op", docs.workload.recompute)
    assert.are.same({ "query_proj", "key_proj", "value_proj", "out_proj", "mlpwo" }, docs.workload.recompute_saved)
    assert.is_true(h.evaluate_case(c).memory.fits)
  end)

  it("reads Megatron's block-method recompute count, and only for the block method", function()
    assert.are.equal(21,
      cases.recompute_num_layers("full activation recompute, method block, 21 layers (ACG=full ACM=block ACL=21)"))
    assert.are.equal(4, cases.recompute_num_layers("full, block, recompute_num_layers: 4"))
    assert.is_nil(cases.recompute_num_layers("full, method uniform, 1 layer per group"))
    assert.is_nil(cases.recompute_num_layers("full"))
  end)

  it("models an MLPerf-style LoRA case: rank, targets, FP8 activation store, block recompute", function()
    local case = { id = "lora_m", source = "t", workload = "training",
      model = { name = "Llama 2 70B (llama2_70b_lora fine-tuning)", layers = 8, hidden = 1024, heads = 16,
        kv_heads = 4, ffn = 4096, vocab = 32000, arch = "Llama-style (RoPE, SwiGLU, RMSNorm, GQA)" },
      system = { gpu = "AMD Instinct MI300X 192GB HBM3", num_gpus = 8, gpus_per_node = 8 },
      parallelism = { tp = 1, pp = 1, dp = 8, micro_batch = 1, global_batch = 8, seq_len = 8192 },
      training = { precision = "FP8 (Transformer Engine hybrid, delayed scaling, FP8 activation input store)",
        framework = "AMD NeMo/Megatron-based implementation", lora_rank = 16,
        recompute = "full activation recompute, method block, 3 layers (ACG=full ACM=block ACL=3)" },
      notes = "adapters on the attention block only (NeMo peft target_modules ['attention'])",
      measured = { { metric = "step_time_s", value = 1.0, unit = "s" } } }
    local docs = assert(cases.training_docs(case))
    -- a rank under training makes it LoRA even though no training string says so
    assert.are.equal(16, docs.workload.lora_rank)
    assert.are.equal("attention", docs.workload.lora_targets)
    assert.is_true(docs.workload.activation_input_fp8)
    assert.are.equal("full", docs.workload.recompute)
    assert.are.equal(3, docs.workload.recompute_num_layers)
    assert.is_false(docs.workload.attention_fp8)
    case.training.attention_fp8 = true -- NVIDIA's cases state FP8 attention this way
    assert.is_true(cases.training_docs(case).workload.attention_fp8)
    case.training.precision = "BF16" -- no FP8 recipe: neither applies
    assert.is_false(cases.training_docs(case).workload.activation_input_fp8)
    assert.is_false(cases.training_docs(case).workload.attention_fp8)
    -- targets not stated: PEFT's all-linear, but an MLPerf submission runs the benchmark's
    -- (mlcommons/training llama2_70b_lora: --lora_target_modules "qkv_proj,o_proj")
    case.notes = nil
    assert.are.equal("all_linear", cases.training_docs(case).workload.lora_targets)
    case.training.framework = "AMD NeMo/Megatron-based implementation (MLPerf Training v5.1)"
    local docs_m = cases.training_docs(case)
    assert.are.equal("attention", docs_m.workload.lora_targets)
    assert.matches("the MLPerf benchmark's", table.concat(docs_m.notes, "; "))
    case.training.framework, case.source = "NeMo 25.09", "mlperf_lora_v5.1"
    assert.are.equal("attention", cases.training_docs(case).workload.lora_targets)
  end)

  it("keeps Nemotron-H's first and last sub-layers in BF16 under FP8, as NeMo's configs do", function()
    local case = { id = "nh", source = "t", workload = "training",
      model = { name = "Nemotron-H 56B (hybrid Mamba2-Transformer)", layers = 6, hidden = 1024, heads = 8,
        kv_heads = 8, ffn = 4096, vocab = 32000, arch = "hybrid, squared-ReLU MLP",
        mamba = { mamba_layers = 2, attention_layers = 1, mlp_layers = 3, state_dim = 128, groups = 8 } },
      system = { gpu = "NVIDIA H100 80GB HBM3", num_gpus = 8, gpus_per_node = 8 },
      parallelism = { tp = 8, pp = 1, dp = 1, micro_batch = 1, global_batch = 8, seq_len = 4096, sp = true },
      training = { precision = "FP8", framework = "NeMo 25.04" },
      measured = { { metric = "step_time_s", value = 1.0, unit = "s" } } }
    local w = assert(cases.training_docs(case)).workload
    assert.are.equal(1, w.num_layers_at_start_in_bf16)
    assert.are.equal(1, w.num_layers_at_end_in_bf16)
    assert.is_true(assert(cases.training_docs(case)).model.squared_relu)
    case.training.first_last_layers_bf16 = false -- as a case states it
    assert.is_nil(cases.training_docs(case).workload.num_layers_at_start_in_bf16)
    case.training.first_last_layers_bf16 = nil
    case.training.precision = "BF16" -- no recipe: nothing to except
    assert.is_nil(cases.training_docs(case).workload.num_layers_at_end_in_bf16)
    case.model.name = "Nemotron-4 15B" -- a family whose configs do not set it
    case.training.precision = "FP8"
    assert.is_nil(cases.training_docs(case).workload.num_layers_at_start_in_bf16)
  end)

  it("maps training.precision to a compute width and recipe", function()
    assert.are.equal(2, cases.precision("BF16").bytes)
    assert.are.equal("none", cases.precision("fp16 mixed precision").recipe)
    assert.are.equal(2, cases.precision("FP8 delayed scaling").bytes)
    assert.are.equal(1, cases.precision("FP8 delayed scaling").gemm_bytes)
    assert.are.equal("fp8_blockwise", cases.precision("FP8 block-scaled weights/GEMMs (DeepGEMM)").recipe)
    assert.are.equal("fp8_delayed", cases.precision("FP8", "fp8_delayed").recipe)
    assert.are.equal("fp8_delayed", cases.precision("FP8 delayed scaling").recipe)
    assert.are.equal("fp8_current", cases.precision("FP8-CS").recipe)
    assert.are.equal("fp8_current", cases.precision("Float8 tensorwise (torchao) + BF16").recipe)
    assert.are.equal("fp8_rowwise", cases.precision("Float8 rowwise (torchao) + BF16").recipe)
    assert.are.equal("mxfp8", cases.precision("MXFP8").recipe)
    assert.is_true(cases.precision("NVFP4").fp4)
    assert.are.equal("nvfp4", cases.precision("NVFP4").recipe)
    assert.are.equal(2, cases.precision("NVFP4").bytes)
    -- FP8 weights all-gathered only where the source says so, and never under FP4
    assert.is_true(cases.precision("FP8 (TE hybrid, delayed scaling; FP8 params)").fp8_param_gather)
    assert.is_true(cases.precision("FP8 current scaling, FP8 param gather").fp8_param_gather)
    assert.is_false(cases.precision("FP8 delayed scaling").fp8_param_gather)
    assert.is_false(cases.precision("BF16 params").fp8_param_gather)
    assert.is_false(cases.precision("NVFP4 (FP8 param gather)").fp8_param_gather)
  end)

  it("takes a 72-GPU NVLink domain for GB200 NVL72, not the 4-GPU tray", function()
    local g = cases.gpu("NVIDIA GB200")
    assert.are.equal(72, cases.scale_up_domain({ gpus_per_node = 4,
      intra_node_interconnect = "GB200 NVL72: NVLink 5 domain of 72 GPUs" }, g))
    assert.are.equal(72, cases.scale_up_domain({ gpus_per_node = 4 }, g))
    assert.are.equal(8, cases.scale_up_domain({ gpus_per_node = 8 }, cases.gpu("H100")))
    local docs = assert(cases.training_docs({ id = "gb", system = { gpu = "NVIDIA GB200", num_gpus = 128,
      gpus_per_node = 4 }, model = { arch = "Llama", layers = 32, hidden = 4096, heads = 32, kv_heads = 8,
      ffn = 14336, vocab = 128256 }, training = { framework = "NeMo 25.04", precision = "BF16" },
      parallelism = { tp = 4, pp = 1, cp = 2, dp = 16, micro_batch = 1, global_batch = 128, seq_len = 8192 } }))
    assert.are.equal(64, docs.physical.dimensions[1].size)   -- 128 GPUs: two 64-GPU NVLink domains
    assert.are.equal(2, docs.physical.dimensions[2].size)
  end)

  it("sizes the gradient buffer at the framework's reduce width", function()
    -- Llama 3.1 8B, NeMo, TP 1, PP 1, DP 4 x CP 2 on 8 H100: the distributed optimizer keeps
    -- the whole gradient buffer on every rank, so it holds every parameter at 2 bytes
    -- (BF16 reduction); the same run under Megatron-LM's FP32 main gradients holds 4.
    local scenario = require("fathom.scenario")
    local lib = require("fathom.spec").hardware_library(
      require("fathom.config").load_mapping("configs/hardware/hardware_library.yaml", "hardware library"))
    local function grads(fw)
      local docs = assert(cases.training_docs({ id = "g", system = { gpu = "H100 80GB", num_gpus = 8,
        gpus_per_node = 8 }, model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 32, hidden = 4096,
        heads = 32, kv_heads = 8, ffn = 14336, vocab = 128256 }, training = { framework = fw, precision = "BF16" },
        parallelism = { tp = 1, pp = 1, cp = 2, dp = 4, micro_batch = 1, global_batch = 128, seq_len = 8192 } }))
      local r = scenario.new({ hardware_lib = lib, physical = docs.physical, logical = docs.logical,
        model = docs.model, workload = docs.workload }):evaluate()
      return r.memory.components.gradient_buffers
    end
    -- parameters: 32 x (4096 x (4096 + 2 x 1024) + 4096^2 + 3 x 4096 x 14336 + 2 x 4096)
    -- + 2 x 128256 x 4096 (untied embedding and head) + 4096 = 8,030,261,248
    local params = 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336 + 2 * 4096)
      + 2 * 128256 * 4096 + 4096
    assert.are.equal(8030261248, params)
    assert.is_true(math.abs(grads("NeMo 25.04.01 container") / (2 * params) - 1) < 1e-9)
    assert.is_true(math.abs(grads("Megatron-Core v0.9 (2024)") / (4 * params) - 1) < 1e-9)
  end)

  it("reads Megatron-Core's cp_comm_type (ring by default) and refuses one it does not model", function()
    local function docs(cp_comm_type)
      return cases.training_docs({ id = "c", system = { gpu = "NVIDIA GB200", num_gpus = 16, gpus_per_node = 4 },
        model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 80, hidden = 8192, heads = 64, kv_heads = 8,
          ffn = 28672, vocab = 32000 },
        training = { framework = "NeMo 25.09 container", precision = "BF16" },
        parallelism = { tp = 1, cp = 8, micro_batch = 1, global_batch = 2, seq_len = 8192,
          cp_comm_type = cp_comm_type } })
    end
    assert.is_nil(assert(docs(nil)).workload.cp_comm) -- the core's default: p2p
    assert.are.equal("a2a", assert(docs("A2A")).workload.cp_comm)
    assert.are.equal("p2p", assert(docs("p2p")).workload.cp_comm)
    local none, why = docs("a2a+p2p")
    assert.is_nil(none)
    assert.matches("parallelism.cp_comm_type 'a2a+p2p' is not modelled (choices: p2p, a2a)", why, 1, true)
  end)

  it("costs the all-to-all exchange: the whole sequence on heads / CP, every exchange exposed", function()
    local function step(cp_comm_type)
      return require("helpers").evaluate_case({ id = "c", system = { gpu = "NVIDIA GB200", num_gpus = 16,
        gpus_per_node = 4 }, model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 80, hidden = 8192,
        heads = 64, kv_heads = 8, ffn = 28672, vocab = 32000 },
        training = { framework = "NeMo 25.09 container", precision = "BF16" },
        parallelism = { tp = 1, cp = 8, micro_batch = 1, global_batch = 2, seq_len = 8192,
          cp_comm_type = cp_comm_type } })
    end
    local ring, a2a = step(nil), step("a2a")
    assert.are.equal("send_recv", ring.comm.cp.op)
    assert.are.equal("all_to_all", a2a.comm.cp.op)
    -- a ring step hides its transfer under the attention; the all-to-all sits on the path
    assert.is_true(ring.comm.cp.hidden_s > 0)
    assert.are.equal(0, a2a.comm.cp.hidden_s)
    assert.is_true(math.abs(a2a.comm.cp.exposed_s - a2a.comm.cp.raw_s) < 1e-12)
  end)

  it("holds a frozen FP8 LoRA base once and runs TP over PCIe without overlap", function()
    -- Llama 2 70B LoRA (NeMo, FP8 delayed scaling, rank 16 on the attention), TP 4 x CP 2 on
    -- 8 GPUs of 4-GPU nodes. The frozen base is held as one FP8 copy, 1 byte a parameter
    -- (NeMo's fp8 parameters with the transpose cache off): on the 48 GB L40S it fits. The
    -- L40S talks over PCIe: TP's collectives run between the GEMMs, all exposed; on H100's
    -- NVLink the userbuffers overlap hides the forward's.
    local scenario = require("fathom.scenario")
    local lib = require("fathom.spec").hardware_library(
      require("fathom.config").load_mapping("configs/hardware/hardware_library.yaml", "hardware library"))
    local function run(gpu, link)
      local docs = assert(cases.training_docs({ id = "l", system = { gpu = gpu, num_gpus = 8, gpus_per_node = 4,
        intra_node_interconnect = link }, model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 80,
        hidden = 8192, heads = 64, kv_heads = 8, ffn = 28672, vocab = 32000 },
        training = { framework = "NeMo 24.04 container", precision = "FP8 (delayed scaling)", task = "LoRA",
          lora_rank = 16, lora_targets = "attention" },
        parallelism = { tp = 4, pp = 1, cp = 2, dp = 1, micro_batch = 1, global_batch = 1, seq_len = 8192 } }))
      return scenario.new({ hardware_lib = lib, physical = docs.physical, logical = docs.logical,
        model = docs.model, workload = docs.workload }):evaluate()
    end
    local l40s = run("NVIDIA L40S", "none (PCIe Gen4)")
    assert.is_true(l40s.memory.fits)
    assert.is_true(math.abs(l40s.memory.components.weights / l40s.params_per_gpu - 1) < 1e-9)
    assert.is_true(l40s.comm.tp.raw_s > 0)
    assert.is_true(math.abs(l40s.comm.tp.exposed_s / l40s.comm.tp.raw_s - 1) < 1e-9)
    local h100 = run("NVIDIA H100 SXM5 80GB", "NVLink 4 + NVSwitch")
    assert.is_true(h100.comm.tp.exposed_s < 0.5 * h100.comm.tp.raw_s)
  end)

  it("lays out EP and CP as logical dimensions", function()
    local phys, logical = cases.layout({ tp = 2, cp = 1, dp = 16, pp = 4, etp = 1, ep = 32, dp_moe = 1 }, 128, 8)
    assert.are.equal(2, #phys)
    local tags = {}
    for _, l in ipairs(logical) do tags[l.logical_tag .. "@" .. l.maps_to_physical_dimension_name] = l.size end
    assert.are.equal(2, tags["TP_Attn@scale_up"])
    assert.are.equal(8, tags["EP_SU@scale_up"])
    assert.are.equal(4, tags["EP_SO@scale_out"])
    assert.are.equal(4, tags["PP@scale_out"])
  end)
end)

describe("fathom.frameworks", function()
  it("gives each framework its conventions", function()
    local f = frameworks.lookup("Megatron-LM (2021)")
    assert.is_false(f.flash_attention)
    assert.are.equal("DDP", f.dp_variant)
    f = frameworks.lookup("NeMo 25.04.01 container")
    assert.is_true(f.flash_attention)
    assert.are.equal("ZERO1", f.dp_variant)
    assert.are.equal("2025", f.kernels)
    assert.are.equal("2024", frameworks.lookup("NeMo 24.09 container").kernels)
    assert.are.equal("ZERO3", frameworks.lookup("torchtitan 9dec370 (2024-12-26)").dp_variant)
    assert.are.equal("ZERO3", frameworks.lookup("NeMo AutoModel (main branch, Oct 2025)").dp_variant)
    assert.are.equal("2023", frameworks.lookup("Composer + LLM Foundry (PyTorch FSDP)").kernels)
    assert.are.equal("default", frameworks.lookup("something else").name)
  end)

  it("trains MLA's 192/128-wide heads fused on Blackwell from Transformer Engine 2.5 (NeMo 25.07)", function()
    local mla = { qk_nope_head_dim = 128, qk_rope_head_dim = 64, v_head_dim = 128 }
    local early, late = frameworks.lookup("NeMo 25.04.01 container"), frameworks.lookup("NeMo 25.07 container")
    assert.is_false(early.blackwell_mla_fused)
    assert.is_true(late.blackwell_mla_fused)
    local ok, why = frameworks.fused_attention(early, "blackwell", mla)
    assert.is_false(ok)
    assert.is_truthy(why:find("192/128%-wide heads"))
    assert.is_false((frameworks.fused_attention(early, "blackwell_ultra", mla)))
    assert.is_false((frameworks.fused_attention(frameworks.lookup("NeMo 24.12"), "blackwell", mla)))
    -- the same release on Hopper (cuDNN 9.5+ trains heads up to 256 wide), or a later one
    assert.is_true((frameworks.fused_attention(early, "hopper", mla)))
    assert.is_true((frameworks.fused_attention(late, "blackwell", mla)))
    assert.is_true((frameworks.fused_attention(frameworks.lookup("Megatron-Bridge (container 25.09)"), "blackwell",
      mla)))
    -- a NeMo name without a release is taken as current
    assert.is_true((frameworks.fused_attention(frameworks.lookup("NeMo"), "blackwell", mla)))
    -- equal widths (flash-attn takes them) or heads within 128: fused
    assert.is_true((frameworks.fused_attention(early, "blackwell", {})))
    assert.is_true((frameworks.fused_attention(early, "blackwell",
      { qk_nope_head_dim = 64, qk_rope_head_dim = 32, v_head_dim = 64 })))
    assert.is_true((frameworks.fused_attention(early, "blackwell",
      { qk_nope_head_dim = 128, qk_rope_head_dim = 64, v_head_dim = 192 })))
    -- a framework without fused attention stays without it
    assert.is_false((frameworks.fused_attention(frameworks.lookup("Megatron-LM (2021)"), "hopper", {})))
  end)

  it("dates the serving engines' kernel libraries (vLLM 2024, TensorRT-LLM 0.5/0.6)", function()
    -- vLLM 0.4-0.6 or a 2024 date: 2024's kernels; undated or 0.7+: the current ones
    assert.are.equal("vllm2024", frameworks.lookup("vLLM (ROCm, 2024)").kernels)
    assert.are.equal("vllm2024", frameworks.lookup("vLLM 0.6.3").kernels)
    assert.are.equal("2025", frameworks.lookup("vLLM").kernels)
    assert.are.equal("2025", frameworks.lookup("vLLM v0.8.5").kernels)
    -- TensorRT-LLM 0.5/0.6's masked MHA re-reads KV per query head; the PyTorch workflow (2025) does not
    assert.are.equal(0.75, frameworks.lookup("TensorRT-LLM v0.6.1").decode_kv_reread)
    assert.are.equal(0, frameworks.lookup("TensorRT-LLM commit b6261862 (PyTorch workflow)").decode_kv_reread)
    assert.is_true(frameworks.lookup("SGLang (Sep 2025)").eplb_slots)
  end)

  it("overlaps TP communication where the framework does (async TP, userbuffers)", function()
    assert.is_false(frameworks.lookup("torchtitan 9dec370 (2024-12-26), torch 1963fc8").tp_comm_overlap)
    assert.is_true(frameworks.lookup("torchtitan 9dec370 (2024-12-26), torch.compile, AsyncTP").tp_comm_overlap)
    assert.is_true(frameworks.lookup("NeMo 25.04.01 container").tp_comm_overlap)
    -- the case's own async_tp wins over the framework's convention
    local function overlap(async)
      local docs = assert(cases.training_docs({ id = "t", system = { gpu = "H100 80GB", num_gpus = 16,
        gpus_per_node = 8 }, model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 32, hidden = 4096,
        heads = 32, kv_heads = 8, ffn = 14336, vocab = 128256 },
        training = { framework = "torchtitan 2025", precision = "BF16" },
        parallelism = { tp = 8, dp = 2, micro_batch = 1, global_batch = 16, seq_len = 8192, async_tp = async } }))
      return docs.workload.tp_comm_overlap
    end
    assert.is_false(overlap(nil))
    assert.is_true(overlap(true))
    assert.is_false(overlap(false))
    -- PyTorch's async TP leaves the backward's reduce-scatters between the GEMMs; Transformer
    -- Engine's bulk overlap hides them
    assert.is_false(frameworks.lookup("torchtitan 2025, AsyncTP").tp_overlap_backward_rs)
    assert.is_false(frameworks.lookup("torchtitan 9dec370 (2024-12-26), AsyncTP").tp_overlap_backward_rs)
    assert.is_true(frameworks.lookup("NeMo 25.04.01 container").tp_overlap_backward_rs)
    assert.is_true(frameworks.lookup("Megatron-Bridge (container 26.06)").tp_overlap_backward_rs)
    local docs = assert(cases.training_docs({ id = "t",
      system = { gpu = "H100 80GB", num_gpus = 16, gpus_per_node = 8 },
      model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 32, hidden = 4096, heads = 32, kv_heads = 8,
        ffn = 14336, vocab = 128256 }, training = { framework = "torchtitan 2025", precision = "BF16" },
      parallelism = { tp = 8, dp = 2, micro_batch = 1, global_batch = 16, seq_len = 8192, async_tp = true } }))
    assert.is_false(docs.workload.tp_overlap_backward_rs)
  end)

  it("gathers the quantised tensor in front of the linears as each framework does", function()
    -- torchtitan: torchao's Float8 TP classes, used for tensorwise scaling only
    local function work(framework, precision)
      return assert(cases.training_docs({ id = "t",
        system = { gpu = "H100 80GB", num_gpus = 16, gpus_per_node = 8 },
        model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 32, hidden = 4096, heads = 32, kv_heads = 8,
          ffn = 14336, vocab = 128256 }, training = { framework = framework, precision = precision },
        parallelism = { tp = 8, dp = 2, sp = true, micro_batch = 1, global_batch = 16, seq_len = 8192 } })).workload
    end
    assert.is_true(work("torchtitan 2025", "Float8 tensorwise (torchao) + BF16").tp_gather_quantized)
    assert.is_false(work("torchtitan 2025", "Float8 rowwise (torchao) + BF16").tp_gather_quantized)
    -- Transformer Engine quantises before gather_along_first_dim under every recipe: the
    -- core's default, not restated
    assert.is_nil(work("NeMo 25.04", "FP8 delayed scaling").tp_gather_quantized)
    assert.is_nil(work("Megatron-Bridge (container 26.06)", "MXFP8").tp_gather_quantized)
    assert.is_true(require("fathom.core").defaults.train.tp_gather_quantized)
    -- a workload spec naming the framework gets the same convention
    assert.is_false(frameworks.apply({ framework = "torchtitan 2025", precision_recipe = "fp8_rowwise" })
      .tp_gather_quantized)
    assert.is_true(frameworks.apply({ framework = "torchtitan 2025", precision_recipe = "fp8_current" })
      .tp_gather_quantized)
    assert.is_nil(frameworks.apply({ framework = "NeMo 25.04", precision_recipe = "fp8_current" })
      .tp_gather_quantized)
    assert.is_false(frameworks.apply({ framework = "torchtitan 2025", precision_recipe = "fp8_current",
      tp_gather_quantized = false }).tp_gather_quantized)
  end)

  it("runs DeepSeek-AI's HAI-LLM as the DeepSeek-V3 report describes it", function()
    local w = frameworks.apply({ framework = "HAI-LLM", precision_recipe = "fp8_blockwise" })
    assert.are.equal("DUALPIPE", w.pp_spec.variant)
    assert.are.equal(1, w.moe_dispatch_float_size_bytes) -- FP8 dispatch, BF16 combine
    assert.are.equal("ZERO1", w.dp_spec.variant)
    assert.is_true(w.ep_dispatch_per_node and w.ep_overlap_pairs)
    -- NVFP4 or BF16: nothing to dispatch in FP8
    assert.is_nil(frameworks.apply({ framework = "HAI-LLM", precision_recipe = "nvfp4" }).moe_dispatch_float_size_bytes)
    assert.is_nil(frameworks.apply({ framework = "HAI-LLM" }).moe_dispatch_float_size_bytes)
    assert.is_nil(frameworks.apply({ framework = "NeMo 25.04", precision_recipe = "fp8_current" }).pp_spec)
    -- a case: DualPipe where the stages are even and the micro-batches at least twice them
    local function sched(pp, gb)
      return assert(cases.training_docs({ id = "d", system = { gpu = "NVIDIA H800", num_gpus = 64, gpus_per_node = 8 },
        model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 32, hidden = 4096, heads = 32, kv_heads = 8,
          ffn = 14336, vocab = 128256 }, training = { framework = "HAI-LLM", precision = "BF16" },
        parallelism = { tp = 1, pp = pp, dp = 64 // pp, micro_batch = 1, global_batch = gb, seq_len = 4096 } }))
        .workload.pp_spec.variant
    end
    assert.are.equal("DUALPIPE", sched(4, 16 * 8))
    assert.are.equal("1F1B", sched(4, 16 * 4)) -- 4 micro-batches: fewer than twice the stages
    assert.are.equal("1F1B", sched(2, 32 * 3)) -- 3 micro-batches: odd
  end)

  it("reads an A2A overlap as one made of micro-batch pairs; none named, EP runs exposed", function()
    local function work(kernels)
      return assert(cases.training_docs({ id = "q", system = { gpu = "NVIDIA GB200", num_gpus = 8,
        gpus_per_node = 4 }, model = { type = "moe", arch = "Qwen3 MoE (GQA, SwiGLU experts)", layers = 48,
        hidden = 2048, heads = 32, kv_heads = 4, head_dim = 128, vocab = 151936, experts = 128, top_k = 8,
        expert_ffn = 768 },
        training = { framework = "Megatron-Bridge (container 26.06)", precision = "BF16", kernels = kernels },
        parallelism = { tp = 1, ep = 8, dp = 8, micro_batch = 1, global_batch = 64, seq_len = 4096 } })).workload
    end
    local w = work("Transformer Engine, hybridep flex dispatcher, A2A overlap (moe_a2a_overlap)")
    assert.is_true(w.ep_comm_overlap)
    assert.is_true(w.ep_overlap_pairs)
    w = work("Transformer Engine, hybridep flex dispatcher")
    assert.is_false(w.ep_comm_overlap)
    assert.is_false(w.ep_overlap_pairs)
  end)

  it("reads Megatron-Core recompute modules from the recompute string", function()
    assert.are.same({ "mla_up_proj", "moe_act" }, cases.recompute_modules("selective (mla_up_proj, moe_act)"))
    assert.are.same({ "layernorm", "mla_up_proj" },
      cases.recompute_modules("Recomputation of RMSNorm and MLA Up-Projection"))
    assert.is_nil(cases.recompute_modules("selective activation checkpointing"))
    local function work(rc)
      local docs = assert(cases.training_docs({ id = "r", system = { gpu = "H100 80GB", num_gpus = 8,
        gpus_per_node = 8 }, model = { arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 32, hidden = 4096,
        heads = 32, kv_heads = 8, ffn = 14336, vocab = 128256 },
        training = { framework = "NeMo 25.04", precision = "BF16", recompute = rc },
        parallelism = { tp = 1, dp = 8, micro_batch = 1, global_batch = 8, seq_len = 8192 } }))
      return docs.workload
    end
    local w = work("Recomputation of RMSNorm (layernorm module)")
    assert.are.equal("selective", w.recompute)
    assert.are.same({ "layernorm" }, w.recompute_modules)
    w = work("full (layernorm too)")
    assert.are.equal("full", w.recompute)
    assert.is_nil(w.recompute_modules)
  end)

  it("reads a power cap from the GPU as written (clocks scale in the core)", function()
    assert.are.equal(500, cases.power_limit({ gpu = "NVIDIA H100 (SXM, 96 GB HBM2e, 500 W power limit)" }))
    assert.are.equal(450, cases.power_limit({ gpu = "H100 SXM, power-capped at 450W" }))
    assert.are.equal(600, cases.power_limit({ gpu = "H100", power_limit_watts = 600 }))
    assert.is_nil(cases.power_limit({ gpu = "NVIDIA H100 80GB HBM3 (SXM, 700 W TDP)" }))
  end)

  it("reduces gradients in BF16 where the performance recipes do, FP32 elsewhere", function()
    -- NeMo 2 / Megatron-Bridge perf recipes: grad_reduce_in_fp32 = False; Megatron-LM's own
    -- loop and FSDP's reduce_dtype keep FP32 main gradients.
    assert.are.equal(2, frameworks.lookup("NeMo 25.04.01 container").grad_bytes)
    assert.are.equal(2, frameworks.lookup("NeMo 24.09 container (NeMo Launcher)").grad_bytes)
    assert.are.equal(2, frameworks.lookup("Megatron-Bridge 0.2").grad_bytes)
    assert.are.equal(4, frameworks.lookup("Megatron-LM (2021)").grad_bytes)
    assert.are.equal(4, frameworks.lookup("torchtitan 9dec370 (2024-12-26)").grad_bytes)
    assert.are.equal(4, frameworks.lookup("something else").grad_bytes)
  end)
end)

describe("cases.scale_out", function()
  it("reads the compute fabric a case states, per GPU", function()
    local function gbps(str, gpn)
      local r = cases.scale_out({ inter_node_interconnect = str, gpus_per_node = gpn or 8 })
      return r and r.bits_per_s / 1e9, r and r.roce
    end
    -- by hand: count x rate / GPUs per node, or the rate per GPU
    assert.are.same({ 400, false }, { gbps("8x 400 Gb/s InfiniBand compute links per node") })
    assert.are.same({ 200, true }, { gbps("1600 Gb/s RoCE per node") })                 -- 1600 / 8
    -- no fabric kind said: nil (the node's stands)
    assert.are.same({ 400 }, { gbps("RDMA backend network, 400 Gb/s per GPU") })
    assert.are.same({ 400 }, { gbps("8x 400 Gbit/s NDR per node") })
    -- "(one per GPU)" is the count's unit, not the rate's: 8 x 400 / 8
    assert.are.same({ 400, false }, { gbps("8x 400 Gb/s InfiniBand (one per GPU)") })
    assert.are.same({ 800, false }, { gbps("4x ConnectX-8 IB XDR 800 Gb/s per node (4-GPU tray)", 4) })
    -- east-west is the compute fabric: 2 x 400 / 8 (the north-south 200 is not)
    assert.are.same({ 100 }, { gbps("BF3 200Gbps for NS and 2xBF3 400Gbps for EW") })
    -- the compute NICs, not storage or management; the InfiniBand is not the management Ethernet
    assert.are.same({ 400, false }, { gbps("Storage: 2x ConnectX-7 IB NDR 400Gb/s, Compute: 8x ConnectX-7 IB NDR " ..
      "400Gb/s, Management: 100Gb/s Ethernet NIC") })
    assert.are.same({ 400, true }, { gbps("8x BlueField-3 ConnectX-7 400 Gb/s per node (compute), Ethernet fabric") })
    -- GB/s are bytes (a PCIe figure here), a rate with no count or unit of what it is per, an
    -- inference in parentheses, one node: nothing read
    assert.is_nil(gbps("RoCE v2 (systems json: PCIe-NIC 500 GB/s per node; per-NIC rate not stated)"))
    assert.is_nil(gbps('InfiniBand (systems json: "100GbE InfiniBand")'))
    assert.is_nil(gbps("not stated (DGX H100: 8x 400 Gb/s InfiniBand)"))
    assert.is_nil(gbps("single node"))
    assert.are.same({ 400 }, { gbps("InfiniBand (systems json: PCIe-NIC 500 GB/s per node; DGX B200 = 8x " ..
      "ConnectX-7 400 Gb/s)") })
    -- out of range (a count no node has): not read
    assert.is_nil(gbps("99999999999999999999x 400 Gb/s"))
  end)

  it("costs the stated fabric where it is not the node's", function()
    local validate = require("fathom.validate")
    local state = validate.state()
    -- 2 x 400 Gb/s RoCE per 8-GPU node: 100 Gb/s = 12.5 GB/s a GPU, the library's RoCE entry
    local lib = validate.calibrated_lib(state, "H100_SXM", {}, nil, { bits_per_s = 100e9, roce = true })
    local ic = lib.interconnect[lib.nodes.H100_SXM.device_interconnects.scale_out]
    assert.are.equal(12.5e9, ic.bandwidth_nominal * ic.num_links)
    assert.are.equal("ethernet", ic.type)
    assert.is_false(ic.in_network_reduction)
    -- the node's own 8 x 400 Gb/s InfiniBand: the library's entry
    lib = validate.calibrated_lib(state, "H100_SXM", {}, nil, { bits_per_s = 400e9 })
    assert.are.equal("ib_ndr", lib.nodes.H100_SXM.device_interconnects.scale_out)
    -- a DP-only run over two nodes reduces its gradients slower on the slower fabric
    local function dp_raw(str)
      local case = { id = "so", workload = "training",
        model = { name = "m", arch = "Llama (RoPE, SwiGLU, RMSNorm, GQA)", layers = 8, hidden = 4096, heads = 32,
          kv_heads = 8, ffn = 14336, vocab = 32000 },
        system = { gpu = "NVIDIA H100 80GB HBM3", num_gpus = 16, gpus_per_node = 8, inter_node_interconnect = str },
        parallelism = { tp = 1, pp = 1, dp = 16, micro_batch = 1, global_batch = 16, seq_len = 2048 },
        training = { precision = "BF16", framework = "Megatron-Core (2025)", recompute = "none" } }
      local docs = assert(cases.training_docs(case))
      local setting = require("fathom.calibration").lookup(docs.gpu.generation, docs.fw.kernels, state.settings)
      local l = validate.calibrated_lib(state, docs.gpu.node, setting, nil, docs.scale_out)
      local r = require("fathom.scenario").new({ hardware_lib = l, physical = docs.physical, logical = docs.logical,
        model = docs.model, workload = docs.workload }):evaluate()
      return r.comm.dp.raw_s
    end
    assert.is_true(dp_raw("2x 400 Gb/s RoCE per node") > 1.5 * dp_raw("8x 400 Gb/s InfiniBand per node"))
  end)
end)

describe("pipeline splits Megatron-Core cuts", function()
  it("takes the split a Megatron run needs when its chunks do not divide the layers", function()
    -- Where L + 2 (or L + 1) divides, Megatron counted the embedding and the loss as layers: the
    -- first and last GPU one layer short, which the core's even split already cuts (the reader
    -- says nothing). By hand: Llama 3.1 405B, 126 layers in PP 16 x v 8 = 128 chunks, 1 a chunk,
    -- the first and last GPU 8 - 1 = 7; Qwen3-235B, 94 in 8 x 3 = 24 chunks of 96 / 24 = 4, the
    -- ends 3 x 4 - 1 = 11; 63 + 1 = 64, the loss alone: 32 chunks of 2, the first GPU 2 x 2 and
    -- the last 2 x 2 - 1.
    local search, core = require("fathom.search"), require("fathom.core")
    local function even(model, gpus, pp, vs, batch, want_first, want_last, layers)
      assert.is_nil(frameworks.megatron_split(layers, pp, vs))
      local def = search.prepare({ model = model, node = "H100_SXM", gpus = gpus, pod_size = 8,
        global_batch = batch, seq = 4096, objective = "step_time", top = 1,
        workload = "train_specs/search_default.yaml" })
      local hit = core.search_eval(def, { tp = 8, cp = 1, pp = pp, pp_in = 1, tp_moe = 1, ep = 1, vs = vs,
        mb = 1, schedule = "INTERLEAVED", recompute = "full", dp_variant = "ZERO1", sp = true })
      assert.are.same({ want_first, want_last }, { hit.first_stage_layers, hit.last_stage_layers })
    end
    even("llama3.1_405b", 16384, 16, 8, 2048, 7, 7, 126)
    local m94 = os.tmpname()
    local f = assert(io.open(m94, "w"))
    f:write("name: dense94\nd_model: 4096\nn_layers: 94\nnum_heads: 32\nnum_kv_heads: 4\nffn_hidden_size: 12288\n" ..
      "gated_mlp: true\nmax_sequence_length: 4096\nvocab_size: 151936\n")
    f:close()
    even(m94, 1024, 8, 3, 1024, 11, 11, 94)
    os.remove(m94)
    assert.is_nil(frameworks.megatron_split(63, 16, 2))
    -- DeepSeek-V3, 61 layers in 16 chunks (Megatron-Bridge's "Et*4|(tttt|)*14tmL"): 4 a chunk,
    -- the last 61 - 15 x 4 = 1; PP 4 x v 4: the last GPU 3 x 4 + 1 = 13; PP 2 x 8: 7 x 4 + 1
    assert.are.same({ 4, 1 }, { frameworks.megatron_split(61, 16, 1) })
    assert.are.same({ 16, 13 }, { frameworks.megatron_split(61, 4, 4) })
    assert.are.same({ 32, 29 }, { frameworks.megatron_split(61, 2, 8) })
    -- whole chunks, or no pipeline: nothing to say
    assert.is_nil(frameworks.megatron_split(80, 8, 5))
    assert.is_nil(frameworks.megatron_split(61, 1, 1))
  end)

  it("reads pipeline_model_parallel_layout as a string or a list of stages", function()
    -- virtual stage k on GPU k mod PP: GPU 0 holds stages 0, 4, 8, 12 (4 layers each); GPU 3
    -- stages 3, 7, 11 (4 each) and 15 ("tmL": 1)
    assert.are.same({ 16, 13, 4 }, { cases.layout_split("Et*4|(tttt|)*14tmL", 4, 4, 61) })
    assert.are.same({ 4, 1, 1 }, { cases.layout_split("Et*4|(tttt|)*14tmL", 16, 1, 61) })
    -- no virtual stages stated: the layout's 16 stages over PP 4 (Megatron-Core infers them)
    assert.are.same({ 16, 13, 4 }, { cases.layout_split("E t*4 | (tttt|)*14 tmL", 4, nil, 61) })
    local kimi = { { "embedding", "decoder", "decoder", "decoder", "decoder" } }
    for _ = 1, 14 do kimi[#kimi + 1] = { "decoder", "decoder", "decoder", "decoder" } end
    kimi[#kimi + 1] = { "decoder", "loss" }
    assert.are.same({ 4, 1, 1 }, { cases.layout_split(kimi, 16, 1, 61) })
    local _, why = cases.layout_split("Et*4|(tttt|)*14tmL", 8, 1, 61)
    assert.matches("16 stages, but PP x virtual stages = 8", why)
    _, why = cases.layout_split("Et*4|(tttt|*14tmL", 4, 4, 61)
    assert.matches("unclosed", why)
    _, why = cases.layout_split("Ex*4", 1, 1, 4)
    assert.matches("'x' at 2", why)
    _, why = cases.layout_split("Et*4|(tttt|)*14tmL", 4, 4, 60)
    assert.matches("61 decoder layers, but the model has 60", why)
    -- an error inside a group is the group's; a repeat past a million symbols is refused, not built
    _, why = cases.layout_split("(tx)", 1, 1, 1)
    assert.matches("'x' at 3", why)
    _, why = cases.layout_split("(t*100000)*100000", 1, 1, 1)
    assert.matches("past 1000000 symbols", why)
  end)

  it("gives a case the split its framework cuts, unless the case states one", function()
    local case = { id = "x", system = { num_gpus = 1024 }, model = { layers = 126 },
      parallelism = { tp = 8, pp = 16, vpp = 8, micro_batch = 1, global_batch = 512, seq_len = 8192 } }
    -- 126 + 2 in 128 chunks: the core's even split is Megatron's (above), the reader says nothing
    local p = assert(cases.parallelism(case, frameworks.lookup("Megatron-Bridge (container 26.04)")))
    assert.is_nil(p.first_layers)
    assert.is_nil(p.last_layers)
    -- 61 layers in 4 x 4 chunks: Megatron-Bridge's layout, the rest in the last chunk
    case.model.layers = 61
    case.parallelism.pp, case.parallelism.vpp = 4, 4
    p = assert(cases.parallelism(case, frameworks.lookup("Megatron-Bridge (container 26.04)")))
    assert.are.same({ 16, 13 }, { p.first_layers, p.last_layers })
    -- not a Megatron run: the reader says nothing (fathom's own split)
    p = assert(cases.parallelism(case, frameworks.lookup("torchtitan 2025")))
    assert.is_nil(p.first_layers)
    -- a stated layout wins; a bad one is refused with its key
    case.parallelism.pipeline_model_parallel_layout = "Et*4|(tttt|)*14tmL"
    p = assert(cases.parallelism(case, frameworks.lookup("torchtitan 2025")))
    assert.are.same({ 16, 13 }, { p.first_layers, p.last_layers })
    case.parallelism.pipeline_model_parallel_layout = "Et*4|tmL"
    local bad, why = cases.parallelism(case, frameworks.lookup("Megatron-Bridge"))
    assert.is_nil(bad)
    assert.matches("pipeline_model_parallel_layout: 2 stages", why)
  end)
end)

describe("cases.recompute", function()
  it("reads per-op selective checkpointing as op, and a bare 'selective' as the framework's", function()
    assert.are.equal("op", cases.recompute("per-op selective activation checkpointing", "selective"))
    assert.are.equal("op", cases.recompute("selective (op) activation checkpointing", "none"))
    assert.are.equal("op", cases.recompute("op SAC"))
    -- torchtitan's "selective" mode is per-op unless a layer frequency is given
    local titan = require("fathom.frameworks").lookup("torchtitan 9dec370 (2024-12-26)").recompute
    assert.are.equal("op", titan)
    assert.are.equal("op", cases.recompute("selective activation checkpointing", titan))
    assert.are.equal("op", cases.recompute("not stated", titan))
    -- elsewhere it is Megatron's attention-core recomputation
    assert.are.equal("selective", cases.recompute("selective activation checkpointing", "none"))
    assert.are.equal("selective", cases.recompute("custom remat_policy (MaxText)", "selective"))
    assert.are.equal("full", cases.recompute("full activation checkpointing", titan))
    assert.are.equal("none", cases.recompute("none", titan))
  end)

  it("reads 'full' as a word and lets a leading 'none' decide before the detail", function()
    -- Megatron-Bridge 26.08's gpt-oss row: the helper's name holds "full_iter" (CUDA graphs)
    local s = "none (recompute_modules [] after _apply_gpt_oss_120b_full_iter_fp8mx_configs)"
    assert.are.equal("none", cases.recompute(s, "selective"))
    assert.are.equal("none", cases.recompute("off (activation_checkpointing: false in yaml)", "full"))
    assert.are.equal("full", cases.recompute("full (every layer, uniform)", "none"))
    assert.are.equal("none", cases.recompute("cuda graphs full_iteration", "none"))
    -- "offload" is not "off"
    assert.are.equal("full", cases.recompute("offloading with checkpoint", "none"))
  end)
end)

describe("frameworks: eager or compiled element-wise kernels", function()
  it("torchtitan runs eager unless the name says torch.compile; the others fused", function()
    assert.is_true(frameworks.lookup("torchtitan 9dec370 (2024-12-26), torch 1963fc8").eager_elementwise)
    assert.is_false(frameworks.lookup("torchtitan 9dec370 (2024-12-26), torch.compile").eager_elementwise)
    assert.is_false(frameworks.lookup("torchtitan 820504e; torch.compile").eager_elementwise)
    assert.is_false(frameworks.lookup("NeMo 24.09 container").eager_elementwise)
    local w = require("fathom.spec").train({ framework = "torchtitan 2025", global_batch_size = 8,
      micro_batch_size = 1, seq_length = 2048 })
    assert.is_true(w.eager_elementwise)
  end)

  it("writes a recipe's casts as the framework does: fused (TE), compiled or eager (torchtitan)", function()
    assert.are.equal("eager", frameworks.lookup("torchtitan 9dec370 (2024-12-26), torch 1963fc8").cast_kernels)
    assert.are.equal("compiled", frameworks.lookup("torchtitan 820504e; torch.compile").cast_kernels)
    assert.are.equal("fused", frameworks.lookup("NeMo 25.04 container").cast_kernels)
    assert.are.equal("fused", frameworks.lookup("Megatron-Bridge 0.2").cast_kernels)
    local w = require("fathom.spec").train({ framework = "torchtitan 2025, torch.compile", global_batch_size = 8,
      micro_batch_size = 1, seq_length = 2048, precision_recipe = "fp8_rowwise" })
    assert.are.equal("compiled", w.cast_kernels)
    assert.are.equal("fp8_rowwise", w.precision_recipe)
  end)

  it("refuses a cast implementation it does not know, naming the key", function()
    local ok, err = pcall(require("fathom.spec").train, { global_batch_size = 8, micro_batch_size = 1,
      seq_length = 2048, precision_recipe = "fp8_current", cast_kernels = "triton" })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("cast_kernels", 1, true))
  end)
end)

describe("a workload spec naming a framework", function()
  it("gets the framework's conventions for every key it leaves unset", function()
    local spec = require("fathom.spec")
    local w = spec.train({ framework = "Megatron-Core (NeMo 25.04)", global_batch_size = 8, micro_batch_size = 1,
      seq_length = 2048, flash_attention = false })
    assert.are.equal("ZERO1", w.dp_variant)          -- the distributed optimizer
    assert.are.equal(0.9, w.comp_comm_efficiency)
    assert.are.equal(2, w.gradient_float_size)        -- BF16 gradient buffer and reduction
    assert.is_false(w.flash_attention)               -- what the user wrote wins
    w = spec.train({ framework = "torchtitan 2025", global_batch_size = 8, micro_batch_size = 1, seq_length = 2048 })
    assert.are.equal("ZERO3", w.dp_variant)
    assert.are.equal("op", w.recompute)              -- torchtitan's per-op selective default
    local i = spec.infer({ framework = "vLLM", global_batch_size = 8, micro_batch_size = 8, seq_length = 512 },
      "prefill")
    assert.is_true(i.flash_attention)
  end)
end)

describe("fathom.calibration", function()
  local calibration = require("fathom.calibration")
  local doc = config.load_mapping("configs/hardware/hardware_library.yaml", "hardware library")
  local settings = calibration.from_library(doc, cases.gpus)
  local function comp(node) return doc.components.compute[doc.nodes[node].device_compute] end

  it("gives every GPU generation of the table a setting, derived where uncalibrated", function()
    for _, g in ipairs(cases.gpus) do
      for _, k in ipairs(calibration.kernel_generations) do
        local s, from = calibration.lookup(g.generation, k, settings)
        assert.is_truthy(s, g.generation .. "/" .. k)
        assert.is_string(from)
        assert.is_true(s.efficiency > 0 and s.efficiency <= 1)
      end
    end
    -- a kernel generation with no row takes the nearest one of its GPU generation
    assert.are.equal(select(2, calibration.lookup("blackwell", "2024", settings)), "blackwell/2025")
    -- without its own rows, a generation derives from its neighbour with the stated scale
    local s, from = calibration.lookup("cdna3", "2025", { hopper = settings.hopper })
    -- (CDNA 3: 0.75 of Hopper's fraction on MI300X's nominal peak, 1.304 of the peak at the
    -- 0.575 of its clock MI300X holds under a dense GEMM)
    assert.are.equal(settings.hopper["2025"].efficiency * 1.304, s.efficiency)
    assert.is_true(math.abs(s.efficiency * comp("MI300X").dense_clock_fraction
      - settings.hopper["2025"].efficiency * 0.75) < 1e-3)
    assert.is_truthy(from:find("derived"))
    -- a scale on some settings only: Blackwell Ultra's GEMMs at 1.25x Blackwell's fraction,
    -- its NVFP4 and attention fractions Blackwell's (the datasheet carries the FP4 gain)
    local bw = settings.blackwell["2025"]
    s, from = calibration.lookup("blackwell_ultra", "2025", { blackwell = settings.blackwell })
    assert.are.equal(bw.efficiency * 1.25, s.efficiency)
    assert.are.equal(bw.fp8_efficiency * 1.25, s.fp8_efficiency)
    assert.are.equal(bw.fp4_efficiency, s.fp4_efficiency)
    assert.are.equal(bw.attention_efficiency, s.attention_efficiency)
    assert.are.equal("blackwell_ultra (derived: blackwell/2025, efficiency x 1.25, fp8_efficiency x 1.25)", from)
    -- and the hardware library's values for B300/GB300 are written that way (3 decimals)
    for _, node in ipairs({ "B300", "GB300" }) do
      assert.is_true(math.abs(comp(node).efficiency - bw.efficiency * 1.25) < 5e-4, node)
      assert.is_true(math.abs(comp(node).fp8_efficiency - bw.fp8_efficiency * 1.25) < 5e-4, node)
      assert.are.equal(bw.fp4_efficiency, comp(node).fp4_efficiency)
    end
  end)

  it("models an NVL card as its SXM silicon under the NVL's power cap", function()
    -- H100 NVL (400 W) and H200 NVL (600 W) both quote 835 / 1,671 dense TFLOPS at a reference
    -- clock; the library gives them their SXM part's rates at 700 W and the NVL's TDP as a
    -- power cap, so the core holds (cap / 700)^(1/3) of the clocks: 0.830 and 0.950
    for nvl, sxm in pairs({ H100_NVL = "H100_SXM", H200_NVL = "H200_SXM" }) do
      local a, b = comp(nvl), comp(sxm)
      assert.are.equal(b.bf16_nominal, a.bf16_nominal, nvl)
      assert.are.equal(b.fp8_nominal, a.fp8_nominal, nvl)
      assert.are.equal(700, a.power_watts, nvl)
    end
    assert.are.equal(400, comp("H100_NVL").power_limit_watts)
    assert.are.equal(600, comp("H200_NVL").power_limit_watts)
    -- Dell's MLPerf v5.0 LoRA runs on 8 H200 NVL and 8 H200 SXM with the same layout (TP 1,
    -- CP 2, DP 4): the NVL step predicted (600/700)^(-1/3) = 1.05x slower on its compute
    local run = require("helpers").evaluate_case
    local step = {}
    for _, c in ipairs(require("fathom.validate").load({ "validation/mlperf_lora_cases.yaml" })) do
      if c.id == "mlperf50_llama2_70b_lora_dell_h200nvl_8" then step.nvl = run(c).step_time_s end
      if c.id == "mlperf50_llama2_70b_lora_dell_h200_8_xe9680" then step.sxm = run(c).step_time_s end
    end
    local ratio = step.nvl / step.sxm
    assert.is_true(ratio > 1.03 and ratio < 1.0526, ratio)
  end)

  it("holds B300 (HGX, 1,100 W) at 0.92 of its nominal clock: Nebius's identical 8B runs", function()
    -- MLPerf v5.1 Llama 3.1 8B, Nebius, 8 GPUs, the same layout and batch on B200 and B300:
    -- 455.95 and 394.18 ms a step, B300 1.157x faster (held-out file). GB300's 1.25x GEMM
    -- scale alone (fitted on GB300/GB200 pairs) makes it ~1.25x; B300's held clock brings it
    -- to within 3% (the 17 B300/B200 pairs' median predicted/measured ratio: 1.00)
    assert.are.equal(0.92, comp("B300").dense_clock_fraction)
    assert.is_nil(comp("GB300").dense_clock_fraction)
    local run = require("helpers").evaluate_case
    local step = {}
    for _, c in ipairs(require("fathom.validate").load({ "validation/mlperf_llama8b_cases.yaml" })) do
      if c.id == "mlperf51_llama31_8b_nebius_b200_8" or c.id == "mlperf51_llama31_8b_nebius_b300_8" then
        step[c.id:match("b%d00")] = run(c).step_time_s
      end
    end
    local ratio = step.b200 / step.b300
    assert.is_true(math.abs(ratio / (455.95 / 394.18) - 1) < 0.03, ratio)
  end)

  it("derives MI350X's held clock from MI355X's by the power law of AMD's MAF pair", function()
    -- MI300X (750 W) and MI325X (1,000 W), one silicon, hold 0.575 and 0.689 of 2.1 GHz under
    -- a dense GEMM: clock ~ power^e, e = ln(0.689 / 0.575) / ln(1000 / 750) = 0.629. MI350X is
    -- MI355X's silicon at 1,000 of 1,400 W, rated at 2.2 of 2.4 GHz: with MI355X at its rated
    -- clock it holds 2.4 x (1000/1400)^0.629 = 1.94 GHz, 0.883 of 2.2 (the library's 0.882
    -- rounds AMD's MHz: 1,447 / 1,207)
    local a, b = comp("MI300X"), comp("MI325X")
    local e = math.log(b.dense_clock_fraction / a.dense_clock_fraction) / math.log(b.power_watts / a.power_watts)
    assert.is_true(math.abs(e - 0.629) < 2e-3, e)
    local hi, lo = comp("MI355X"), comp("MI350X")
    local want = (hi.dense_clock_fraction or 1) * (hi.bf16_nominal / lo.bf16_nominal)
      * (lo.power_watts / hi.power_watts) ^ e
    assert.is_true(math.abs(want - 0.883) < 1e-3, want)
    assert.is_true(math.abs(lo.dense_clock_fraction - want) < 2e-3, lo.dense_clock_fraction)
    -- CDNA 4's BF16 and attention fractions are CDNA 3's of MI300X's nominal peak (x its 0.575)
    for _, k in ipairs({ "efficiency", "attention_efficiency" }) do
      assert.is_true(math.abs(hi[k] - a[k] * a.dense_clock_fraction) < 5e-4, k)
    end
  end)

  it("reads each generation's reference row from the hardware library, the same values search uses", function()
    assert.are.equal(comp("H100_SXM").efficiency, settings.hopper["2025"].efficiency)
    assert.are.equal(comp("H100_SXM").fp8_efficiency, settings.hopper["2025"].fp8_efficiency)
    assert.are.equal(comp("GB200").attention_efficiency, settings.blackwell["2025"].attention_efficiency)
    assert.are.equal(comp("A100_80GB_SXM").efficiency, settings.ampere["2023"].efficiency)
    -- other kernel libraries: the reference x the factor
    local f = calibration.factors.hopper.torch2025
    assert.is_true(math.abs(settings.hopper.torch2025.efficiency - comp("H100_SXM").efficiency * f.efficiency) < 1e-12)
    -- a generation derived from another (MI300X from Hopper) takes Hopper's factors on its own reference
    assert.is_true(math.abs(settings.cdna3.torch2025.efficiency - comp("MI300X").efficiency * f.efficiency) < 1e-12)
  end)

  it("one setting per GPU generation: every library node of a generation carries the same values", function()
    local seen = {}
    for _, g in ipairs(cases.gpus) do
      local c = comp(g.node)
      local row = {}
      for _, k in ipairs(calibration.keys) do
        -- fp8/fp4 fractions only where the part has the rate
        if not ((k == "fp8_efficiency" and (tonumber(c.fp8_nominal) or 0) == 0)
          or (k == "fp4_efficiency" and (tonumber(c.fp4_nominal) or 0) == 0)) then row[k] = c[k] end
      end
      assert.is_number(row.efficiency, g.node)
      assert.is_number(row.attention_efficiency, g.node)
      if (tonumber(c.fp8_nominal) or 0) > 0 then assert.is_number(row.fp8_efficiency, g.node) end
      local first = seen[g.generation]
      if first then
        for _, k in ipairs({ "efficiency", "attention_efficiency", "expert_gemm_overhead_sec" }) do
          assert.are.equal(first.row[k], row[k], g.node .. " vs " .. first.node .. ": " .. k)
        end
        if row.fp8_efficiency and first.row.fp8_efficiency then
          assert.are.equal(first.row.fp8_efficiency, row.fp8_efficiency, g.node .. ": fp8_efficiency")
        end
      else
        seen[g.generation] = { node = g.node, row = row }
      end
    end
  end)
end)

describe("framework versions", function()
  it("reads NeMo containers, MLPerf rounds and Megatron-Core releases", function()
    assert.are.equal("2025", frameworks.lookup("NVIDIA NeMo (MLPerf Training v5.0)").kernels)
    assert.are.equal("2024", frameworks.lookup("NVIDIA NeMo (MLPerf Training v4.1)").kernels)
    assert.are.equal("2025", frameworks.lookup("Megatron-LM core_r0.13").kernels)
    assert.are.equal("2024", frameworks.lookup("Megatron-Core 0.8").kernels)
    assert.are.equal("2021", frameworks.lookup("Megatron-LM (2021)").kernels)
    -- Korthikanti et al. 2022 ran the same Megatron-LM kernels, nothing hidden under compute
    local f = frameworks.lookup("Megatron-LM (2022)")
    assert.are.equal("Megatron-LM (2021)", f.name)
    assert.are.equal(0, f.comp_comm_efficiency)
  end)

  it("says that an MXFP6 recipe is costed at BF16, and maps MXFP4 to the FP4 rate", function()
    local p6 = cases.precision("MXFP6 (weights and activations)")
    assert.are.equal(2, p6.gemm_bytes)
    assert.matches("MXFP6", p6.note)
    assert.are.equal(0.5, cases.precision("MXFP4 linears, BF16 attention").gemm_bytes)
  end)

  it("reads NeMo / Megatron on ROCm as one 2025 kernel library, whatever date its container tag holds", function()
    -- a Linux release in a ROCm container tag is not a NeMo 22.04 container (it once picked
    -- NeMo's 2024 row for AMD's ROCm 7.0 LoRA runs and 2025's for its ROCm 7.0 pre-training)
    assert.is_nil(frameworks.version("rocm/pytorch:rocm7.0_ubuntu22.04_py3.10_pytorch_release_2.8.0"))
    assert.are.equal(24.09, (frameworks.version("NeMo 24.09 on ubuntu 22.04")))
    for _, name in ipairs({
      "AMD NeMo/Megatron-based LoRA implementation, container base image rocm/pytorch:rocm6.4_ubuntu22.04_py3.10",
      "MangoBoost LLMBoost 1.1.0 (AMD NeMo-based LoRA implementation, ROCm)",
      "NeMo 2.5.0rc0 (patched) on ROCm Megatron-LM and ROCm Transformer Engine (MLPerf Training v5.1)",
      "ROCm Megatron-LM", "AMD Primus (Megatron backend)" }) do
      local f = frameworks.lookup(name)
      assert.are.equal("NeMo / Megatron on ROCm", f.name, name)
      assert.are.equal("2025", f.kernels, name)
      assert.are.equal("ZERO1", f.dp_variant, name)
    end
    -- other engines on ROCm keep their own rows; NVIDIA's NeMo keeps its dated ones
    assert.are.equal("vllm2024", frameworks.lookup("vLLM (ROCm, 2024)").kernels)
    assert.are.equal("NeMo / Megatron-Core (2024)", frameworks.lookup("NeMo 24.04 container").name)
  end)

  it("reads Korthikanti et al. 2022's modes: full vs selective + sequence parallel", function()
    local list = config.load_mapping("validation/korthikanti2022_cases.yaml", "cases").cases
    assert.are.equal(8, #list)
    for _, c in ipairs(list) do
      local docs = assert(cases.training_docs(c))
      local w, seqsel = docs.workload, c.id:match("_seqsel$") ~= nil
      assert.are.equal(seqsel and "selective" or "full", w.recompute, c.id)
      assert.are.equal(seqsel, w.sequence_parallel, c.id)
      assert.is_false(w.flash_attention)
      local interleaved = c.id:find("_175B_") or c.id:find("_530B_")
      assert.are.equal(interleaved and "INTERLEAVED" or "1F1B", w.pp_spec.variant, c.id)
      assert.are.equal(interleaved and 3 or nil, w.pp_spec.virtual_stages, c.id)
      assert.are.equal(c.system.num_gpus, docs.parallel.tp * docs.parallel.pp * docs.parallel.dp)
    end
  end)
end)

describe("activation offloading as the case states it (Megatron-Core cpu_offloading_num_layers)", function()
  it("reads the blocks per stage from a count field or the recompute / kernels text", function()
    assert.are.equal(40, cases.activation_offload_layers({
      recompute = "not set (recipe default); activation CPU offloading of 40 layers (cpu_offloading_num_layers)" }))
    assert.are.equal(20, cases.activation_offload_layers({ kernels = "TE, cpu_offloading_num_layers: 20" }))
    assert.are.equal(8, cases.activation_offload_layers({ cpu_offloading_num_layers = 8 }))
    assert.is_nil(cases.activation_offload_layers({ recompute = "full, method block, 21 layers" }))
    assert.is_nil(cases.activation_offload_layers({ activation_cpu_offload = false }))
  end)

  it("keeps the offloaded blocks' activations in host memory: a measured FSDP run fits", function()
    local function case(recompute)
      return { id = "x", source = "s", workload = "training",
        model = { name = "Llama 3 70B", layers = 80, hidden = 8192, heads = 64, kv_heads = 8, head_dim = 128,
          ffn = 28672, vocab = 128256, arch = "Llama (GQA, RoPE, SwiGLU)" },
        system = { gpu = "NVIDIA GB200", gpu_memory_gb = 186, num_gpus = 64, gpus_per_node = 4,
          intra_node_interconnect = "NVL72" },
        parallelism = { tp = 1, pp = 1, dp = 64, cp = 1, micro_batch = 2, global_batch = 128, seq_len = 8192,
          fsdp = 64 },
        training = { precision = "FP8", framework = "Megatron-Bridge (container 26.04)", recompute = recompute,
          kernels = "Transformer Engine (Megatron-Core), Megatron-FSDP" },
        measured = { { metric = "tokens_per_sec_per_gpu", value = 1, unit = "tokens/s/GPU" } } }
    end
    local run = require("helpers").evaluate_case
    local kept = run(case("not set"))
    local off = run(case("not set; activation CPU offloading of 40 layers (cpu_offloading_num_layers)"))
    assert.is_false(kept.memory.fits)
    assert.is_true(off.memory.fits)
    -- 40 of 80 blocks leave: half the saved activations stay (two blocks pass through the transient)
    local a = kept.memory.components.saved_activations
    assert.is_true(math.abs(off.memory.components.saved_activations - a / 2) < 1e-6 * a)
    assert.is_true(off.offload_raw_s > 0 and off.step_time_s >= kept.step_time_s)
  end)
end)
