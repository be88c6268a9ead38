-- fathom.spec: bad configuration files fail with file:line:col: path: reason, exit 2.
local h = require("helpers")
local spec = require("fathom.spec")

local T = "tests/fixtures/tiny/"

local function read(p)
  local f = assert(io.open(p))
  local s = f:read("a")
  f:close()
  return s
end

local function analyze_with(kind, text)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  local files = { hardware = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "logical.yaml",
    workload = T .. "train.yaml", model = T .. "model.yaml" }
  files[kind] = path
  local r = h.run("analyze", "--hardware-lib", files.hardware, "--physical-topology", files.physical,
    "--logical-topology", files.logical, "--workload-spec", files.workload, "--model-spec", files.model)
  os.remove(path)
  return r
end

describe("fathom.spec", function()
  local hw = read(T .. "hardware.yaml")
  local cases = {
    { "hardware", hw:gsub("bandwidth_nominal: 100.0e9", "bandwith_nominal: 100.0e9"),
      ":21:7: components%.interconnect%.toy_link%.bandwith_nominal: unknown key " ..
        "%(did you mean 'bandwidth_nominal'%?%)" },
    { "hardware", hw:gsub("      size_per_stack: 80.0e9\n", ""),
      "components%.memory%.toy_hbm%.size_per_stack: missing required key %(bytes%)" },
    { "hardware", hw:gsub("num_stack: 1\n      efficiency: 1.0", "num_stack: 0\n      efficiency: 1.0"),
      ":12:18: components%.memory%.toy_hbm%.num_stack: expected a value >= 1, got 0" },
    { "hardware", hw:gsub("device_compute: toy", "device_compute: toyy"),
      ":30:21: nodes%.TOY%.device_compute: unknown compute component 'toyy' %(did you mean 'toy'%?%)" },
    { "hardware", hw:gsub("efficiency: 1.0\n  memory", "efficiency: 1.5\n  memory"),
      ":7:19: components%.compute%.toy%.efficiency: expected a value <= 1, got 1.5" },
    { "physical", read(T .. "physical.yaml"):gsub("size: 2\n  %- name: out", "size: -2\n  - name: out"),
      ":7:11: dimensions%[1%]%.size: expected a value >= 1, got %-2" },
    { "physical", read(T .. "physical.yaml"):gsub("interconnect_name: scale_out", "interconnect_name: scale_outt"),
      "dimensions%[2%]%.interconnect_name: unknown interconnect of node 'TOY' 'scale_outt'" },
    { "logical", read(T .. "logical.yaml"):gsub("physical_dimension_name: out", "physical_dimension_name: ot"),
      "dimensions%[2%]%.maps_to_physical_dimension_name: unknown physical dimension 'ot' %(did you mean 'out'%?%)" },
    { "model", read(T .. "model.yaml"):gsub("d_model: 1024", "d_model: 0"),
      ":2:10: d_model: expected a value >= 1, got 0" },
    { "model", read(T .. "model.yaml"):gsub("num_heads: 16\n", "num_heads: 16\nnum_kv_heads: 5\n"),
      "num_kv_heads: num_heads 16 is not a multiple of num_kv_heads 5" },
    -- accepted values are the ones modelled: never checked and then ignored
    { "workload", "global_batch_size: 8\nmicro_batch_size: 1\nseq_length: 16\noptimizer: sgd\n",
      ":4:12: optimizer: expected adam or adamw, got 'sgd' %(fathom models mixed%-precision Adam's states " ..
        "and step; adamw costs the same, other optimizers are not modelled%)" },
    { "workload", "global_batch_size: 8\nmicro_batch_size: 1\nseq_length: 16\ntp_spec: {variant: SHARD_2D}\n",
      ":4:20: tp_spec%.variant: expected SHARD_WEIGHTS_1D, got 'SHARD_2D' %(fathom models Megatron's 1%-D" },
  }
  for i, c in ipairs(cases) do
    it(string.format("%s case %d", c[1], i), function()
      local r = analyze_with(c[1], c[2])
      assert.are.equal(2, r.code, r.stderr)
      assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
      assert.matches(c[3], r.stderr)
    end)
  end

  it("num_colocated_experts must agree with EP", function()
    local w = os.tmpname()
    local f = io.open(w, "w")
    f:write("global_batch_size: 8\nmicro_batch_size: 2\nseq_length: 1024\nmoe_spec_v2:\n  num_colocated_experts: 3\n")
    f:close()
    local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
      "--logical-topology", T .. "moe_logical.yaml", "--workload-spec", w, "--model-spec", T .. "moe_model.yaml")
    os.remove(w)
    assert.are.equal(2, r.code)
    assert.matches(":5:26: moe_spec_v2%.num_colocated_experts: 3 experts per XPU, but 16 experts over EP = 4 puts 4",
      r.stderr)
  end)

  it("train() normalises ScaleScope's nested specs", function()
    local w = spec.train(T .. "train.yaml")
    assert.are.equal("DDP", w.dp_variant)
    assert.are.equal("1F1B", w.pp_variant)
    assert.are.equal(1.0, w.expert_imbalance)
  end)
end)
