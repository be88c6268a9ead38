-- ScaleScope MoE keys that used to be accepted and ignored now have a meaning
-- or are refused with the file position (issue: inputs checked and ignored).
local h = require("helpers")

local function tmpcopy(src, from, to)
  local f = assert(io.open(src, "rb"))
  local text = f:read("a")
  f:close()
  local out = os.tmpname() .. ".yaml"
  local replaced, n = text:gsub(from, to)
  assert(n == 1, "pattern not found in " .. src)
  local g = assert(io.open(out, "wb"))
  g:write(replaced)
  g:close()
  return out
end

local hoti = "configs/topology_zoo/physical/hot_interconnects_2025/passage_physical_32768.yaml"
local function analyze(phys, work)
  return h.run("analyze", "--hardware-lib", "configs/hardware_specs/hardware_library.yaml",
    "--physical-topology", phys,
    "--logical-topology",
    "configs/topology_zoo/logical/hot_interconnects_2025/passage_logical_config_4__256_experts.yaml",
    "--workload-spec", work,
    "--model-spec", "configs/model_zoo/hot_interconnects_2025/gpt_moe_config_4__256_experts.yaml")
end
local train = "configs/train_specs/hot_interconnects_2025/train_spec.yaml"

describe("expert_high_bandwidth_group_size_xpus", function()
  it("is the EP group with scale-up bandwidth: it must equal EP_SU (64 here)", function()
    local key = "\nnode_definition_ref:"
    local bad = tmpcopy(hoti, key, "\nexpert_high_bandwidth_group_size_xpus: 128" .. key)
    local r = analyze(bad, train)
    assert.are.equal(2, r.code)
    assert.matches(":%d+:%d+: expert_high_bandwidth_group_size_xpus: the EP group with scale%-up "
      .. "bandwidth is 128 GPUs but the logical topology's EP_SU is 64", r.stderr)
    assert.are.equal(1, h.count_lines(r.stderr))
    os.remove(bad)
    local good = tmpcopy(hoti, key, "\nexpert_high_bandwidth_group_size_xpus: 64" .. key)
    r = analyze(good, train)
    assert.are.equal(0, r.code)
    os.remove(good)
  end)
end)

describe("moe_spec_v2.shared_expert_copies", function()
  it("is refused unless null, with its position and why", function()
    local bad = tmpcopy(train, "shared_expert_copies: null", "shared_expert_copies: 2")
    local r = analyze(hoti, bad)
    assert.are.equal(2, r.code)
    assert.matches(":46:%d+: moe_spec_v2.shared_expert_copies: not modelled: fathom keeps each shared expert", r.stderr)
    os.remove(bad)
  end)
end)
