-- fathom.precision: the training precisions a command line names, as workload keys.
-- A precision is the element width of everything outside the linear layers
-- (float_size_bytes: 2 for BF16/FP16, 4 for FP32) and the recipe of the linear layers'
-- GEMMs (precision_recipe, the core's names: none = at float_size_bytes; fp8_* / mxfp8 /
-- nvfp4 = Transformer Engine's recipes, the rest at BF16). One table, read by
-- `fathom estimate --precision` and by the search header that states what it assumed.
local names = require("fathom.names")

local M = {}

-- rows: name -> {float_size_bytes, precision_recipe}, in choice order (M.names).
M.rows = {
  { name = "bf16", float_size_bytes = 2, precision_recipe = "none" },
  { name = "fp32", float_size_bytes = 4, precision_recipe = "none" },
}
for _, r in ipairs(names.precision_recipe) do
  if r ~= "none" then M.rows[#M.rows + 1] = { name = r, float_size_bytes = 2, precision_recipe = r } end
end

M.names = {}
local by_name = {}
for i, r in ipairs(M.rows) do
  M.names[i] = r.name
  by_name[r.name] = r
end

-- apply(w, name) -> w with the precision's keys set (name must be one of M.names).
function M.apply(w, name)
  local r = assert(by_name[name], "unknown precision")
  w.float_size_bytes, w.precision_recipe = r.float_size_bytes, r.precision_recipe
  return w
end

-- describe(w) -> what a workload computes in: "bf16", "fp32", "fp8_delayed (bf16 elsewhere)";
-- a width without a row ("1-byte elements") is described by its width.
function M.describe(w)
  local size = w.float_size_bytes or 2
  local base = size == 2 and "bf16" or size == 4 and "fp32" or (size .. "-byte elements")
  local recipe = w.precision_recipe or "none"
  if recipe == "none" then return base end
  return string.format("%s (%s elsewhere)", recipe, base)
end

return M
