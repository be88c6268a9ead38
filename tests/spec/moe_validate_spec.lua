-- MoE in `fathom validate` (issue 15): the per-model table over the MoE training cases, and
-- the published routing configs a case of a known architecture runs with.
local cases = require("fathom.cases")
local validate = require("fathom.validate")
local h = require("helpers")

describe("validate's MoE table", function()
  it("groups MoE training cases by model, with every MoE case under one more row", function()
    local recs = {
      { id = "a", source = "s", workload = "training", moe = true, model = "M1", relative_error = 0.10, fits = true },
      { id = "b", source = "s", workload = "training", moe = true, model = "M1", relative_error = -0.30, fits = false },
      { id = "c", source = "s", workload = "training", moe = true, model = "M2", relative_error = 0.05, fits = true },
      { id = "d", source = "s", workload = "training", moe = false, model = "D", relative_error = 0.9, fits = true },
      { id = "e", source = "s", workload = "inference", moe = true, model = "M1", relative_error = 0.9 },
    }
    local t = validate.moe_summary(recs)
    assert.are.equal(2, t.M1.count)
    h.near(0.20, t.M1.median_abs_error, 1e-12, "median of 10% and 30%")
    assert.are.equal(1, t.M1.no_fit)
    assert.are.equal(1, t.M2.count)
    assert.is_nil(t.D) -- dense
    local all = t[validate.MOE_ALL]
    assert.are.equal(3, all.count) -- the serving record is not a training case
    h.near(0.10, all.median_abs_error, 1e-12, "median of 5%, 10%, 30%")
  end)
end)

describe("published routing configs (cases.routing_configs)", function()
  local function dsv3(extra)
    local mdl = { name = "DeepSeek-V3 671B (37B active)", layers = 61, hidden = 7168, heads = 128, head_dim = 128,
      ffn = 18432, vocab = 129280, experts = 256, shared_experts = 1, top_k = 8, expert_ffn = 2048, dense_layers = 3 }
    for k, v in pairs(extra or {}) do mdl[k] = v end
    return { id = "x", source = "s", workload = "training", model = mdl,
      system = { gpu = "NVIDIA H100 80GB HBM3", gpu_memory_gb = 80, num_gpus = 64, gpus_per_node = 8 },
      parallelism = { tp = 1, pp = 1, dp = 64, ep = 64, micro_batch = 1, global_batch = 64, seq_len = 4096 },
      training = { precision = "BF16", framework = "NeMo AutoModel", kernels = "TE + DeepEP" },
      measured = { { metric = "step_time_s", value = 1, unit = "s" } } }
  end

  it("gives DeepSeek-V3 its config's 8 groups, 4 a token, and says so", function()
    local docs = assert(cases.training_docs(dsv3()))
    assert.are.equal(8, docs.model.n_group)
    assert.are.equal(4, docs.model.topk_group)
    local noted = false
    for _, n in ipairs(docs.notes) do noted = noted or n:find("group%-limited routing from") ~= nil end
    assert.is_true(noted)
  end)

  it("trains DeepSeek-V3's published MTP layer where the framework's pretraining recipes do", function()
    local function mtp(extra, fw, task)
      local c = dsv3(extra)
      c.training.framework, c.training.task = fw, task
      local docs = assert(cases.training_docs(c))
      local noted = false
      for _, n in ipairs(docs.notes) do noted = noted or n:find("multi%-token%-prediction layer") ~= nil end
      return docs.model.num_nextn_predict_layers, noted
    end
    assert.are.same({ 1, true }, { mtp(nil, "NeMo 25.04.01 container") })
    assert.are.same({ 1, true }, { mtp(nil, "Megatron-Bridge (container 25.11)") })
    -- AutoModel's runs, a fine-tuning run and another model: none added
    assert.are.same({ nil, false }, { mtp(nil, "NeMo AutoModel") })
    assert.are.same({ nil, false }, { mtp(nil, "NeMo 25.04.01 container", "SFT fine-tuning") })
    assert.are.same({ nil, false }, { mtp({ name = "Kimi K2 1T (32B active)", experts = 384 }, "NeMo 25.04") })
    -- what the case states stands, 0 included
    assert.are.same({ nil, false }, { mtp({ mtp_layers = 0 }, "NeMo 25.04.01 container") })
    assert.are.same({ 2, false }, { mtp({ mtp_num_layers = 2 }, "NeMo 25.04.01 container") })
  end)

  it("keeps what the case states, and leaves other models alone", function()
    local docs = assert(cases.training_docs(dsv3({ n_group = 1, topk_group = 1 })))
    assert.are.equal(1, docs.model.n_group)
    docs = assert(cases.training_docs(dsv3({ name = "Kimi K2 1T (32B active)", experts = 384 })))
    assert.is_nil(docs.model.n_group)
    docs = assert(cases.training_docs(dsv3({ top_k = 6 }))) -- not the published config
    assert.is_nil(docs.model.n_group)
  end)
end)

