-- Bad input never crashes, hangs or leaves a file: every case below exits 2 with one
-- line "fathom: <where>: <what>" (a file position or a key path), no traceback, and
-- nothing left in the output directory. Fixtures: tests/fixtures/bad/ (issue 13).
local h = require("helpers")

local T = "tests/fixtures/tiny/"
local B = "tests/fixtures/bad/"

local slots = { hardware = "--hardware-lib", physical = "--physical-topology", logical = "--logical-topology",
  workload = "--workload-spec", model = "--model-spec" }
local defaults = { hardware = T .. "hardware.yaml", physical = T .. "physical.yaml", logical = T .. "logical.yaml",
  workload = T .. "train.yaml", model = T .. "model.yaml" }

-- analyze argv with one input replaced: slot -> file.
local function analyze_args(slot, file, extra)
  local a = { "analyze" }
  for _, s in ipairs({ "hardware", "physical", "logical", "workload", "model" }) do
    a[#a + 1] = slots[s]
    a[#a + 1] = s == slot and file or defaults[s]
  end
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return a
end

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -p " .. h.shell_quote(p)))
  return p
end

local function dir_entries(d)
  local p = io.popen("ls -A " .. h.shell_quote(d))
  local out = p:read("a")
  p:close()
  return out
end

-- The promise: exit 2, one line, a position or key path, the expected text, no file.
local function refused(argv, pattern, dir)
  local r = h.run(table.unpack(argv))
  local what = table.concat(argv, " ")
  assert.are.equal(2, r.code, what .. "\nstderr: " .. r.stderr .. "\nstdout: " .. r.stdout:sub(1, 200))
  assert.are.equal(1, h.count_lines(r.stderr), what .. ": " .. r.stderr)
  assert.matches("^fathom: ", r.stderr, 1, false, what)
  assert.is_nil(r.stderr:find("traceback", 1, true), what)
  assert.is_nil(r.stderr:find("internal error", 1, true), what)
  if pattern then assert.matches(pattern, r.stderr, 1, false, what) end
  if dir then assert.are.equal("", dir_entries(dir), what .. ": left behind") end
  return r
end

-- Input files refused in analyze, with a position: slot, fixture, expected text.
local analyze_cases = {
  { "model", "model_n_layers_huge.yaml", ":3:11: n_layers: expected an integer in %[1, 65536%], got 2147483647" },
  { "model", "model_d_model_1e308.yaml", ":2:10: d_model: expected an integer" },
  { "model", "model_mlp_ratio_1e308.yaml", "mlp_ratio: expected 0 or a magnitude in" },
  { "model", "model_mlp_ratio_denormal.yaml", "mlp_ratio: expected 0 or a magnitude in" },
  { "model", "model_vocab_huge.yaml", "vocab_size: expected an integer in" },
  { "model", "model_heads_huge.yaml", "num_heads: expected an integer in" },
  { "workload", "train_tokens_1e308.yaml", "total_train_tokens: expected 0 or a magnitude in" },
  { "workload", "train_eff_denormal.yaml", "comp_mem_efficiency: expected 0 or a magnitude in" },
  { "workload", "train_virtual_stages_huge.yaml", "pp_spec.virtual_stages: expected an integer in %[1, 256%]" },
  { "workload", "train_virtual_stages_max.yaml", "pp_spec.virtual_stages: expected an integer in %[1, 256%]" },
  { "hardware", "hw_size_denormal.yaml", "size_per_stack: expected 0 or a magnitude in" },
  { "hardware", "hw_flops_1e308.yaml", "bf16_nominal: expected 0 or a magnitude in" },
  { "hardware", "hw_latency_tiny.yaml", "latency_sec: expected 0 or a magnitude in" },
  { "hardware", "hw_bw_huge.yaml", "bandwidth_nominal: expected 0 or a magnitude in" },
  { "logical", "logical_size_huge.yaml", "size: expected an integer in" },
  { "physical", "physical_size_huge.yaml", "size: expected an integer in" },
  -- wrong for every point of any sweep: refused before the sweep too
  { "model", "model_d_model_string.yaml", ":2:10: d_model: expected an integer, got 'abc'" },
  { "model", "model_misspelt_key.yaml", ":3:1: n_layrs: unknown key %(did you mean 'n_layers'%?%)" },
  { "model", "model_missing_key.yaml", "vocab_size: missing required key" },
  { "model", "model_zero_layers.yaml", ":3:11: n_layers: expected a value >= 1, got 0" },
  { "model", "model_nan.yaml", "mlp_ratio: expected a number, got nan" },
  { "model", "model_inf.yaml", "mlp_ratio: expected a finite number" },
  { "model", "model_negative_heads.yaml", "num_heads: expected a value >= 1" },
  { "model", "model_fractional_heads.yaml", "num_heads: expected an integer, got 16%.5" },
  { "model", "model_d_model_list.yaml", "d_model: expected an integer, got a list" },
  { "model", "model_d_model_map.yaml", "d_model: expected an integer, got a mapping" },
  { "model", "model_d_model_null.yaml", "d_model" },
  { "model", "model_d_model_bool.yaml", "d_model: expected an integer, got true" },
  { "physical", "physical_dangling_node.yaml", "node_definition_ref: unknown node 'TOYY'" },
  { "physical", "physical_dangling_link.yaml", "interconnect_name: unknown interconnect" },
  { "physical", "physical_bad_type.yaml", "topology_type: expected one of" },
  { "physical", "physical_zero_size.yaml", "size: expected a value >= 1" },
  { "logical", "logical_not_tiling.yaml", "size" },
  { "logical", "logical_bad_tag.yaml", "logical_tag: expected one of .*did you mean 'TP_Attn'" },
  { "logical", "logical_dangling_dim.yaml", "maps_to_physical_dimension_name" },
  { "workload", "train_batch_not_multiple.yaml", "global_batch_size" },
  { "workload", "train_seq_string.yaml", "seq_length: expected an integer, got 'abc'" },
  { "workload", "train_float_zero.yaml", "float_size_bytes" },
  { "workload", "train_bad_dp.yaml", "dp_spec.variant: expected one of" },
  { "workload", "train_eff_over_one.yaml", "comp_comm_efficiency: expected a value <= 1" },
  { "workload", "train_dp_share_one.yaml", ":8:27: dp_comm_compute_fraction: expected a value <= 0.99" },
  { "workload", "train_a2a_eff_zero.yaml", ":8:30: ep_a2a_scale_out_efficiency: expected a value > 0" },
  { "workload", "train_pairs_string.yaml", ":8:19: ep_overlap_pairs: expected true or false, got .maybe." },
  { "workload", "train_grouped_string.yaml", ":8:24: grouped_expert_kernel: expected true or false, got .maybe." },
  { "workload", "train_tp_bwd_rs_string.yaml", ":8:25: tp_overlap_backward_rs: expected true or false, got .maybe." },
  { "workload", "train_tp_gather_number.yaml", ":8:22: tp_gather_quantized: expected true or false, got 1" },
  { "workload", "train_engine_allreduce_negative.yaml",
    ":13:44: collective%.engine_allreduce_latency_sec: expected a value >= 0, got %-6e%-06" },
  { "workload", "train_runs_negative.yaml", ":12:48: pp_spec.microbatches_per_run: expected a value >= 0" },
  { "workload", "train_saved_unknown.yaml", ":9:31: recompute_saved%[2%]: expected one of query_proj, .*, got mlp" },
  { "workload", "train_saved_not_op.yaml",
    ":9:18: recompute_saved: names what per%-op recomputation saves: needs recompute op" },
  { "workload", "train_misspelt.yaml", "seq_lenght: unknown key %(did you mean 'seq_length'%?%)" },
  { "hardware", "hw_dangling_compute.yaml", "device_compute: unknown compute component 'toyy'" },
  { "hardware", "hw_dangling_memory.yaml", "xpu_memory: unknown memory component 'toy_hmb'" },
  { "hardware", "hw_zero_stacks.yaml", "num_stack: expected a value >= 1" },
  { "hardware", "hw_eff_over_one.yaml", "efficiency: expected a value <= 1" },
  { "hardware", "hw_expert_fp8_over_one.yaml",
    ":8:33: components%.compute%.toy%.expert_gemm_fp8_fraction: expected a value <= 1" },
  { "hardware", "hw_expert_recipe_negative.yaml",
    ":8:35: components%.compute%.toy%.expert_recipe_overhead_sec: expected a value >= 0, got %-3e%-05" },
  { "hardware", "hw_negative_flops.yaml", "bf16_nominal: expected a value >= 0" },
  -- several errors: the first in the file, every time (keys walked in document order)
  { "model", "model_several_errors.yaml", ":2:1: zzz_bad: unknown key" },
  -- a 1 MB unknown key: no quadratic "did you mean" (81 s before), the key shown by its start
  { "model", "model_huge_key.yaml", ":2:3: k+%.%.%. %(1000000 bytes%): unknown key" },
  -- a key with a line break: the message stays on one line
  { "model", "model_newline_key.yaml", ":2:1: bad\\nkey: unknown key" },
}

-- Sweep configs refused before any point is built.
local sweep_cases = {
  { "sweep_step_tiny.yaml", ":2:61: sweep%.workload_spec%.micro_batch_size%.step: range has 1e%+300 points" },
  { "sweep_powers_nan.yaml", "powers_of_two: expected %[low, high%]" },
  { "sweep_powers_huge.yaml", "powers_of_two: expected %[low, high%]" },
  { "sweep_divisors_huge.yaml", "divisors_of: expected an integer in %[1, 10%^12%]" },
  { "sweep_empty_list.yaml", "micro_batch_size" },
  { "sweep_powers_none.yaml", "no power of two lies in" },
  { "sweep_no_valid_point.yaml", "global_batch_size: .*%(no point of the 2%-point sweep is valid" },
}

local search_base = { "search", "--model", "gpt3_175b", "--hardware", "A100_80GB_SXM", "--gpus", "64" }
local search_cases = {
  { { "--top", "2147483648" }, "%-%-top must be a positive integer %(at most 1000%)" },
  { { "--top", "5000" }, "%-%-top must be a positive integer" },
  { { "--fix", "mb=4294967298" }, "%-%-fix mb=4294967298: expected a positive integer up to 65536" },
  { { "--fix", "cp=1073741824" }, "%-%-fix cp=1073741824: expected a positive integer up to 1024" },
  { { "--fix", "vs=536870912" }, "%-%-fix vs=536870912: expected a positive integer up to 256" },
  { { "--workers", "1000" }, "%-%-workers must be a positive integer" },
  { { "--pass-mode", "inference_decode", "--fix", "tp=1073741824" }, "%-%-fix tp=1073741824: expected a positive" },
  { { "--pass-mode", "inference_decode", "--fix", "batch=4294967298" }, "%-%-fix batch=4294967298: expected" },
  { { "--gpus", "1e400" }, "%-%-gpus' expects a finite number" },
  { { "--gpus", "nan" }, "%-%-gpus' expects a number" },
  { { "--seq", "1e300" }, "%-%-seq must be a positive integer" },
  { { "--global-batch", "2.5" }, "%-%-global%-batch must be a positive integer" },
}

local route_cases = {
  { { "--config", B .. "route_histogram_5000.yaml" }, ":2:12: router%.experts: expected a value <= 4096" },
  { { "--config", B .. "route_histogram_string.yaml" }, "router%.histogram%[3%]: expected a weight >= 0" },
  { { "--config", B .. "route_hot_degenerate.yaml" }, "router%.top_k: top_k 200 needs 200 experts with a positive" },
  { { "--tokens", "3000000000" }, "router%.tokens: expected an integer below 2%^31" },
  { { "--tokens", "1048576", "--experts", "4096", "--top-k", "4000" }, "router%.top_k: expected a value <= 256" },
  { { "--experts", "4096", "--top-k", "200", "--distribution", "zipf", "--zipf-s", "3" },
    "router%.tokens: routing 65536 tokens to top%-200 of 4096 experts %(zipf%) is about" },
  { { "--gpus", "64", "--experts", "64", "--tokens", "4194304", "--packet-size", "64", "--scheduler", "round_robin" },
    "route: the packet simulation needs about" },
  { { "--seed", "1e300" }, "router%.seed: expected an integer" },
  { { "--experts", "8192" }, "router%.experts: expected a value <= 4096" },
}

-- Files no command can read (YAML and JSON syntax, limits, duplicate keys), each
-- given to every command that reads a file: expected text (a position is required).
local unreadable = {
  { "syntax_tab_indent.yaml", ":2:1: found character that cannot start any token" },
  { "syntax_unclosed_quote.yaml", ":3:1: found unexpected end of stream" },
  { "syntax_bad_indent.yaml", ":3:2: did not find expected key" },
  { "syntax_unknown_alias.yaml", ":1:4: unknown alias '%*nothing'" },
  { "syntax_bad_escape.yaml", ":1:5: found unknown escape character" },
  { "syntax_nul_byte.yaml", ":1:5: control characters are not allowed" },
  { "syntax_control_char.yaml", ":1:5: control characters are not allowed" },
  { "syntax_merge_scalar.yaml", ":3:3: merge key '<<' needs a mapping" },
  { "syntax_unclosed_flow.yaml", ":2:1: did not find expected ',' or ']'" },
  { "syntax_colon_in_flow.yaml", ":1:9: did not find expected ',' or '}'" },
  { "syntax_stray_bracket.yaml", ":2:1: did not find expected key" },
  { "syntax_c1_raw.yaml", ":1:9: control characters are not allowed" },
  { "syntax_deep_flow.yaml", ":1:67: document nests deeper than 64 levels" },
  { "syntax_dup_nested.yaml", ":4:3: duplicate key 'b' %(first defined at 2:3; keep one%)" },
  { "syntax_anchor_redefined_bomb.yaml", ":7:5: document expands to more than 2000000 nodes" },
  { "../bad_alias_bomb.yaml", "document expands to more than" },
  { "../bad_duplicate_key.yaml", ":4:3: duplicate key 'd_model'" },
  { "../bad_multi_doc.yaml", ":2:1: file holds more than one YAML document" },
  { "../bad_not_utf8.yaml", ":2:14: invalid trailing UTF%-8 octet" },
  { "../bad_syntax.yaml", ":4:1: did not find expected ',' or ']'" },
  { "../bad_too_deep.yaml", "document nests deeper than 64 levels" },
  { "json_trailing_comma.json", ":1:9: expected object key string" },
  { "json_single_quotes.json", ":1:2: expected object key string" },
  { "json_comment.json", ":1:9: expected comma or object end" },
  { "json_duplicate.json", ":2:2: duplicate key 'd_model' %(first defined at 1:2; keep one%)" },
  { "json_nan_literal.json", ":1:7: expected value but found invalid token" },
  { "json_unclosed.json", ":2:1: expected comma or array end" },
  { "json_deep.json", ":1:65: found too many nested data structures" },
  { "json_empty.json", ":1:1: expected value" },
  { "json_bad_utf8.json", ":1:8: invalid leading UTF%-8 octet" },
  { "json_control_in_string.json", ":1:7: a: expected a JSON string without raw control characters" },
  { "json_garbage_after.json", ":1:10: expected the end" },
  { "json_dup_nested.json", ":2:2: duplicate key 'b'" },
}

-- The commands that read a file, as argv builders.
local readers = {
  show = function(f) return { "show", f } end,
  validate = function(f) return { "validate", "--cases", f } end,
  route = function(f) return { "route", "--config", f } end,
  ["search --model"] = function(f)
    return { "search", "--model", f, "--hardware", "A100_80GB_SXM", "--gpus", "8" }
  end,
  ["search --workload"] = function(f)
    return { "search", "--model", "gpt3_175b", "--hardware", "A100_80GB_SXM", "--gpus", "8", "--workload", f }
  end,
  ["analyze --model-spec"] = function(f) return analyze_args("model", f) end,
  ["analyze --hardware-lib"] = function(f) return analyze_args("hardware", f) end,
  ["analyze --sweep-config"] = function(f) return analyze_args(nil, nil, { "--sweep-config", f }) end,
  ["analyze --workload-spec + sweep"] = function(f)
    return analyze_args("workload", f, { "--sweep-config", "tests/fixtures/sweep_mb.yaml" })
  end,
}

describe("robustness (issue 13)", function()
  describe("every command refuses unreadable files with a position", function()
    local names = {}
    for name in pairs(readers) do names[#names + 1] = name end
    table.sort(names)
    for _, c in ipairs(unreadable) do
      it(c[1] .. " #slow", function()
        for _, name in ipairs(names) do
          local dir = tmpdir()
          local argv = readers[name](B .. c[1])
          if argv[1] == "analyze" then
            argv[#argv + 1] = "--output-file"
            argv[#argv + 1] = dir .. "/out.yaml"
          end
          refused(argv, c[2], dir)
          os.remove(dir)
        end
      end)
    end
  end)

  describe("analyze refuses extreme and out-of-range inputs", function()
    for _, c in ipairs(analyze_cases) do
      it(c[2], function()
        local dir = tmpdir()
        refused(analyze_args(c[1], B .. c[2], { "--output-file", dir .. "/out.yaml" }), c[3], dir)
        os.remove(dir)
      end)
    end
  end)

  describe("analyze with a sweep refuses the same inputs before any point (no file)", function()
    for _, c in ipairs(analyze_cases) do
      it(c[2], function()
        local dir = tmpdir()
        refused(analyze_args(c[1], B .. c[2], { "--sweep-config", "tests/fixtures/sweep_mb.yaml",
          "--output-file", dir .. "/out.yaml" }), c[3], dir)
        os.remove(dir)
      end)
    end
  end)

  describe("analyze refuses unbounded or empty sweeps before running them", function()
    for _, c in ipairs(sweep_cases) do
      it(c[1], function()
        local dir = tmpdir()
        refused(analyze_args(nil, nil, { "--sweep-config", B .. c[1], "--output-file", dir .. "/out.yaml" }),
          c[2], dir)
        os.remove(dir)
      end)
    end
  end)

  describe("search refuses out-of-range flags", function()
    for _, c in ipairs(search_cases) do
      it(table.concat(c[1], " "), function()
        local argv = { table.unpack(search_base) }
        for _, x in ipairs(c[1]) do argv[#argv + 1] = x end
        refused(argv, c[2])
      end)
    end
  end)

  describe("route refuses what would crash or run for minutes", function()
    for _, c in ipairs(route_cases) do
      it(table.concat(c[1], " "), function()
        local argv = { "route" }
        for _, x in ipairs(c[1]) do argv[#argv + 1] = x end
        refused(argv, c[2])
      end)
    end
  end)

  it("out of memory is bad input (exit 2, one line) #slow", function()
    if h.bin():find("asan", 1, true) then return end -- ASan reserves more address space than any limit
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    for _ = 1, 150 do f:write(string.rep("- 1\n", 100000)) end -- 15,000,000 items
    f:close()
    local p = io.popen("sh -c " .. h.shell_quote("ulimit -v 200000; " .. h.shell_quote(h.bin()) .. " show " ..
      h.shell_quote(path) .. " 2>&1 >/dev/null; echo \"rc=$?\""))
    local out = p:read("a")
    p:close()
    os.remove(path)
    assert.matches("^fathom: not enough memory for this input\nrc=2\n$", out)
  end)

  it("runs a sweep whose points fix what is wrong with the base inputs", function()
    local a = analyze_args("physical", "tests/fixtures/physical_up3.yaml",
      { "--sweep-config", "tests/fixtures/sweep_fixes_base.yaml" })
    local r = h.run(table.unpack(a))
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("up%.size=2", r.stdout)
  end)

  it("refuses commands used wrongly with one line", function()
    for _, argv in ipairs({ { "scenario" }, { "scenario", "run", "nosuch" }, { "run" }, { "run", "/nonexistent.lua" },
      { "show" }, { "show", "/nonexistent.yaml" }, { "show", "/tmp" }, { "analyze" }, { "search" },
      { "route", "--bogus" }, { "--bogus" }, { "validate", "--cases", "/tmp" }, { "route", "--config", "/tmp" } }) do
      refused(argv)
    end
  end)

  it("refuses a trace that would be gigabytes (--trace-file, huge batch)", function()
    local dir = tmpdir()
    refused(analyze_args("workload", B .. "train_trace_huge.yaml", { "--trace-file", dir .. "/t.json" }),
      "trace: 200000000 micro%-batches make about 1200000000 events, over the limit", dir)
    os.remove(dir)
  end)

  it("reads anchors longer than 255 bytes on collections", function()
    local v = require("fathom.config").load_file("tests/fixtures/good_long_anchor.yaml")
    assert.are.same({ x = 1 }, v.use)
    assert.are.equal(5, v.t)
  end)

  it("reads JSON with positions, and null as YAML does", function()
    local config = require("fathom.config")
    local errors = require("fathom.errors")
    local path = os.tmpname() .. ".json"
    local f = assert(io.open(path, "w"))
    f:write('{"a": 1,\n "b": null,\n "c": [1, null, "x\\/y"]}\n')
    f:close()
    local v = config.load_file(path)
    os.remove(path)
    assert.are.equal(1, v.a)
    assert.is_nil(v.b)
    assert.are.equal("x/y", v.c[3])
    assert.are.equal(path .. ":1:7", errors.where(v, "a"))
  end)

  it("reports the same first error on every run", function()
    local first
    for _ = 1, 5 do
      local r = refused(analyze_args("model", B .. "model_several_errors.yaml"))
      first = first or r.stderr
      assert.are.equal(first, r.stderr)
    end
  end)

  it("writes YAML it can read back (C1 controls, separators, BOM, bytes that are not UTF-8)", function()
    local yaml = require("fathom.format.yaml")
    local config = require("fathom.config")
    for _, str in ipairs({ "a\194\133b", "x\194\159y", "l\226\128\168s", "\239\187\191b", "t\tx\0y" }) do
      local v = config.load_string(yaml.encode({ k = str }), "roundtrip")
      assert.are.equal(str, v.k)
    end
    assert.is_table(config.load_string(yaml.encode({ k = "bad\255\254" }), "roundtrip"))
  end)

  describe("leaves no temporary file behind", function()
    it("route --trace: a unique temporary beside the trace, an existing F.tmp untouched", function()
      local dir = tmpdir()
      local keep = assert(io.open(dir .. "/t.csv.tmp", "w"))
      keep:write("mine")
      keep:close()
      local r = h.run("route", "--tokens", "1024", "--trace", dir .. "/t.csv")
      assert.are.equal(0, r.code, r.stderr)
      assert.are.equal("t.csv\nt.csv.tmp\n", dir_entries(dir))
      local f = assert(io.open(dir .. "/t.csv.tmp"))
      assert.are.equal("mine", f:read("a"))
      f:close()
      os.execute("rm -rf " .. h.shell_quote(dir))
    end)

    it("search with workers: the definition file is removed", function()
      local dir = tmpdir()
      for _, extra in ipairs({ "", "--fix tp=3" }) do -- a run that succeeds and one that fails
        local ok = os.execute("TMPDIR=" .. h.shell_quote(dir) .. " " .. h.shell_quote(h.bin()) ..
          " search --model megatron_gpt_1.7b --hardware A100_80GB_SXM --gpus 16 --workers 2 --format json " ..
          extra .. " >/dev/null 2>&1")
        assert.are.equal(extra == "", ok == true)
        assert.are.equal("", dir_entries(dir))
      end
      os.remove(dir)
    end)

    it("SIGTERM during a sweep: exit 143, the output directory empty", function()
      local dir = tmpdir()
      local sweep = dir .. "-sweep.yaml"
      local f = assert(io.open(sweep, "w"))
      f:write("sweep:\n  workload_spec.total_train_tokens: {start: 1000000, stop: 1999000, step: 1000}\n" ..
        "  workload_spec.kernel_launch_sec: {start: 0, stop: 99e-9, step: 1e-9}\n")
      f:close()
      local argv = analyze_args(nil, nil, { "--sweep-config", sweep, "--output-file", dir .. "/out.yaml" })
      local parts = { h.shell_quote(h.bin()) }
      for _, a in ipairs(argv) do parts[#parts + 1] = h.shell_quote(a) end
      local cmd = table.concat(parts, " ") .. " 2>/dev/null & pid=$!; sleep 1; kill -TERM $pid; wait $pid; echo $?"
      local p = io.popen("sh -c " .. h.shell_quote(cmd))
      local code = tonumber(p:read("a"):match("(%d+)%s*$"))
      p:close()
      assert.are.equal(143, code)
      assert.are.equal("", dir_entries(dir))
      os.remove(sweep)
      os.remove(dir)
    end)
  end)
end)
