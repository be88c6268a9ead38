-- Llama-3.1 70B decode on one DGX H100: the KV cache in HBM vs a CXL memory pool, by batch.
-- Usage: fathom scenario run kv_offload
local fathom = require("fathom")
local tablefmt = require("fathom.format.table")
local units = require("fathom.units")

local rows = {}
for _, spec in ipairs({ "llama3.1_70b_decode", "llama3.1_70b_decode_kv_remote" }) do
  for _, batch in ipairs({ 8, 64, 256 }) do
    local sc = fathom.scenario({
      hardware = "hardware/hardware_library.yaml",
      physical = "topology_zoo/physical/dgx_h100_1node.yaml",
      logical = "topology_zoo/logical/tp8.yaml",
      model = "models/llama3.1_70b.yaml",
      workload = "inference_decode_specs/" .. spec .. ".yaml",
      pass_mode = "inference_decode",
    })
    sc.workload.global_batch_size, sc.workload.micro_batch_size = batch, batch
    local r = sc:evaluate()
    rows[#rows + 1] = { spec:match("remote") and "CXL pool" or "HBM", batch, units.time(r.tpot_s),
      string.format("%.0f", r.tokens_per_s), units.bytes(r.kv_cache_bytes_per_gpu), r.memory.fits and "yes" or "no" }
  end
end
io.stdout:write(tablefmt.render({ "KV cache in", "batch", "TPOT", "tokens/s", "KV/GPU", "fits" }, rows))