describe("the EP dispatcher and FSDP2's gathers as the framework runs them", function()
  local function case(par, fw, kernels)
    local p = { tp = 1, pp = 4, dp = 16, ep = 16, micro_batch = 1, global_batch = 512, seq_len = 4096,
      fsdp = 16, local_batch = 8 }
    for k, v in pairs(par or {}) do p[k] = v end
    return { id = "x", source = "s", workload = "training",
      model = { name = "Kimi K2 1T (32B active)", layers = 61, hidden = 7168, heads = 64, head_dim = 128, ffn = 18432,
        vocab = 163840, experts = 384, shared_experts = 1, top_k = 8, expert_ffn = 2048, dense_layers = 1 },
      system = { gpu = "NVIDIA H100 80GB HBM3", gpu_memory_gb = 80, num_gpus = 64, gpus_per_node = 8 },
      parallelism = p,
      training = { precision = "BF16", framework = fw or "NeMo AutoModel", kernels = kernels },
      measured = { { metric = "step_time_s", value = 1, unit = "s" } } }
  end

  it("dispatches per node under DeepEP, one copy per expert under NCCL's all-to-all", function()
    assert.is_true(assert(cases.training_docs(case())).workload.ep_dispatch_per_node)
    assert.is_false(assert(cases.training_docs(case(nil, "Megatron-Bridge 25.09"))).workload.ep_dispatch_per_node)
    assert.is_true(assert(cases.training_docs(case(nil, "Megatron-Bridge 25.09", "TE + DeepEP")))
      .workload.ep_dispatch_per_node)
  end)

  it("gives a DeepEP or HybridEP dispatcher the SMs it holds while it runs", function()
    local frameworks = require("fathom.frameworks")
    local bridge = frameworks.lookup("Megatron-Bridge 26.04")
    -- Megatron-Bridge's recipes give HybridEP 32 SMs; DeepEP's default is 20; a stated count wins
    assert.are.equal(32, frameworks.ep_comm_units("TE, hybridep flex dispatcher", bridge))
    assert.are.equal(20, frameworks.ep_comm_units("TE, deepep flex dispatcher", bridge))
    assert.are.equal(24, frameworks.ep_comm_units("TE, hybridep flex dispatcher (24 SMs)", bridge))
    assert.are.equal(20, frameworks.ep_comm_units("HybridEP", nil))
    assert.is_nil(frameworks.ep_comm_units("TE, alltoall dispatcher", bridge))
    -- AutoModel dispatches with DeepEP whatever its kernels string says
    assert.are.equal(20, assert(cases.training_docs(case())).workload.ep_comm_compute_units)
    assert.are.equal(32, assert(cases.training_docs(case(nil, "Megatron-Bridge 26.04", "TE, hybridep flex dispatcher")))
      .workload.ep_comm_compute_units)
    assert.is_nil(assert(cases.training_docs(case(nil, "Megatron-Bridge 25.09"))).workload.ep_comm_compute_units)
  end)

  it("gathers ZeRO-3 weights once per schedule run of local_batch / micro_batch under FSDP2 + PP", function()
    -- 512 / (1 x 16) = 32 micro-batches a step, in runs of the local batch 8: 4 gathers
    local w = assert(cases.training_docs(case())).workload
    assert.are.equal(8, w.dp_spec.zero3_microbatches_per_gather)
    -- no local batch: one run of the whole step's 32
    w = assert(cases.training_docs(case({ local_batch = false }))).workload
    assert.are.equal(32, w.dp_spec.zero3_microbatches_per_gather)
    -- no pipeline, or a framework that gathers per micro-batch: unset (one each)
    assert.is_nil(assert(cases.training_docs(case({ pp = 1, dp = 64, fsdp = 64, ep = 64 }))).workload.dp_spec
      .zero3_microbatches_per_gather)
    assert.is_nil(assert(cases.training_docs(case(nil, "LLM Foundry"))).workload.dp_spec
      .zero3_microbatches_per_gather)
  end)

  it("fills and drains the pipeline once per schedule run, a bubble each", function()
    -- the same runs of 8 of the step's 32 micro-batches: 4 runs, 4 bubbles of one run's size
    local run = assert(cases.training_docs(case())).workload
    assert.are.equal(8, run.pp_spec.microbatches_per_run)
    local whole = case({ local_batch = false })
    assert.are.equal(32, assert(cases.training_docs(whole)).workload.pp_spec.microbatches_per_run)
    -- Megatron-Core runs the step's micro-batches in one schedule: unset
    assert.is_nil(assert(cases.training_docs(case(nil, "Megatron-Bridge 25.09"))).workload.pp_spec
      .microbatches_per_run)
    local a, b = h.evaluate_case(case()), h.evaluate_case(whole)
    assert.is_true(b.bubble_s > 0)
    h.near(4 * b.bubble_s, a.bubble_s, 1e-9, "four runs, four bubbles")
    local ok, err = pcall(require("fathom.spec").train, { global_batch_size = 8, micro_batch_size = 1,
      seq_length = 128, pp_spec = { microbatches_per_run = -1 } })
    assert.is_false(ok)
    assert.matches("pp_spec.microbatches_per_run", tostring(err))
  end)

  it("refuses a gather shared by fewer than one micro-batch, naming the key", function()
    local spec = require("fathom.spec")
    local ok, err = pcall(spec.train, { global_batch_size = 8, micro_batch_size = 1, seq_length = 128,
      dp_spec = { variant = "ZERO3", zero3_microbatches_per_gather = 0 } })
    assert.is_false(ok)
    assert.matches("dp_spec.zero3_microbatches_per_gather", tostring(err))
  end)
end)

