-- bench/gpu/compare_layers.lua: fathom's per-layer prediction against the transformer layers
-- measured on one H100 (validation/measurements/h100_sxm/layers/, bench/gpu/measure_layers.py).
-- No GPU needed.
--
--   build/fathom bench/gpu/compare_layers.lua [--csv OUT] [--md OUT] [--kernels K] [--dir DIR]
--
-- Every measured row is one Llama-style layer (RMSNorm, fused QKV, RoPE, causal GQA flash
-- attention, output projection, RMSNorm, gated SwiGLU MLP, two residual adds) at a per-GPU
-- shape: the whole layer, or the shard a TP rank holds (heads, KV heads and FFN / TP, the same
-- hidden, no collectives). fathom prices the same shape as a model on one GPU of the hardware
-- library's H100_SXM node, TP 1, no recompute, flash attention, the measured micro-batch and
-- sequence, under the precision recipe the row names (bf16: none; fp8_tensorwise: the core's
-- fp8_current; fp8_rowwise: the core's fp8_rowwise where it has one, else fp8_current, noted).
-- Eager rows run with the core's eager_elementwise (one kernel per PyTorch element-wise op),
-- compiled rows without (Inductor fuses them).
--
-- Per-layer time = (a 2-layer model's per-micro-batch forward/backward kernel time - a
-- 1-layer model's): embedding, LM head and loss cancel. The same difference of the memory
-- footprint's saved activations is compared with the measured saved_activation_bytes.
-- Calibration: the reference kernel library of the hopper generation ("2025", TE 2.x/cuDNN;
-- fathom.calibration), as `fathom validate` uses it; --kernels torch2025 prices the
-- PyTorch-native stack the measurements actually ran instead.
--
-- Used as a module too (tests/spec/layers_spec.lua): dofile() returns M; M.compare(opts) ->
-- rows, summary.
local args = require("fathom.args")
local calibration = require("fathom.calibration")
local cases = require("fathom.cases")
local csv = require("fathom.format.csv")
local errors = require("fathom.errors")
local names = require("fathom.names")
local output = require("fathom.output")
local scenario = require("fathom.scenario")
local tablefmt = require("fathom.format.table")
local validate = require("fathom.validate")

local M = {}

M.dir = "validation/measurements/h100_sxm/layers"
-- run1: all shapes eager and 6 compiled; run1b: the 3 other shapes compiled; run2: 6 shapes
-- again with a torch.profiler split into GEMM / attention / other kernel time.
M.files = { "run1_layers.csv", "run1b_layers.csv", "run2_profiled_layers.csv" }
M.node, M.generation, M.vocab = "H100_SXM", "hopper", 128256

M.precisions = { bf16 = true, fp8_tensorwise = true, fp8_rowwise = true }
M.modes = { eager = true, compile = true }
local numeric = { "hidden", "heads", "kv_heads", "head_dim", "ffn", "micro_batch", "seq", "fwd_s", "fwd_bwd_s",
  "gemm_flops_fwd", "attn_flops_fwd", "saved_activation_bytes", "peak_extra_bytes", "prof_gemm_s", "prof_attn_s",
  "prof_other_s" }
local required = { hidden = true, heads = true, kv_heads = true, head_dim = true, ffn = true, micro_batch = true,
  seq = true, fwd_s = true, fwd_bwd_s = true }

-- split(line) -> fields of one CSV line (the files quote nothing; a quoted field is kept whole).
local function split(line)
  local out, i, n = {}, 1, #line
  while i <= n + 1 do
    if line:sub(i, i) == '"' then
      local j, buf = i + 1, {}
      while j <= n do
        local c = line:sub(j, j)
        if c == '"' and line:sub(j + 1, j + 1) == '"' then buf[#buf + 1], j = '"', j + 2
        elseif c == '"' then break
        else buf[#buf + 1], j = c, j + 1 end
      end
      out[#out + 1] = table.concat(buf)
      i = j + 2
    else
      local j = line:find(",", i, true) or (n + 1)
      out[#out + 1] = line:sub(i, j - 1)
      i = j + 1
    end
  end
  return out
end

-- read(path) -> rows (tables by column name, numbers converted). Bad input: one line naming
-- file:line, the column and a hint.
function M.read(path)
  local f, err = io.open(path, "r")
  if not f then errors.raise("%s: cannot read (%s; run from the repository root or pass --dir)", path, err) end
  local header, rows, ln = nil, {}, 0
  for line in f:lines() do
    ln = ln + 1
    line = line:gsub("\r$", "")
    if line ~= "" then
      local fields = split(line)
      if not header then
        header = fields
        local have = {}
        for _, h in ipairs(header) do have[h] = true end
        for _, k in ipairs({ "shape", "precision", "mode", "status", "hidden", "fwd_s", "fwd_bwd_s" }) do
          if not have[k] then
            f:close()
            errors.raise("%s:1: column '%s' is missing (a measure_layers.py CSV has it)", path, k)
          end
        end
      else
        local r = { file = path:match("[^/]+$"), line = ln }
        for i, h in ipairs(header) do r[h] = fields[i] end
        if r.status == "ok" then
          for _, k in ipairs(numeric) do
            local v = r[k]
            if v ~= nil and v ~= "" then
              local x = tonumber(v)
              if not x or x ~= x or x < 0 or x == math.huge then
                f:close()
                errors.raise("%s:%d: %s: '%s' is not a non-negative number (the columns must match the header)",
                  path, ln, k, tostring(v))
              end
              r[k] = x
            elseif required[k] then
              f:close()
              errors.raise("%s:%d: %s is empty (every ok row has it)", path, ln, k)
            else
              r[k] = nil
            end
          end
          local bad = not M.precisions[r.precision] and "precision" or not M.modes[r.mode] and "mode"
          if bad then
            f:close()
            errors.raise("%s:%d: %s: '%s' is not one fathom maps (%s)", path, ln, bad, tostring(r[bad]),
              bad == "mode" and "eager, compile" or "bf16, fp8_tensorwise, fp8_rowwise")
          end
          rows[#rows + 1] = r
        end
      end
    end
  end
  f:close()
  if not header then errors.raise("%s: empty file (expected a measure_layers.py CSV)", path) end
  return rows
end

-- recipe(precision) -> core recipe name, note or nil.
function M.recipe(precision)
  local R = names.key("precision_recipe")
  if precision == "bf16" then return R.none end
  if precision == "fp8_tensorwise" then return R.fp8_current end
  if precision == "fp8_rowwise" then
    for _, n in ipairs(names.precision_recipe) do
      if n == "fp8_rowwise" then return n end
    end
    return R.fp8_current, "rowwise costed as fp8_current (the core has no fp8_rowwise recipe)"
  end
  errors.raise("precision '%s' is not one fathom maps (bf16, fp8_tensorwise, fp8_rowwise)", tostring(precision))
end

-- evaluate(lib, row, layers, recipe) -> the core's result for a `layers`-layer model of the
-- row's shape on one GPU.
local function evaluate(lib, row, layers, recipe)
  local case = { id = row.shape, system = { gpu = "H100 SXM", num_gpus = 1, gpus_per_node = 8 },
    model = { name = row.shape, arch = "swiglu rmsnorm rope untied", layers = layers, hidden = row.hidden,
      heads = row.heads, kv_heads = row.kv_heads, head_dim = row.head_dim, ffn = row.ffn, vocab = M.vocab },
    parallelism = { tp = 1, pp = 1, dp = 1, micro_batch = row.micro_batch, global_batch = row.micro_batch,
      seq_len = row.seq },
    training = { precision = "bf16", recompute = "none" } }
  local docs, why = cases.training_docs(case)
  if not docs then errors.raise("%s:%d: %s", row.file, row.line, why) end
  local w = docs.workload
  w.precision_recipe, w.flash_attention, w.recompute = recipe, true, "none"
  w.eager_elementwise = row.mode == "eager"
  -- the casts as the measured mode wrote them: Inductor's Triton kernels, or eager op chains
  w.cast_kernels = row.mode == "eager" and "eager" or "compiled"
  local sc = scenario.new({ hardware_lib = lib, physical = docs.physical, logical = docs.logical, model = docs.model,
    workload = w })
  local ok, r = pcall(sc.evaluate, sc)
  if not ok then
    errors.pass(r)
    if errors.is_input(r) then
      errors.raise("%s:%d: %s: %s", row.file, row.line, row.shape, errors.one_line(tostring(r)))
    end
    error(r, 0)
  end
  return r
end
M.evaluate = evaluate

-- predict(lib, row) -> per-layer prediction {fwd_s, bwd_s, fwd_bwd_s, saved_bytes, flops_fwd, classes}
local function predict(lib, row)
  local recipe, note = M.recipe(row.precision)
  local a = evaluate(lib, row, 1, recipe)
  local b = evaluate(lib, row, 2, recipe)
  local pa, pb = a.per_microbatch, b.per_microbatch
  local p = { recipe = recipe, note = note,
    fwd_s = pb.forward_kernel_s - pa.forward_kernel_s,
    bwd_s = pb.backward_kernel_s - pa.backward_kernel_s,
    saved_bytes = b.memory.components.saved_activations - a.memory.components.saved_activations,
    flops_fwd = 0 }
  for part, v in pairs(pb.forward) do p.flops_fwd = p.flops_fwd + v.flops - pa.forward[part].flops end
  p.fwd_bwd_s = p.fwd_s + p.bwd_s
  -- kernel time by kind (gemm, attention, other), forward + backward, as the profiler splits it
  p.classes = {}
  for _, pass in ipairs({ "forward_classes", "backward_classes" }) do
    for cls, v in pairs(pb[pass]) do p.classes[cls] = (p.classes[cls] or 0) + v - pa[pass][cls] end
  end
  return p
end

local function median(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end
M.median = median

-- compare{dir=, kernels=} -> rows, summary. Each row: the measurement, the prediction and
-- ratios predicted / measured; summary[precision .. "/" .. mode] = {n, median and range of
-- the fwd and fwd+bwd ratios}.
function M.compare(opts)
  opts = opts or {}
  local dir = opts.dir or M.dir
  local kernels = opts.kernels or calibration.reference_of(M.generation)
  local state = validate.state()
  local setting, from = calibration.lookup(M.generation, kernels, state.settings)
  if not setting then errors.raise("--kernels %s: no calibration for hopper", tostring(kernels)) end
  local lib = validate.calibrated_lib(state, M.node, setting)
  local cache, rows = {}, {}
  for _, name in ipairs(opts.files or M.files) do
    for _, r in ipairs(M.read(dir .. "/" .. name)) do
      local key = table.concat({ r.hidden, r.heads, r.kv_heads, r.head_dim, r.ffn, r.micro_batch, r.seq, r.precision,
        r.mode }, "|")
      cache[key] = cache[key] or predict(lib, r)
      local p = cache[key]
      r.run = name:match("^(run%w+)")
      r.pred = p
      r.ratio_fwd = p.fwd_s / r.fwd_s
      r.ratio_fwd_bwd = p.fwd_bwd_s / r.fwd_bwd_s
      -- the same layer? fathom's forward FLOPs (GEMMs, attention, element-wise) against the
      -- benchmark's GEMM + causal attention count
      r.ratio_flops = r.gemm_flops_fwd and r.attn_flops_fwd and p.flops_fwd / (r.gemm_flops_fwd + r.attn_flops_fwd)
      r.ratio_saved = r.saved_activation_bytes and r.saved_activation_bytes > 0 and p.saved_bytes /
        r.saved_activation_bytes or nil
      rows[#rows + 1] = r
    end
  end
  local groups, order = {}, {}
  for _, r in ipairs(rows) do
    local g = r.precision .. "/" .. r.mode
    if not groups[g] then
      groups[g] = { fwd = {}, fwd_bwd = {}, saved = {}, gemm = {}, attention = {}, other = {} }
      order[#order + 1] = g
    end
    local t = groups[g]
    t.fwd[#t.fwd + 1] = r.ratio_fwd
    t.fwd_bwd[#t.fwd_bwd + 1] = r.ratio_fwd_bwd
    if r.ratio_saved then t.saved[#t.saved + 1] = r.ratio_saved end
    if r.prof_gemm_s then
      local c = r.pred.classes
      t.gemm[#t.gemm + 1] = c.gemm / r.prof_gemm_s
      t.attention[#t.attention + 1] = c.attention / r.prof_attn_s
      t.other[#t.other + 1] = c.other / r.prof_other_s
    end
  end
  local summary = { calibration = from, kernels = kernels, order = order, groups = {} }
  for _, g in ipairs(order) do
    local t = groups[g]
    local function stats(xs)
      return { median = median(xs), min = math.min(table.unpack(xs)), max = math.max(table.unpack(xs)) }
    end
    summary.groups[g] = { n = #t.fwd, fwd = stats(t.fwd), fwd_bwd = stats(t.fwd_bwd),
      -- the profiled rows' kernel classes, predicted / measured (nil without a profile)
      gemm = #t.gemm > 0 and stats(t.gemm) or nil, attention = #t.attention > 0 and stats(t.attention) or nil,
      other = #t.other > 0 and stats(t.other) or nil,
      saved = #t.saved > 0 and stats(t.saved) or nil }
  end
  return rows, summary
end

local function ms(s) return string.format("%.2f", s * 1e3) end
local function x(v) return v and string.format("%.2f", v) or "-" end
local function gb(b) return string.format("%.2f", b / 1e9) end

M.headers = { "shape", "precision", "mode", "run", "fwd ms", "pred", "ratio", "fwd+bwd ms", "pred", "ratio",
  "saved GB", "pred", "ratio" }

-- table_rows(rows) -> the printed table's cells
function M.table_rows(rows)
  local out = {}
  for _, r in ipairs(rows) do
    out[#out + 1] = { r.shape, r.precision, r.mode, r.run, ms(r.fwd_s), ms(r.pred.fwd_s), x(r.ratio_fwd),
      ms(r.fwd_bwd_s), ms(r.pred.fwd_bwd_s), x(r.ratio_fwd_bwd),
      r.saved_activation_bytes and gb(r.saved_activation_bytes) or "-", gb(r.pred.saved_bytes), x(r.ratio_saved) }
  end
  return out
end

M.split_headers = { "shape", "precision", "mode", "GEMM ms", "pred", "attention ms", "pred", "other ms", "pred" }

-- split_rows(rows) -> the profiled rows' GEMM / attention / other kernel time (fwd+bwd), measured
-- and fathom's (per_microbatch.forward_classes + backward_classes)
function M.split_rows(rows)
  local out = {}
  for _, r in ipairs(rows) do
    if r.prof_gemm_s then
      local c = r.pred.classes
      local function pc(k) return c and ms(c[k]) or "-" end
      out[#out + 1] = { r.shape, r.precision, r.mode, ms(r.prof_gemm_s), pc("gemm"), ms(r.prof_attn_s),
        pc("attention"), ms(r.prof_other_s), pc("other") }
    end
  end
  return out
end

M.summary_headers = { "precision/mode", "rows", "fwd median", "fwd range", "fwd+bwd median", "fwd+bwd range",
  "saved median", "saved range", "GEMM", "attention", "other" }

function M.summary_rows(summary)
  local out = {}
  for _, g in ipairs(summary.order) do
    local s = summary.groups[g]
    local function range(t) return t and string.format("%.2f-%.2f", t.min, t.max) or "-" end
    out[#out + 1] = { g, s.n, x(s.fwd.median), range(s.fwd), x(s.fwd_bwd.median), range(s.fwd_bwd),
      x(s.saved and s.saved.median), range(s.saved), x(s.gemm and s.gemm.median),
      x(s.attention and s.attention.median), x(s.other and s.other.median) }
  end
  return out
end

local function markdown(headers, rows)
  local lines = { "| " .. table.concat(headers, " | ") .. " |", "|" .. string.rep("---|", #headers) }
  for _, r in ipairs(rows) do
    local cells = {}
    for i = 1, #headers do cells[i] = tostring(r[i] == nil and "" or r[i]) end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  return table.concat(lines, "\n") .. "\n"
end
M.markdown = markdown

-- records(rows) -> flat records for --csv
local function records(rows)
  local out = {}
  for _, r in ipairs(rows) do
    local p = r.pred
    local c = p.classes or {}
    out[#out + 1] = { shape = r.shape, precision = r.precision, mode = r.mode, run = r.run,
      hidden = r.hidden, heads = r.heads, kv_heads = r.kv_heads, ffn = r.ffn, micro_batch = r.micro_batch, seq = r.seq,
      recipe = p.recipe, fwd_s = r.fwd_s, pred_fwd_s = p.fwd_s, ratio_fwd = r.ratio_fwd,
      fwd_bwd_s = r.fwd_bwd_s, pred_fwd_bwd_s = p.fwd_bwd_s, ratio_fwd_bwd = r.ratio_fwd_bwd,
      saved_activation_bytes = r.saved_activation_bytes, pred_saved_bytes = p.saved_bytes,
      ratio_saved = r.ratio_saved, ratio_flops_fwd = r.ratio_flops, prof_gemm_s = r.prof_gemm_s, pred_gemm_s = c.gemm,
      prof_attn_s = r.prof_attn_s, pred_attn_s = c.attention, prof_other_s = r.prof_other_s,
      pred_other_s = c.other, note = p.note }
  end
  return out
end

local spec = {
  { name = "csv", arg = "OUT", help = "write every row (measured, predicted, ratios) as CSV" },
  { name = "md", arg = "OUT", help = "write the tables as Markdown" },
  { name = "kernels", arg = "K", help = "kernel library generation (default: hopper's reference, 2025)" },
  { name = "dir", arg = "DIR", help = "measurement directory (default " .. M.dir .. ")" },
}

function M.main(argv)
  local opts = args.parse(argv, spec, "compare_layers.lua")
  if opts.kernels then
    local known = false
    for _, k in ipairs(calibration.kernel_generations) do known = known or k == opts.kernels end
    if not known then
      errors.raise("--kernels %s: not a kernel library generation (%s)", opts.kernels,
        table.concat(calibration.kernel_generations, ", "))
    end
  end
  local rows, summary = M.compare({ dir = opts.dir, kernels = opts.kernels })
  local notes = {}
  for _, r in ipairs(rows) do if r.pred.note then notes[r.pred.note] = true end end
  local head = string.format("fathom per-layer prediction vs one H100 SXM (calibration %s); ratio = predicted / "
    .. "measured\n", summary.calibration)
  for n in pairs(notes) do head = head .. "note: " .. n .. "\n" end
  local text = head .. "\n" .. tablefmt.render(M.headers, M.table_rows(rows)) .. "\n" ..
    "GEMM / attention / other kernel time, fwd+bwd (profiled rows)\n" ..
    tablefmt.render(M.split_headers, M.split_rows(rows)) .. "\n" ..
    tablefmt.render(M.summary_headers, M.summary_rows(summary))
  -- files first (rendered whole, written atomically), then the console
  if opts.csv then output.write_file(opts.csv, csv.encode(records(rows))) end
  if opts.md then
    output.write_file(opts.md, head .. "\n" .. markdown(M.headers, M.table_rows(rows)) .. "\n" ..
      markdown(M.split_headers, M.split_rows(rows)) .. "\n" .. markdown(M.summary_headers, M.summary_rows(summary)))
  end
  io.stdout:write(text)
end

if arg and type(arg[0]) == "string" and arg[0]:match("compare_layers%.lua$") then M.main({ table.unpack(arg) }) end

return M
