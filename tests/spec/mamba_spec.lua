-- Hybrid Mamba2-Transformer models (Nemotron-H): the model files accept a
-- hybrid_override_pattern and the Mamba2 dimensions, range-checked; estimate runs them.
local h = require("helpers")
local json = require("cjson")

local function model_file(body)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write("name: hybrid\nd_model: 256\nnum_heads: 4\nvocab_size: 1000\nffn_hidden_size: 1024\n" .. body)
  f:close()
  return path
end

local function estimate(model, ...)
  return h.run("estimate", "--model", model, "--hardware", "H100_SXM", "--gpus", "8", ...)
end

local function refused(r, pattern)
  assert.are.equal(2, r.code, r.stdout .. r.stderr)
  assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
  assert.matches(pattern, r.stderr)
end

describe("hybrid Mamba2 models", function()
  it("estimates Nemotron-H 56B from the model library", function()
    local r = estimate("nemotron_h_56b", "--tp", "8", "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local d = json.decode(r.stdout)
    assert.is_true(d.time.step_time_seconds > 0)
    assert.is_true(d.time.mfu > 0.2 and d.time.mfu < 0.8)
  end)

  it("costs the Mamba2 mixers: two of them in place of two MLPs make a slower step", function()
    local mam = model_file('n_layers: 4\nhybrid_override_pattern: "M-M-"\n')
    local mlp = model_file('n_layers: 4\nhybrid_override_pattern: "----"\n')
    local a = json.decode(estimate(mam, "--tp", "1", "--format", "json").stdout)
    local b = json.decode(estimate(mlp, "--tp", "1", "--format", "json").stdout)
    assert.is_true(a.time.step_time_seconds > b.time.step_time_seconds)
    os.remove(mam)
    os.remove(mlp)
  end)

  it("runs the SSD in Megatron-Core's MambaMixer chunks (128) unless the model names its own", function()
    local function step(extra)
      local path = model_file('n_layers: 4\nhybrid_override_pattern: "M-M-"\n' .. extra)
      local r = estimate(path, "--tp", "1", "--seq", "4096", "--format", "json")
      os.remove(path)
      assert.are.equal(0, r.code, r.stderr)
      return json.decode(r.stdout).time.step_time_seconds
    end
    local default, q128, q256 = step(""), step("mamba_chunk_size: 128\n"), step("mamba_chunk_size: 256\n")
    assert.are.equal(q128, default)
    assert.are_not.equal(q256, default)
    assert.are.equal(128, require("fathom.core").defaults.model.mamba_chunk_size)
  end)

  it("keeps the first and last sub-layers in BF16 under an FP8 recipe when the workload says so", function()
    local model = model_file('n_layers: 4\nhybrid_override_pattern: "M-M-"\n')
    local function run(extra, precision)
      local path = os.tmpname()
      local f = assert(io.open(path, "w"))
      f:write(assert(io.open("configs/train_specs/search_default.yaml")):read("a") .. extra)
      f:close()
      local r = estimate(model, "--tp", "1", "--workload", path, "--precision", precision, "--format", "json")
      os.remove(path)
      return r
    end
    local function step(r)
      assert.are.equal(0, r.code, r.stderr)
      return json.decode(r.stdout).time.step_time_seconds
    end
    local fp8 = step(run("", "fp8_current"))
    local edges = step(run("num_layers_at_start_in_bf16: 1\nnum_layers_at_end_in_bf16: 1\n", "fp8_current"))
    local bf16 = step(run("", "bf16"))
    -- two of the four sub-layers (one of the two blocks' worth) in BF16: half way from the
    -- FP8 step to the BF16 one (the head and loss run at the activation width in both)
    assert.is_true(math.abs(edges - (fp8 + bf16) / 2) < 1e-9 * bf16, string.format("%g %g %g", fp8, edges, bf16))
    refused(run("num_layers_at_end_in_bf16: 1\n", "bf16"), "num_layers_at_end_in_bf16.*precision_recipe")
    os.remove(model)
  end)

  it("routes tokens through the MoE sub-layers only (Nemotron 3's E): half of them, half the EP time", function()
    local moe = "num_regular_experts: 8\nnum_selected_experts: 2\nexpert_ffn_hidden_size: 256\n"
    local two = model_file('n_layers: 4\nhybrid_override_pattern: "ME*E"\n' .. moe)
    local one = model_file('n_layers: 4\nhybrid_override_pattern: "MM*E"\n' .. moe)
    local function ep(path)
      local r = estimate(path, "--tp", "1", "--ep", "8", "--format", "json")
      assert.are.equal(0, r.code, r.stderr)
      return json.decode(r.stdout).time.step_breakdown.exposed_ep_seconds
    end
    local a, b = ep(two), ep(one)
    assert.is_true(b > 0 and b < 0.75 * a, string.format("%g vs %g", b, a))
    os.remove(two)
    os.remove(one)
  end)

  it("refuses bad hybrids with file:line:col, the key and the reason", function()
    local cases = {
      { 'n_layers: 3\nhybrid_override_pattern: "M*E"\n',
        ":%d+:%d+: num_regular_experts: a hybrid has experts" },
      { 'n_layers: 3\nhybrid_override_pattern: "M-E"\nnum_regular_experts: 4\nnum_selected_experts: 2\n',
        ":%d+:%d+: hybrid_override_pattern: dense MLP %(%-%) and MoE %(E%) sub%-layers" },
      { 'n_layers: 3\nhybrid_override_pattern: "M-x"\n',
        ":%d+:%d+: hybrid_override_pattern: unknown sub%-layer 'x'" },
      { 'n_layers: 5\nhybrid_override_pattern: "M-*-"\n',
        ":%d+:%d+: n_layers: a hybrid's n_layers counts its sub%-layers: expected 4" },
      { 'n_layers: 2\nhybrid_override_pattern: "M-"\nmamba_num_groups: 3\n',
        ":%d+:%d+: mamba_num_groups: mamba_num_groups 3 does not divide" },
      { 'n_layers: 2\nhybrid_override_pattern: "M-"\nmamba_state_dim: 0\n', ":%d+:%d+: mamba_state_dim" },
    }
    for _, c in ipairs(cases) do
      local path = model_file(c[1])
      refused(estimate(path, "--tp", "1"), c[2])
      os.remove(path)
    end
  end)

  it("refuses a TP degree that does not divide the Mamba2 groups", function()
    local path = model_file('n_layers: 2\nhybrid_override_pattern: "M-"\nmamba_num_groups: 2\n')
    refused(estimate(path, "--tp", "4"), "does not divide mamba_num_groups = 2")
    os.remove(path)
  end)
end)