describe("the host issuing an eager framework's operators (fth_host.h)", function()
  local frameworks = require("fathom.frameworks")
  local function case(fw, kernels, notes, gpu)
    return { id = "x", source = "s", workload = "training", notes = notes,
      model = { name = "Qwen3-30B-A3B", layers = 48, hidden = 2048, heads = 32, kv_heads = 4, head_dim = 128,
        vocab = 151936, experts = 128, top_k = 8, expert_ffn = 768, shared_experts = 0 },
      system = { gpu = gpu or "NVIDIA H100 80GB HBM3", gpu_memory_gb = 80, num_gpus = 16, gpus_per_node = 8 },
      parallelism = { tp = 1, pp = 1, dp = 16, ep = 16, micro_batch = 1, global_batch = 1024, seq_len = 4096 },
      training = { precision = "FP8", framework = fw, kernels = kernels },
      measured = { { metric = "tokens_per_sec_per_gpu", value = 1, unit = "tokens/s/GPU" } } }
  end

  it("reads the CUDA-graph scope as the kernels string or the notes state it", function()
    assert.is_nil(frameworks.cuda_graph_scope("Transformer Engine (Megatron-Core), hybridep flex dispatcher"))
    assert.are.same({ "full_iteration" },
      frameworks.cuda_graph_scope("TE, A2A overlap (moe_a2a_overlap), CUDA graphs full_iteration"))
    assert.are.same({ "full_iteration" }, frameworks.cuda_graph_scope("TE + HybridEP, full-iteration CUDA graph"))
    assert.are.same({ "attn", "moe_router", "moe_preprocess" }, frameworks.cuda_graph_scope(
      "TE, CUDA graphs transformer_engine scope ['attn', 'moe_router', 'moe_preprocess']"))
    assert.are.same({ "moe_router", "moe_preprocess" },
      frameworks.cuda_graph_scope("CUDA graphs transformer_engine scope ['moe_router', 'moe_preprocess']"))
    assert.are.same({ "attn", "mlp" }, frameworks.cuda_graph_scope("CUDA graphs: yes (LAYER_CUDA_GRAPH=1, per-layer)"))
    assert.are.same({}, frameworks.cuda_graph_scope("CUDA graphs: no (no CUDA-graph knobs set)"))
  end)

  it("refuses a scope it does not know and a host time out of range, naming the key", function()
    local spec = require("fathom.spec")
    local ok, err = pcall(spec.train, { global_batch_size = 8, micro_batch_size = 1, seq_length = 128,
      cuda_graph_scope = { "attn", "everything" } })
    assert.is_false(ok)
    assert.matches("cuda_graph_scope%[2%]", tostring(err))
    ok, err = pcall(spec.train, { global_batch_size = 8, micro_batch_size = 1, seq_length = 128, host_op_sec = 0.5 })
    assert.is_false(ok)
    assert.matches("host_op_sec", tostring(err))
    -- the SMs an EP dispatcher holds and the sink attention's rate share, range-checked too
    ok, err = pcall(spec.train, { global_batch_size = 8, micro_batch_size = 1, seq_length = 128,
      ep_comm_compute_units = -3 })
    assert.is_false(ok)
    assert.matches("ep_comm_compute_units", tostring(err))
    ok, err = pcall(spec.train, { global_batch_size = 8, micro_batch_size = 1, seq_length = 128,
      attention_sink_rate_share = 2 })
    assert.is_false(ok)
    assert.matches("attention_sink_rate_share", tostring(err))
  end)

  it("gives the Megatron-Core family its host time per operator, and the scope the case states", function()
    local w = assert(cases.training_docs(case("Megatron-Bridge (container 26.04)", "TE, hybridep flex dispatcher")))
      .workload
    assert.are.equal(35e-6, w.host_op_sec)
    assert.is_nil(w.cuda_graph_scope)
    w = assert(cases.training_docs(case("Megatron-Bridge 26.06", "TE, CUDA graphs full_iteration"))).workload
    assert.are.same({ "full_iteration" }, w.cuda_graph_scope)
    w = assert(cases.training_docs(case("NeMo 25.04", "TE", "MLPerf config. CUDA graphs: no (not set)"))).workload
    assert.are.same({}, w.cuda_graph_scope)
    -- 25.09's per-layer graphs of whole token-dropping layers, as the case file states them
    w = assert(cases.training_docs(case("Megatron-Bridge 25.09",
      "TE, CUDA graphs scope ['attn', 'mlp', 'moe'] (cuda_graphs true)"))).workload
    assert.are.same({ "attn", "mlp", "moe" }, w.cuda_graph_scope)
    -- frameworks without the model (PyTorch-native, serving engines) leave it at 0
    assert.are.equal(0, assert(cases.training_docs(case("torchtitan 2025"))).workload.host_op_sec)
    assert.are.equal(35e-6, frameworks.workload_defaults("Megatron-Bridge").host_op_sec)
  end)

  it("ships the host time, Grace's factor and Blackwell's cost per expert the Megatron-Bridge rows fit", function()
    -- validation/fit_megatron_bridge.lua: a joint grid of host times x Grace factors x
    -- costs per expert under an FP8/FP4 recipe over the rows, each release and each model left out in
    -- turn; the shipped triple must be the fit's, and the releases left out pick its host time
    -- or the grid's next one down (25.11 and 26.02 pick 30 us since NCCL's all-to-all runs at
    -- ep_a2a_scale_out_efficiency of InfiniBand's rate: their H100 Qwen3-235B rows no longer
    -- ask the host to slow them), most of them its own
    local r = h.run("validation/fit_megatron_bridge.lua")
    assert.are.equal(0, r.code, r.stderr)
    local us, g, xs = r.stdout:match("best over all rows: (%d+) us an operator, Grace ([%d.]+), (%d+) us an expert")
    assert.are.equal(frameworks.workload_defaults("Megatron-Bridge").host_op_sec, tonumber(us) * 1e-6)
    local lib = require("fathom.validate").state().lib_doc
    assert.are.equal(lib.nodes.GB200.host_op_time_factor, tonumber(g))
    assert.are.equal(lib.nodes.GB300.host_op_time_factor, tonumber(g))
    for _, c in ipairs({ "b200", "gb200", "b300", "gb300" }) do
      assert.are.equal(tonumber(xs) * 1e-6, lib.components.compute[c].expert_recipe_overhead_sec)
    end
    -- Hopper pays none: its FP8 MoE rows are host-bound or hold few experts, and do not
    -- tell 0 from 32 us apart
    assert.is_nil(lib.components.compute.h100_sxm.expert_recipe_overhead_sec)
    local folds, same = 0, 0
    for line in r.stdout:gmatch("megatron_bridge_[^\n]+") do
      local fold_us = tonumber(line:match("(%d+) us, Grace "))
      assert.is_true(fold_us == tonumber(us) or fold_us == tonumber(us) - 5, line)
      if fold_us == tonumber(us) then same = same + 1 end
      folds = folds + 1
    end
    assert.is_true(folds >= 9)
    assert.is_true(same >= folds - 2, string.format("%d of %d folds pick %s us", same, folds, us))
    -- the fit beats the settings before any of it was fitted
    local fit, before = r.stdout:match("mean |log error| ([%d.]+); ([%d.]+) at")
    assert.is_true(tonumber(fit) < tonumber(before))
  end)

  it("ships the share of InfiniBand's rate NCCL's EP all-to-all reaches that the runs crossing it fit", function()
    -- validation/fit_ep_a2a.lua: a grid of shares over the visible and Megatron-Bridge rows whose
    -- EP all-to-all runs through NCCL across the scale-out network; the shipped default must be
    -- the fit's, every source left out must pick it, and it must beat the full rate (1.0)
    local r = h.run("validation/fit_ep_a2a.lua")
    assert.are.equal(0, r.code, r.stderr)
    local n = tonumber(r.stdout:match("(%d+) training rows move"))
    assert.is_true(n >= 12, r.stdout)
    local share = tonumber(r.stdout:match("best over them: ([%d.]+)"))
    assert.are.equal(require("fathom.core").defaults.train.ep_a2a_scale_out_efficiency, share)
    local folds = 0
    for name, _, pick in r.stdout:gmatch("\n([%w_.]+) +(%d+) +([%d.]+) +[%d.]+%%") do
      assert.are.equal(share, tonumber(pick), name)
      folds = folds + 1
    end
    assert.is_true(folds >= 5, r.stdout)
    local fit, full = r.stdout:match("mean |error| ([%d.]+)%% there, ([%d.]+)%% at 1.00")
    assert.is_true(tonumber(fit) < tonumber(full))
    -- the visible source, left out, is predicted better by the share the others fit
    local vis, vis1 = r.stdout:match("\ndgxc_benchmarking +%d+ +[%d.]+ +([%d.]+)%% +([%d.]+)%%")
    assert.is_true(tonumber(vis) < tonumber(vis1))
  end)

  it("prices an FP8/FP4 recipe's cost per expert unless the experts run as one fused kernel", function()
    local run = h.evaluate_case
    -- Qwen3-30B-A3B on 8 B200 (16 local experts at EP 8), MXFP8, everything graphed: the
    -- cost per expert adds 32 us x 16 experts x 2 GEMMs (fc1, fc2) x 48 layers = 49.152 ms to
    -- a forward pass and twice that to a backward (data and weight gradients)
    local function b200(kernels, precision)
      local c = case("Megatron-Bridge 26.04", kernels, nil, "NVIDIA B200")
      c.system.num_gpus, c.parallelism.dp, c.parallelism.ep = 8, 8, 8
      c.training.precision = precision or "MXFP8"
      return c
    end
    local lib = require("fathom.validate").state().lib_doc
    local x = lib.components.compute.b200.expert_recipe_overhead_sec
    assert.is_true(x > 0)
    local looped = run(b200("TE, CUDA graphs full_iteration"))
    local fused = run(b200("TE, CUDA graphs full_iteration, TE fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP)"))
    h.near(x * 16 * 2 * 48, looped.fwd_s - fused.fwd_s, 1e-9, "forward: the cost per expert")
    h.near(2 * x * 16 * 2 * 48, looped.bwd_s - fused.bwd_s, 1e-9, "backward: twice it")
    -- per-tensor FP8 scaling pays it too (each expert's own amax and cast), BF16 does not
    local cs = run(b200("TE, CUDA graphs full_iteration", "FP8"))
    local cs_fused = run(b200("TE, CUDA graphs full_iteration, fused grouped MLP", "FP8"))
    h.near(x * 16 * 2 * 48, cs.fwd_s - cs_fused.fwd_s, 1e-9, "FP8 current scaling: the same")
    local bf = run(b200("TE, CUDA graphs full_iteration", "BF16"))
    local bf_fused = run(b200("TE, CUDA graphs full_iteration, fused grouped MLP", "BF16"))
    assert.are.equal(bf.fwd_s, bf_fused.fwd_s)
    -- the case reader: the kernels string names it, else the framework's default (none)
    assert.is_true(assert(cases.training_docs(b200("TE, cutedsl fused grouped MLP"))).workload.grouped_expert_kernel)
    assert.is_false(assert(cases.training_docs(b200("TE"))).workload.grouped_expert_kernel)
    -- a workload spec must say it as a boolean
    local ok, err = pcall(require("fathom.spec").train, { global_batch_size = 8, micro_batch_size = 1,
      seq_length = 128, grouped_expert_kernel = "yes" })
    assert.is_false(ok)
    assert.matches("grouped_expert_kernel", tostring(err))
  end)

  it("makes a small-expert eager run host-bound, on Grace at its factor, and CUDA graphs remove it", function()
    local run = h.evaluate_case
    -- H100 (x86 host, 35 us an operator): a layer's forward issues 95 operators (attention
    -- 16 + 2 FP8 casts, router 31, preprocess 10, experts 4 + 2 GEMMs x (1 + 1 cast) x 8 local
    -- experts at EP 16), its backward twice as many. 48 layers: 48 x 95 x 35 us = 0.1596 s a
    -- forward pass, under the GPU's ~0.22 s with its exposed all-to-all; 0.3192 s a backward,
    -- above the GPU's ~0.27 s: the backward is host-bound
    local eager = run(case("Megatron-Bridge 26.04", "TE"))
    assert.is_true(eager.fwd_s > 48 * 95 * 35e-6)
    h.near(2 * 48 * 95 * 35e-6, eager.bwd_s, 1e-9, "backward pass = its host time")
    assert.is_true(eager.host_wait_s > 0)
    -- whole layers captured (25.09's per-layer graphs of token-dropping layers): no host wait,
    -- and the step is the eager one less that wait
    local layer = run(case("Megatron-Bridge 25.09", "TE, CUDA graphs scope ['attn', 'mlp', 'moe']"))
    assert.are.equal(0, layer.host_wait_s)
    assert.is_true(math.abs(eager.step_time_s - eager.host_wait_s - layer.step_time_s) < 1e-9 * layer.step_time_s)
    -- router and preprocess captured: the 54 operators of attention and experts are left,
    -- 2 x 48 x 54 x 35 us = 0.181 s a backward pass, under the GPU's: the host keeps ahead
    local partial = run(case("Megatron-Bridge 26.04", "TE, CUDA graphs scope ['moe_router', 'moe_preprocess']"))
    assert.are.equal(0, partial.host_wait_s)
    -- GB200: Grace issues each at the library's factor f (fitted: 1.0): 48 x 95 x 35 f us a
    -- forward pass, above the GPU's there
    local f = require("fathom.validate").state().lib_doc.nodes.GB200.host_op_time_factor
    local function gb(kernels)
      local c = case("Megatron-Bridge 26.04", kernels, nil, "NVIDIA GB200")
      c.system.gpus_per_node = 4
      c.system.intra_node_interconnect = "NVL72"
      return c
    end
    local grace = run(gb("TE"))
    local graphed = run(gb("TE, CUDA graphs full_iteration"))
    h.near(48 * 95 * 35e-6 * f, grace.fwd_s, 1e-9, "Grace's forward pass = its host time")
    h.near(2 * 48 * 95 * 35e-6 * f, grace.bwd_s, 1e-9, "and its backward")
    assert.is_true(grace.host_wait_s > 0.5 * grace.step_time_s)
    assert.are.equal(0, graphed.host_wait_s)
    assert.is_true(math.abs(grace.step_time_s - grace.host_wait_s - graphed.step_time_s) < 1e-9 * graphed.step_time_s)
  end)
end)

