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

  it("keeps what the case states, and leaves other models alone", function()
    local docs = assert(cases.training_docs(dsv3({ n_group = 1, topk_group = 1 })))
    assert.are.equal(1, docs.model.n_group)
    docs = assert(cases.training_docs(dsv3({ name = "Kimi K2 1T (32B active)", experts = 384 })))
    assert.is_nil(docs.model.n_group)
    docs = assert(cases.training_docs(dsv3({ top_k = 6 }))) -- not the published config
    assert.is_nil(docs.model.n_group)
  end)
end)
