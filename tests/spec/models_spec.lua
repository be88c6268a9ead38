-- The model zoo: every shipped model loads, checks, and its parameter count is within
-- 1% of the published total (active too, for MoE; DeepSeek-V3's "37B" is rounded, 2%).
local core = require("fathom.core")
local spec = require("fathom.spec")

local function params(m)
  -- a one-GPU plan is the cheapest way to ask the core for the counts
  local node = { device_compute = { bf16_nominal = 1e15, efficiency = 1 },
    device_memory_tiers = {
      xpu_memory = { bandwidth_per_stack_nominal = 1e12, size_per_stack = 1e15, num_stack = 1 } } }
  local topo = { dimensions = { { topology_type = "switched", size = 1, interconnect = { bandwidth_nominal = 1e9 } } },
    logical = {} }
  local w = { global_batch_size = 1, micro_batch_size = 1, seq_length = 128 }
  return core.train_compile(node, topo, m, w):degrees()
end

describe("configs/models", function()
  local p = io.popen("ls configs/models/*.yaml")
  for file in p:lines() do
    it(file, function()
      local m = spec.model(file)
      local d = params(m)
      if m.published_params then
        local tol = math.max(0.01 * m.published_params, m.published_params_tolerance or 0)
        assert.is_true(math.abs(d.params_total - m.published_params) <= tol,
          string.format("total %.4g vs published %.4g", d.params_total, m.published_params))
      end
      if m.published_active_params then
        local tol = m.name == "deepseek_v3" and 0.02 or 0.01
        assert.is_true(math.abs(d.params_active - m.published_active_params) <= tol * m.published_active_params,
          string.format("active %.4g vs published %.4g", d.params_active, m.published_active_params))
      end
    end)
  end
  p:close()
end)