describe("attention sinks as the framework's kernel runs them", function()
  local function case(fw)
    return { id = "x", source = "s", workload = "training",
      model = { name = "gpt-oss-120b", arch = "GPT-OSS (alternating 128-token sliding-window / full attention, GQA, "
        .. "attention sinks, SwiGLU experts)", layers = 36, hidden = 2880, heads = 64, kv_heads = 8, head_dim = 64,
        vocab = 201088, experts = 128, top_k = 4, expert_ffn = 2880, shared_experts = 0 },
      system = { gpu = "NVIDIA H100 80GB HBM3", gpu_memory_gb = 80, num_gpus = 64, gpus_per_node = 8 },
      parallelism = { tp = 1, pp = 4, dp = 16, ep = 8, micro_batch = 1, global_batch = 1280, seq_len = 4096 },
      training = { precision = "BF16", framework = fw },
      measured = { { metric = "tokens_per_sec_per_gpu", value = 1, unit = "tokens/s/GPU" } } }
  end

  it("reads the sinks from the arch, and Transformer Engine's rate share from the framework", function()
    local docs = assert(cases.training_docs(case("Megatron-Bridge (container 26.04)")))
    assert.is_true(docs.model.attention_sinks)
    assert.are.equal(128, docs.model.attention_window)
    assert.are.equal(0.1, docs.workload.attention_sink_rate_share)
    -- AutoModel's FlexAttention: no such cost (its visible gpt-oss runs do not show one)
    assert.are.equal(0, assert(cases.training_docs(case("NeMo AutoModel"))).workload.attention_sink_rate_share)
    local plain = case("Megatron-Bridge 26.04")
    plain.model.arch = "GPT (sliding window 128, alternating)"
    assert.is_nil(assert(cases.training_docs(plain)).model.attention_sinks)
  end)

  it("slows the attention core of a sink model under Megatron, nothing else", function()
    local mb = h.evaluate_case(case("Megatron-Bridge 26.04"))
    local plain = case("Megatron-Bridge 26.04")
    plain.model.arch = "GPT-OSS (alternating 128-token sliding-window / full attention, GQA, SwiGLU experts)"
    local base = h.evaluate_case(plain)
    -- the GEMMs are the same; the attention kernels take longer: the whole causal square (the
    -- windowed half of the layers computed whole, 2,048.5 keys against 0.5 x (2,048.5 + ~128))
    -- at a tenth of the fused rate: 10 x 2,048.5 / 1,088 = 18.8x at most, 18.0x with the
    -- memory-bound share the window's kernels had
    local f, fb = mb.per_microbatch.forward_classes, base.per_microbatch.forward_classes
    h.near(fb.gemm, f.gemm, 1e-12, "GEMMs")
    assert.is_true(f.attention > 15 * fb.attention and f.attention < 19 * fb.attention)
    assert.is_true(mb.step_time_s > 1.2 * base.step_time_s)
  end)
end)

