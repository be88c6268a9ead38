-- The C batch sweep (fathom.sweep_batch, src/core/fth_sweep.c) writes the same CSV and
-- JSON Lines bytes as the per-point Lua path, on dense and MoE sweeps, with invalid points kept as records
-- with an `error`; keys it cannot rework take the Lua path. Memory: the C path holds one
-- chunk of rows (sweep_batch.CHUNK), not the sweep (README "Speed"; not timed here).
local h = require("helpers")

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function slurp(path)
  local f = io.open(path, "rb")
  local s = f and f:read("a")
  if f then f:close() end
  return s
end

-- run(mode, args, format) -> {code, stderr}, output text: analyze with FATHOM_SWEEP_BATCH=mode,
-- CSV (or `format`) to a file.
local function run(mode, args, format)
  local out = os.tmpname()
  local parts = { "env", "FATHOM_SWEEP_BATCH=" .. mode, h.shell_quote(h.bin()), "analyze" }
  for _, a in ipairs(args) do parts[#parts + 1] = h.shell_quote(a) end
  for _, a in ipairs({ "--format", format or "csv", "--jobs", "1", "--output-file", out }) do parts[#parts + 1] = a end
  local err = os.tmpname()
  local _, _, code = os.execute(table.concat(parts, " ") .. " 2>" .. err)
  local text = slurp(out)
  os.remove(out)
  local r = { code = code, stderr = slurp(err) }
  os.remove(err)
  return r, text
end

-- split(s) -> the comma-separated cells of one CSV row (no quoted commas in these rows)
local function split(s)
  local out = {}
  for cell in (s .. ","):gmatch("([^,]*),") do out[#out + 1] = cell end
  return out
end

local T = "tests/fixtures/tiny/"
local C = "configs/"
local function tiny(sweep, extra)
  local a = { "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
    "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml",
    "--model-spec", T .. "model.yaml", "--sweep-config", sweep }
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return a
end

local function same(args, format, extra)
  if extra then
    args = table.move(args, 1, #args, 1, {})
    for _, x in ipairs(extra) do args[#args + 1] = x end
  end
  local rc, c = run("1", args, format)
  assert.are.equal(0, rc.code, rc.stderr)
  local rl, l = run("0", args, format)
  assert.are.equal(0, rl.code, rl.stderr)
  assert.are.equal(l, c)
  return c
end

describe("fathom.sweep_batch", function()
  local sweep
  before_each(function() sweep = os.tmpname() end)
  after_each(function() os.remove(sweep) end)

  it("writes a dense sweep's CSV byte for byte as the Lua path, invalid points as records", function()
    -- micro-batch 3 does not divide the local batch: those points are errors
    write(sweep, "sweep:\n  workload_spec.micro_batch_size: [1, 2, 3, 4]\n  workload_spec.seq_length: [256, 1024]\n")
    local text = same(tiny(sweep))
    assert.are.equal(9, h.count_lines(text))
    assert.matches(",error,valid\n", text:match("^[^\n]*\n"))
    assert.matches("micro_batch_size", text)
  end)

  it("writes the compute the hidden DP traffic displaces, as the Lua path does", function()
    -- the toy's DP 2 all-reduce hidden under the backward: a column that is not all zeros
    local train = os.tmpname()
    write(train, (slurp(T .. "train.yaml"):gsub("comp_comm_efficiency: 0%.0", "comp_comm_efficiency: 0.8")))
    write(sweep, "sweep:\n  workload_spec.micro_batch_size: [1, 2]\n")
    local args = tiny(sweep)
    for i = 1, #args do
      if args[i] == T .. "train.yaml" then args[i] = train end
    end
    local text = same(args)
    os.remove(train)
    local header = text:match("^[^\n]*")
    local col
    for i, name in ipairs(split(header)) do
      if name:find("dp_interference_seconds", 1, true) then col = i end
    end
    assert.is_number(col, header)
    local n = 0
    for line in text:gmatch("\n([^\n]+)") do
      local v = tonumber(split(line)[col])
      assert.is_number(v)
      if v > 0 then n = n + 1 end
    end
    assert.are.equal(2, n)
  end)

  it("matches when the first point is invalid and logical sizes are swept", function()
    -- TP 1 x DP 1 does not tile the 2 x 2 toy: the first points are errors, `error` leads the header
    write(sweep, "sweep:\n  logical_topology.dimensions.TP_Attn.size: [1, 2]\n"
      .. "  logical_topology.dimensions.DP_Attn.size: [1, 2]\n  workload_spec.global_batch_size: [8, 16]\n")
    local text = same(tiny(sweep))
    assert.matches("^error,sweep_point", text)
  end)

  it("writes JSON Lines byte for byte as the Lua path: numbers, integers, names, booleans, errors", function()
    -- TP 1 x DP 1 does not tile the 2 x 2 toy: invalid lines (error text with quotes) lead
    write(sweep, "sweep:\n  logical_topology.dimensions.TP_Attn.size: [1, 2]\n"
      .. "  logical_topology.dimensions.DP_Attn.size: [1, 2]\n  workload_spec.micro_batch_size: [1, 3]\n")
    local text = same(tiny(sweep), "jsonl")
    assert.are.equal(8, h.count_lines(text))
    local json = require("fathom.format.json")
    local lines, valid = 0, 0
    for line in text:gmatch("[^\n]+") do
      local rec = assert(json.decode(line))
      lines = lines + 1
      if rec.valid == false then
        assert.is_string(rec.error)
      else
        valid = valid + 1
        assert.is_number(rec.time.step_time_seconds)
        assert.is_boolean(rec.memory_footprint.fits)
        assert.is_string(rec.communication_per_batch_per_xpu.tp_communication.collective)
      end
    end
    assert.are.equal(8, lines)
    assert.is_true(valid > 0 and valid < 8, "valid and invalid points both")
  end)

  it("writes YAML byte for byte as the Lua path, readable units and raw: strings quoted, floats with .0",
    function()
    -- as the JSON Lines case: invalid points (error text with quotes and ": ") lead
    write(sweep, "sweep:\n  logical_topology.dimensions.TP_Attn.size: [1, 2]\n"
      .. "  logical_topology.dimensions.DP_Attn.size: [1, 2]\n  workload_spec.micro_batch_size: [1, 3]\n")
    local config = require("fathom.config")
    for _, raw in ipairs({ false, true }) do
      local text = same(tiny(sweep), "yaml", raw and { "--raw-output" } or nil)
      local list = config.load_string(text, "sweep.yaml")
      assert.are.equal(8, #list)
      local valid = 0
      for _, rec in ipairs(list) do
        if rec.valid == false then
          assert.is_string(rec.error)
        else
          valid = valid + 1
          assert.is_string(rec.communication_per_batch_per_xpu.tp_communication.collective)
          if raw then
            assert.is_number(rec.time.step_time_seconds)
            assert.are.equal("float", math.type(rec.model_configuration.total_params))
          else
            assert.matches("^[%d.]+ m?s$", rec.time.step_time_seconds)
            assert.matches("^[%d.]+%%$", rec.time.mfu)
            assert.matches("^[%d.]+ [KMG]?i?B$", rec.memory_footprint.headroom_bytes)
          end
        end
      end
      assert.is_true(valid > 0 and valid < 8, "valid and invalid points both")
      assert.matches('\n  error: "[^\n]+: [^\n]+"\n', text) -- the error text (it holds ": ") quoted
    end
  end)

  it("matches on a MoE model with zipped keys and energy in the record", function()
    write(sweep, "sweep:\n  workload_spec.micro_batch_size: [1, 2]\n"
      .. "  logical_topology.dimensions.PP.size: [8, 16]\nzip:\n"
      .. "  logical_topology.dimensions.DP_MoE.size: [1, 2]\n  logical_topology.dimensions.EP_SO.size: [16, 8]\n")
    local moe = { "--hardware-lib", C .. "hardware/hardware_library.yaml",
      "--physical-topology", C .. "topology_zoo/physical/hgx_h800_2048.yaml",
      "--logical-topology", C .. "topology_zoo/logical/deepseek_v3_pp16_ep64.yaml",
      "--model-spec", C .. "models/deepseek_v3.yaml", "--workload-spec", C .. "train_specs/deepseek_v3.yaml",
      "--sweep-config", sweep }
    local text = same(moe)
    assert.matches("moe_all_to_all", text)
    assert.matches("energy_kwh", text)
    local lines = same(moe, "jsonl")
    assert.matches('"moe_all_to_all":{', lines)
    assert.matches('"energy_kwh":', lines)
    local docs = same(moe, "yaml")
    assert.matches("\n    moe_all_to_all:\n", docs)
    assert.matches("\n      energy_kwh: ", docs)
  end)

  it("takes the Lua path for a key the core does not rework, and says why when asked for C", function()
    write(sweep, "sweep:\n  model_spec.n_layers: [2, 4]\n")
    local r = run("1", tiny(sweep))
    assert.are.equal(2, r.code)
    assert.matches("takes the Lua path: key model_spec.n_layers is not reworked in C", r.stderr)
    local ra, a = run("", tiny(sweep))
    assert.are.equal(0, ra.code, ra.stderr)
    local _, l = run("0", tiny(sweep))
    assert.are.equal(l, a)
  end)
end)

describe("fathom.sweep_batch's chunks", function()
  it("writes rows and lines chunk after chunk from one reused buffer, the plan reworked across invalid points",
    function()
    local batch = require("fathom.sweep_batch")
    local analysis = require("fathom.analysis")
    local csv = require("fathom.format.csv")
    local sweep, out = os.tmpname(), os.tmpname()
    -- 24 points in chunks of 5 (the last one short); micro-batch 3 does not divide the local
    -- batch, so every fourth point is an error between valid ones the same plan is reworked for
    write(sweep, "sweep:\n  workload_spec.seq_length: [256, 512, 768, 1024, 1536, 2048]\n"
      .. "  workload_spec.micro_batch_size: [1, 2, 3, 4]\n")
    local a = { hardware_lib = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "logical.yaml",
      workload = T .. "train.yaml", model = T .. "model.yaml", sweep = sweep, pass_mode = "training", jobs = 1 }
    local saved = batch.CHUNK
    batch.CHUNK = 5
    local ok, n = pcall(analysis.write_batch, a, out, "csv")
    local lines, docs = os.tmpname(), os.tmpname()
    local lok, ln = pcall(analysis.write_batch, a, lines, "jsonl")
    local dok, dn = pcall(analysis.write_batch, a, docs, "yaml", true)
    batch.CHUNK = saved
    assert.is_true(ok, n)
    assert.is_true(lok, ln)
    assert.is_true(dok, dn)
    assert.are.equal(24, n)
    assert.are.equal(24, ln)
    assert.are.equal(24, dn)
    local got_docs = slurp(docs)
    os.remove(docs)
    local got, got_lines = slurp(out), slurp(lines)
    os.remove(out)
    os.remove(lines)
    local records = analysis.run(a)
    os.remove(sweep)
    assert.are.equal(csv.encode(records), got)
    assert.are.equal(25, h.count_lines(got))
    assert.are.equal(require("fathom.format.jsonl").encode(records), got_lines)
    local readable = {}
    for i, r in ipairs(records) do readable[i] = require("fathom.report").humanize(r) end
    assert.are.equal(require("fathom.format.yaml").encode(readable), got_docs)
  end)
end)

describe("fathom.sweep_batch's look-ahead", function()
  it("widens what it wrote when a later point has new columns (no second pass)", function()
    local batch = require("fathom.sweep_batch")
    local analysis = require("fathom.analysis")
    local csv = require("fathom.format.csv")
    local sweep, out = os.tmpname(), os.tmpname()
    -- 32 points, global batch outer; only point 4 (global 6 over DP 2 = 3 sequences, micro-batch 2)
    -- is invalid: past the look-ahead and off the checked sample (1, 3, 5, ..., 29, 32), so the
    -- writer meets the error columns there: they go last in the header, rows 1-3 get empty cells
    write(sweep, "sweep:\n  workload_spec.global_batch_size: [8, 6, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8]\n"
      .. "  workload_spec.micro_batch_size: [1, 2]\n")
    local a = { hardware_lib = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "logical.yaml",
      workload = T .. "train.yaml", model = T .. "model.yaml", sweep = sweep, pass_mode = "training", jobs = 1 }
    local saved = batch.SCAN_AHEAD
    batch.SCAN_AHEAD = 2
    local ok, n = pcall(analysis.write_batch, a, out, "csv")
    batch.SCAN_AHEAD = saved
    assert.is_true(ok, n)
    assert.are.equal(32, n)
    local got = slurp(out)
    os.remove(out)
    local want = csv.encode(analysis.run(a))
    os.remove(sweep)
    assert.are.equal(want, got)
    assert.matches(",error,valid\n", got:match("^[^\n]*\n"))
  end)
end)

describe("fathom.sweep_batch's widening", function()
  it("appends one empty cell per new column to every row, a newline inside quotes not a row's end", function()
    local batch = require("fathom.sweep_batch")
    local analysis = require("fathom.analysis")
    local sweep = os.tmpname()
    write(sweep, "sweep:\n  workload_spec.micro_batch_size: [1, 2]\n")
    local a = { hardware_lib = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "logical.yaml",
      workload = T .. "train.yaml", model = T .. "model.yaml", sweep = sweep, pass_mode = "training", jobs = 1 }
    local docs, _, _, sweep_doc = analysis.open(a)
    local b = assert(batch.open(a, docs, sweep_doc))
    os.remove(sweep)
    local from, to = os.tmpname(), os.tmpname()
    -- a header with a quoted newline, a row whose first cell holds one and a quote, a plain row
    write(from, '"h\n1",h2\n"x\ny ""z""",1\n2,3\n')
    local fi, fo = assert(io.open(from, "rb")), assert(io.open(to, "wb"))
    assert.is_true(b.sw:widen(fi, fo, 2, "h1,h2,h3,h4\n"))
    fi:close()
    fo:close()
    -- each row gets 2 commas before its newline: ",," (two new empty cells)
    assert.are.equal('h1,h2,h3,h4\n"x\ny ""z""",1,,\n2,3,,\n', slurp(to))
    os.remove(from)
    os.remove(to)
  end)
end)

describe("fathom.sweep_batch with --jobs", function()
  -- jobs(sweep_text, jobs, format) -> what write_batch wrote with `jobs` processes (each
  -- taking 1 point or more, the first pass 1 point), and what the Lua path writes
  local function jobs(sweep_text, n, format)
    local batch = require("fathom.sweep_batch")
    local analysis = require("fathom.analysis")
    local sweep, out = os.tmpname(), os.tmpname()
    write(sweep, sweep_text)
    local a = { hardware_lib = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "logical.yaml",
      workload = T .. "train.yaml", model = T .. "model.yaml", sweep = sweep, pass_mode = "training", jobs = n }
    local saved_min, saved_scan = batch.MIN_POINTS_PER_PROCESS, batch.SCAN_AHEAD
    batch.MIN_POINTS_PER_PROCESS, batch.SCAN_AHEAD = 1, 1
    local ok, count = pcall(analysis.write_batch, a, out, format)
    batch.MIN_POINTS_PER_PROCESS, batch.SCAN_AHEAD = saved_min, saved_scan
    assert.is_true(ok, count)
    local got = slurp(out)
    os.remove(out)
    a.jobs = 1
    local want = require("fathom.format." .. format).encode(analysis.run(a))
    os.remove(sweep)
    return got, want
  end

  it("joins the workers' parts into the bytes of one process, columns met in other orders rearranged", function()
    -- points 1-3 (worker 1): valid, invalid (global batch 6: 3 sequences a DP rank, micro-batch 2),
    -- out of memory (seq 262,144); points 4-6 (worker 2): out of memory, invalid, valid. Worker 2
    -- meets the overflow column before the error columns; the header has them the other way
    local text = "zip:\n  workload_spec.global_batch_size: [8, 6, 8, 8, 6, 8]\n"
      .. "  workload_spec.seq_length: [256, 256, 262144, 262144, 256, 256]\n"
    for _, n in ipairs({ 2, 3 }) do
      local got, want = jobs(text, n, "csv")
      assert.are.equal(want, got)
      assert.matches(",error,valid,memory_footprint.overflow_tier\n", got:match("^[^\n]*\n"))
      got, want = jobs(text, n, "jsonl")
      assert.are.equal(want, got)
      assert.are.equal(6, h.count_lines(got))
      got, want = jobs(text, n, "yaml") -- raw numbers: write_batch's default
      assert.are.equal(want, got)
      assert.are.equal(6, select(2, got:gsub("\n%-\n", "")) + 1)
    end
  end)

  it("widens the first range's rows (written by this process) for columns only a later range has", function()
    -- points 1-3 valid and fitting; points 4-6 out of memory, invalid, valid
    local text = "zip:\n  workload_spec.global_batch_size: [8, 8, 8, 8, 6, 8]\n"
      .. "  workload_spec.seq_length: [256, 512, 1024, 262144, 256, 256]\n"
    local got, want = jobs(text, 2, "csv")
    assert.are.equal(want, got)
    assert.matches(",memory_footprint.overflow_tier,error,valid\n", got:match("^[^\n]*\n"))
  end)
end)
