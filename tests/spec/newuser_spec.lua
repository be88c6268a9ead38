-- Issue 17's new-user findings (what a fresh user ran into), one check each: each failed
-- before its fix and passes after.
local h = require("helpers")
local json = require("cjson")
local fathom = require("fathom")

local function refusal(r, pattern)
  assert.are.equal(2, r.code, r.stdout .. r.stderr)
  assert.are.equal("", r.stdout)
  assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
  assert.matches(pattern, r.stderr)
end

local EST = { "estimate", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--gpus", "64", "--tp", "8",
  "--pp", "2" }
local function est(...)
  local a = {}
  for _, x in ipairs(EST) do a[#a + 1] = x end
  for _, x in ipairs({ ... }) do a[#a + 1] = x end
  return h.run(table.unpack(a))
end

describe("issue 17 new-user findings", function()
  it("estimate --offload refuses a tier in estimate's words, not search's --fix", function()
    -- before: "fathom: search: --fix offload=bogus: expected one of ..."
    local r = est("--offload", "bogus")
    refusal(r, "^fathom: estimate: %-%-offload bogus: expected one of off, host_memory, remote_memory, nvme " ..
      "%(off, or a memory tier H100_SXM has%)\n$")
    assert.is_nil(r.stderr:find("--fix", 1, true))
    refusal(est("--offload", "host_memori"), "%(did you mean 'host_memory'%?%)")
    -- a tier the node lacks: TPU v5p hosts have no NVMe tier in the library
    refusal(h.run("estimate", "--model", "llama3.1_8b", "--hardware", "TPU_V5P", "--gpus", "8", "--offload", "nvme"),
      "^fathom: estimate: %-%-offload nvme: expected one of off, host_memory %(off, or a memory tier TPU_V5P has%)")
    -- a tier it has still runs
    local ok = est("--offload", "host_memory", "--format", "json")
    assert.are.equal(0, ok.code, ok.stderr)
    assert.is_number(json.decode(ok.stdout).time.step_time_seconds)
  end)

  it("fathom.load and fathom show fall back to fathom's configs/ as analyze does", function()
    -- models/ is not a folder of the working directory: the name resolves under configs/
    local f = io.open("models/llama3.1_8b.yaml")
    if f then f:close() end
    assert.is_nil(f)
    assert.are.equal("llama3.1_8b", fathom.load("models/llama3.1_8b.yaml").name)
    local r = h.run("show", "--format", "json", "models/llama3.1_8b.yaml")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(4096, json.decode(r.stdout).d_model)
  end)

  it("the search module is reachable from fathom", function()
    assert.is_function(fathom.search.prepare)
    assert.is_function(fathom.search.run)
  end)

  it("analyze --format json writes JSON to stdout without --output-file, and takes --format table", function()
    local a = { "analyze", "--hardware-lib", "configs/hardware/hardware_library.yaml", "--physical-topology",
      "configs/topology_zoo/physical/dgx_h100_1node.yaml",
      "--logical-topology", "configs/topology_zoo/logical/tp8.yaml",
      "--workload-spec", "configs/train_specs/search_default.yaml", "--model-spec", "configs/models/llama3.1_8b.yaml",
      "--format" }
    a[#a + 1] = "json"
    local r = h.run(table.unpack(a))
    assert.are.equal(0, r.code, r.stderr)
    assert.is_number(json.decode(r.stdout)[1].time.step_time_seconds)
    a[#a] = "table"
    r = h.run(table.unpack(a))
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("step", r.stdout)
  end)
end)