describe("MLA's attention on Blackwell before Transformer Engine 2.5", function()
  local function dgxc_gb200()
    return h.case("validation/modern_cases.yaml", "dgxc2505_deepseek_v3_BF16_gb200_128gpu")
  end

  it("runs NeMo 25.04's DeepSeek-V3 on GB200 unfused, and says so", function()
    local case = assert(dgxc_gb200())
    local docs = assert(cases.training_docs(case))
    assert.is_false(docs.workload.flash_attention)
    local noted = false
    for _, n in ipairs(docs.notes) do noted = noted or n:find("attention unfused") ~= nil end
    assert.is_true(noted)
    -- the recipe's core-attention recomputation (NeMo v2.3.0's GB200 table) is read as selective,
    -- and its pretrain_recipe()'s one multi-token-prediction layer, on the last stage (14 + MTP)
    assert.are.equal("selective", docs.workload.recompute)
    assert.are.equal(1, docs.model.num_nextn_predict_layers)
    assert.are.equal(14, docs.workload.pp_spec.num_layers_in_last_pipeline_stage)
    -- the same script's MegatronCommOverlapCallback turns TP overlap off on every GPU
    assert.is_false(docs.workload.tp_comm_overlap)
  end)

  it("pays at least the score matrix's traffic over the same run fused", function()
    local case = assert(dgxc_gb200())
    local unfused = h.evaluate_case(case)
    case.training.framework = "NeMo 25.07 container"
    local fused = h.evaluate_case(case)
    -- By hand, a lower bound on what the unfused attention adds: the busiest stage holds 16 of
    -- the 61 layers (15 / 16 / 16 / 14), 1,024 sequences / DP 16 = 64 micro-batches, and a layer
    -- computes the whole score matrix of 128 / TP 2 = 64 heads x 4,096 x 4,096 = 1.07e9 scores.
    -- Each score is at least written by QK^T and read by PV forward (2 + 2 bytes in BF16), again
    -- in the recomputation, and its probability read and gradient written backward: 12 bytes.
    -- 12 x 1.07e9 x 16 x 64 = 13.2 TB at GB200's 8 TB/s nominal: 1.65 s at the least.
    local bound = 12 * 64 * 4096 * 4096 * 16 * 64 / 8e12
    h.near(1.649, bound, 1e-3, "the hand bound")
    assert.is_true(unfused.step_time_s - fused.step_time_s > bound)
    -- and the GEMMs are the same kernels either way
    h.near(fused.per_microbatch.forward_classes.gemm, unfused.per_microbatch.forward_classes.gemm, 1e-9, "GEMMs")
  end)
end)

describe("AutoModel's gpt-oss-20b row as its benchmark yaml ran it", function()
  it("checkpoints every block, as gptoss_20b_te_deepep.yaml did when the row was published", function()
    local case = h.case("validation/modern_cases.yaml", "automodel_gpt_oss_20b_bf16_h100_8gpu")
    local docs = assert(cases.training_docs(case))
    assert.are.equal("full", docs.workload.recompute)
    -- the re-run forward is paid: without it the step is shorter by at least the GEMMs of one
    -- forward pass a micro-batch (the recomputation re-runs every linear of the block)
    local with = h.evaluate_case(case)
    case.training.recompute = "none"
    local without = h.evaluate_case(case)
    assert.is_true(with.recompute_s > 0 and without.recompute_s == 0)
    local fwd_gemm = without.per_microbatch.forward_classes.gemm * without.microbatches
    assert.is_true(with.step_time_s - without.step_time_s >= fwd_gemm)
  end)
end)
