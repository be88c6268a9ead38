-- Every field of a record (sc:record(r), fathom.analyze, analyze --format json) is named in
-- README.md's "Fields of a record" paragraph: a new field without a word there fails here,
-- as the evaluate() results and search hits do in readme_spec.lua.
local config = require("fathom.config")
local fathom = require("fathom")
local names = require("fathom.core").names

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local doc = read("README.md"):match("\nFields of a record (.-)\n\n")

local function set(list)
  local out = {}
  for _, v in ipairs(list) do out[v] = true end
  return out
end
local kinds, components = set(names.comm_kind), set(names.memory_component)

-- documented(key): named as it is, or by its pattern (exposed_KIND_seconds, COMPONENT_bytes,
-- COMPONENT_tier)
local function documented(k)
  if doc:find("`" .. k .. "`", 1, true) then return true end
  local kind = k:match("^exposed_(.+)_seconds$")
  if kind and kinds[kind] then return doc:find("`exposed_KIND_seconds`", 1, true) ~= nil end
  local comp, what = k:match("^(.+)_(%a+)$")
  if comp and components[comp] and (what == "bytes" or what == "tier") then
    return doc:find("`COMPONENT_" .. what .. "`", 1, true) ~= nil
  end
  return false
end

-- missing(rec) -> the keys of rec, at any depth, the paragraph does not name (the routing
-- result is fathom route's, documented there)
local function missing(rec, path, out)
  out = out or {}
  for k, v in pairs(rec) do
    if type(k) == "string" and not k:match("^__") then
      if not documented(k) then out[#out + 1] = path .. "." .. k end
      if type(v) == "table" and k ~= "routing" then missing(v, path .. "." .. k, out) end
    end
  end
  table.sort(out)
  return out
end

local H100 = { hardware = "configs/hardware/hardware_library.yaml",
  physical = "configs/topology_zoo/physical/dgx_h100_1node.yaml", logical = "configs/topology_zoo/logical/tp8.yaml" }

local function record(args)
  local sc = fathom.scenario(args)
  return sc:record(sc:evaluate())
end

describe("README.md record fields", function()
  it("the paragraph exists", function()
    assert.is_string(doc)
  end)

  it("a dense training record, with failures, energy and cost modelled", function()
    local w = config.load_mapping("configs/train_specs/search_default.yaml", "workload spec")
    w.reliability = { gpu_mtbf_hours = 50000, checkpoint_bandwidth = 2.0e9, restart_minutes = 10 }
    w.cost = { pue = 1.2, usd_per_gpu_hour = 2.5 }
    local rec = record({ hardware = H100.hardware, physical = H100.physical, logical = H100.logical,
      model = "configs/models/llama3.1_8b.yaml", workload = w })
    assert.is_number(rec.time.run_with_failures.goodput) -- the optional block is there to be checked
    assert.are.same({}, missing(rec, "record"))
  end)

  it("an MoE training record (expert parallelism, moe_ffn, the all-to-all)", function()
    local rec = record({ hardware = "configs/hardware/hardware_library.yaml",
      physical = "configs/topology_zoo/physical/hgx_h800_2048.yaml",
      logical = "configs/topology_zoo/logical/deepseek_v3_pp16_ep64.yaml",
      model = "configs/models/deepseek_v3.yaml", workload = "configs/train_specs/deepseek_v3.yaml" })
    assert.is_table(rec.communication_per_batch_per_xpu.moe_all_to_all)
    assert.are.same({}, missing(rec, "record"))
  end)

  it("prefill and decode records", function()
    for _, p in ipairs({ { "inference_prefill", "configs/inference_prefill_specs/llama3.1_70b_prefill.yaml" },
      { "inference_decode", "configs/inference_decode_specs/llama3.1_70b_decode.yaml" } }) do
      local rec = record({ hardware = H100.hardware, physical = H100.physical, logical = H100.logical,
        model = "configs/models/llama3.1_70b.yaml", workload = p[2], pass_mode = p[1] })
      assert.are.same({}, missing(rec, p[1]))
    end
  end)

  it("would catch an undocumented field", function()
    assert.are.same({ "x.not_a_documented_field" }, missing({ not_a_documented_field = 1, fits = true }, "x"))
  end)
end)
