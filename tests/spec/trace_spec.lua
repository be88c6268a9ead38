-- fathom trace: Chakra execution traces written by fathom, decoded with Chakra's own
-- schema (tests/fixtures/chakra/et_def.proto, compiled by protoc, read by python3-protobuf:
-- Debian's protobuf-compiler and python3-protobuf, in the Makefile's PACKAGES) and checked
-- against fathom's step model and communication record.
local h = require("helpers")
local json = require("fathom.format.json")
local trace = require("fathom.trace")

local F = "tests/fixtures/chakra/"
local HW = "tests/fixtures/tiny/hardware.yaml"

local function inputs(over)
  local a = { hardware_lib = HW, physical = F .. "physical.yaml", logical = F .. "logical.yaml",
    workload = F .. "train.yaml", model = F .. "model.yaml", pass_mode = "training" }
  for k, v in pairs(over or {}) do a[k] = v end
  return a
end

local function cli_args(extra)
  local a = { "trace", "--hardware-lib", HW, "--physical-topology", F .. "physical.yaml",
    "--logical-topology", F .. "logical.yaml", "--workload-spec", F .. "train.yaml",
    "--model-spec", F .. "model.yaml" }
  for _, x in ipairs(extra or {}) do a[#a + 1] = x end
  return table.unpack(a)
end

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok
end

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(sh("mkdir " .. h.shell_quote(p)))
  return p
end

local function rmdir(p) sh("rm -rf " .. h.shell_quote(p)) end

local function listdir(p)
  local f = assert(io.popen("ls -A " .. h.shell_quote(p)))
  local out = {}
  for line in f:lines() do out[#out + 1] = line end
  f:close()
  table.sort(out)
  return out
end

local function slurp(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- Debian's python3 (python3-protobuf lives there), else the first on PATH.
local PY = io.open("/usr/bin/python3") and "/usr/bin/python3" or "python3"
local generated -- protoc's output directory, made once

-- decode(paths) -> list of summaries (tests/fixtures/chakra/decode.py).
local function decode(paths)
  if not generated then
    generated = tmpdir()
    assert(sh("protoc --python_out=" .. h.shell_quote(generated) .. " -I " .. F .. " " .. F .. "et_def.proto"),
      "protoc failed: install protobuf-compiler (make deps installs the Makefile's PACKAGES)")
  end
  local quoted = {}
  for i, p in ipairs(paths) do quoted[i] = h.shell_quote(p) end
  local f = assert(io.popen(PY .. " " .. F .. "decode.py " .. h.shell_quote(generated) .. " " ..
    table.concat(quoted, " ") .. " 2>&1"))
  local out = f:read("a")
  f:close()
  local ok, res = pcall(json.decode, out)
  assert(ok and type(res) == "table",
    "decoding with the Chakra schema failed (python3-protobuf installed?): " .. out:sub(1, 400))
  return res
end

-- The kind of a collective from its process group id (1 + kind x ranks + lowest rank).
local function kind_of(pg, n)
  return trace.KINDS[(tonumber(pg) - 1) // n + 1]
end

local function written(over, opts)
  local tr, raw = trace.compile(inputs(over))
  local dir = tmpdir()
  local o = { keep_stats = true }
  for k, v in pairs(opts or {}) do o[k] = v end
  local s = trace.write_chakra(tr, dir, o)
  return tr, raw, dir, s
end

local function dual(info) return info.schedule == "DUALPIPE" and info.chunks == 2 end

-- The checks every layout must pass, on every rank of the job.
local function check_job(tr, raw, dir)
  local info = tr:info()
  local n, m = info.ranks, info.microbatches
  local paths = {}
  for r = 0, n - 1 do paths[r + 1] = string.format("%s/fathom.%d.et", dir, r) end
  local d = decode(paths)
  local groups = json.decode(slurp(dir .. "/fathom.comm_groups.json"))
  local r0 = raw.result
  local by_stage = {}
  for r = 0, n - 1 do
    local s = d[r + 1]
    -- Global metadata first, then nodes numbered 0.. with every dependency on an earlier node.
    assert.are.equal("0.0.4", s.version)
    assert.are.equal(tostring(r), s.metadata["fathom.rank"])
    assert.is_true(s.ids_ok)
    assert.is_true(s.deps_ok)
    assert.are.equal(0, s.cpu_ops)
    assert.are.equal(0, s.recvs_unused) -- every received hand-off is waited for
    local stage = tr:stage(r)
    assert.are.equal(tostring(stage), s.metadata["fathom.stage"])
    assert.are.equal(tostring(info.chunks), s.metadata["fathom.chunks"])
    -- Every collective's group holds the rank and has its dimension's size.
    local bytes = {}
    for _, c in ipairs(s.colls) do
      local kind = kind_of(c[4], n)
      local members = groups[c[4]]
      assert.is_truthy(members, "group " .. c[4] .. " is in the comm-group file")
      assert.are.equal(info.group_size[kind], #members)
      local has = false
      for _, x in ipairs(members) do has = has or x == r end
      assert.is_true(has, "rank " .. r .. " is in its " .. kind .. " group")
      if not c[1]:find("pp_gather", 1, true) then bytes[kind] = (bytes[kind] or 0) + c[3] end
    end
    s.kind_bytes = bytes
    by_stage[stage] = by_stage[stage] or {}
    table.insert(by_stage[stage], s)
  end
  -- DP symmetry: every rank of a stage (all its DP, TP, EP peers) carries the same compute
  -- and the same collectives' types and sizes.
  for _, list in pairs(by_stage) do
    for _, s in ipairs(list) do
      assert.are.equal(list[1].compute_us, s.compute_us)
      assert.are.equal(list[1].num_ops, s.num_ops)
      assert.are.equal(list[1].nodes, s.nodes)
      assert.are.equal(#list[1].colls, #s.colls)
      for i, c in ipairs(s.colls) do
        assert.are.same({ list[1].colls[i][2], list[1].colls[i][3] }, { c[2], c[3] })
      end
    end
  end
  -- PP: stage k sends exactly what stage k + 1 receives (peer, tag, size), both directions.
  for r = 0, n - 1 do
    for _, snd in ipairs(d[r + 1].sends) do
      local peer = d[snd[2] + 1]
      local found = false
      for _, rcv in ipairs(peer.recvs) do
        if rcv[1] == snd[1] and rcv[2] == snd[2] and rcv[3] == snd[3] and rcv[4] == snd[4] then found = true end
      end
      assert.is_true(found, string.format("rank %d's send to %d (tag %d) is received", r, snd[2], snd[3]))
    end
    -- a forward and a backward hand-off per micro-batch through each chunk, but for the ends of
    -- the line: interleaved v chunks, 2v - [first stage] - [last stage] per micro-batch; DualPipe
    -- half the micro-batches through each of its two stages, 2 - [first] - [last]; 1F1B v = 1
    local per = dual(info) and 1 or info.chunks
    local s = tr:stage(r)
    local want = info.stages > 1 and m * (2 * per - (s == 0 and 1 or 0) - (s == info.stages - 1 and 1 or 0)) or 0
    assert.are.equal(want, #d[r + 1].sends)
    assert.are.equal(want, #d[r + 1].recvs)
    -- every send is to a neighbouring stage (a wrap: the last stage to the first), and no tag repeats
    local tags = {}
    for _, snd in ipairs(d[r + 1].sends) do
      local to = tr:stage(snd[2])
      assert.is_true(math.abs(to - s) == 1 or (info.chunks > 1 and math.abs(to - s) == info.stages - 1))
      assert.is_nil(tags[snd[2] .. ":" .. snd[3]], "one hand-off per tag")
      tags[snd[2] .. ":" .. snd[3]] = true
    end
  end
  -- The last stage (the slower: it carries the LM head) is the one the step model times:
  -- its compute nodes sum to m (forward + backward kernels) + the optimizer, to the microsecond,
  -- and its collectives to the communication record's bytes per step.
  local last = by_stage[info.stages - 1][1]
  local pm = r0.per_microbatch
  local want_us = 1e6 * (m * (pm.forward_kernel_s + pm.backward_kernel_s) + r0.optimizer_s)
  assert.is_true(math.abs(last.compute_us - want_us) <= 1.0,
    string.format("compute %d us vs the step model's %.1f us", last.compute_us, want_us))
  for _, kind in ipairs({ "tp", "tp_moe", "ep", "cp", "dp", "dp_moe" }) do
    local rec = r0.comm[kind]
    if info.group_size[kind] > 1 and rec.bytes_per_step > 0 then
      h.near(rec.bytes_per_step, last.kind_bytes[kind] or 0, 1e-6, kind .. " bytes per step")
    end
  end
  if info.stages > 1 then -- every boundary's sends, both directions, are the record's PP messages:
    -- 2 m per boundary of the line of v x PP virtual stages (DualPipe: two lines of PP, m / 2 each)
    local sent = 0
    for s = 0, info.stages - 1 do
      for _, snd in ipairs(by_stage[s][1].sends) do sent = sent + snd[4] end
    end
    local handoffs = dual(info) and 2 * m * (info.stages - 1) or 2 * m * (info.chunks * info.stages - 1)
    h.near(r0.comm.pp.bytes_per_call * handoffs, sent, 1e-9, "pp bytes per step")
    if info.chunks == 1 then h.near(r0.comm.pp.bytes_per_step * (info.stages - 1), sent, 1e-9) end
  end
  return d, by_stage
end

describe("fathom.trace", function()
  describe("#write_chakra()", function()
    local tr, raw, dir, summary, d, by_stage
    setup(function()
      tr, raw, dir, summary = written()
      d, by_stage = check_job(tr, raw, dir)
    end)
    teardown(function() rmdir(dir) end)

    it("writes one file per rank and the comm groups, nothing else", function()
      local want = { "fathom.comm_groups.json" }
      for r = 0, 15 do want[#want + 1] = "fathom." .. r .. ".et" end
      table.sort(want)
      assert.are.same(want, listdir(dir))
      assert.are.equal(17, summary.files)
    end)

    it("counts what the decoder reads", function()
      for r = 0, 15 do
        local st, s = summary.stats[r], d[r + 1]
        assert.are.equal(st.nodes, s.nodes)
        assert.are.equal(st.comp_nodes, s.types.COMP_NODE)
        assert.are.equal(st.coll_nodes, s.types.COMM_COLL_NODE)
        assert.are.equal(st.compute_s * 1e6, s.compute_us)
      end
    end)

    it("lays out 1F1B's micro-batches on each stage", function()
      -- 4 micro-batches, 2 stages: stage 0 runs one warm-up forward, stage 1 none.
      local s0, s1 = by_stage[0][1], by_stage[1][1]
      assert.are.equal(4, #s0.sends)
      assert.are.equal(4, #s1.sends)
      assert.are.same({ 0, 2, 4, 6 }, { s0.sends[1][3], s0.sends[2][3], s0.sends[3][3], s0.sends[4][3] })
      -- every kind of collective fathom models here appears: TP (sequence parallel: all-gather and
      -- reduce-scatter), EP all-to-all, DP (ZeRO-1: reduce-scatter buckets, then the weights' all-gather)
      local types = {}
      for _, c in ipairs(s1.colls) do types[kind_of(c[4], 16) .. ":" .. c[2]] = true end
      for _, k in ipairs({ "tp:ALL_GATHER", "tp:REDUCE_SCATTER", "ep:ALL_TO_ALL", "dp:REDUCE_SCATTER",
        "dp:ALL_GATHER", "dp_moe:REDUCE_SCATTER", "dp_moe:ALL_GATHER" }) do
        assert.is_true(types[k], k)
      end
    end)

    it("groups follow the coordinates (PP outermost in the scale-up domain)", function()
      local _, tp = tr:group("tp", 5)
      local _, dp = tr:group("dp", 5)
      local _, ep = tr:group("ep", 5)
      local _, pp = tr:group("pp", 5)
      assert.are.same({ 4, 5 }, tp)
      assert.are.same({ 5, 7, 13, 15 }, dp)
      assert.are.same({ 4, 5, 6, 7 }, ep)
      assert.are.same({ 1, 5 }, pp)
    end)

    it("writes the class form: one file per stage, the rank -> class map, the same bytes", function()
      local cdir = tmpdir()
      trace.write_chakra(tr, cdir, { classes = true })
      assert.are.same({ "fathom.0.et", "fathom.4.et", "fathom.classes.json", "fathom.comm_groups.json" },
        listdir(cdir))
      local map = json.decode(slurp(cdir .. "/fathom.classes.json"))
      assert.are.equal(16, #map.rank_class)
      for r = 0, 15 do assert.are.equal(tr:stage(r), map.rank_class[r + 1]) end
      assert.are.equal(4, map.classes[2].rank)
      assert.are.equal(slurp(dir .. "/fathom.4.et"), slurp(cdir .. "/fathom.4.et"))
      rmdir(cdir)
    end)
  end)

  it("GPipe, DDP, full recomputation, no sequence parallelism: the same checks hold", function()
    local w = os.tmpname()
    local f = assert(io.open(w, "w"))
    f:write([[
global_batch_size: 16
micro_batch_size: 1
seq_length: 1024
float_size_bytes: 2
full_precision_param_float_size: 4
recompute: full
sequence_parallel: false
dp_spec: {variant: DDP}
pp_spec: {variant: GPIPE}
]])
    f:close()
    local tr, raw, dir = written({ workload = w })
    local d = check_job(tr, raw, dir)
    -- GPipe: every forward before any backward on every stage.
    local s0 = d[1]
    assert.are.same({ 0, 2, 4, 6 }, { s0.sends[1][3], s0.sends[2][3], s0.sends[3][3], s0.sends[4][3] })
    rmdir(dir)
    os.remove(w)
  end)

  it("lays out every stage's passes on its own tracks, the bubble where the schedule puts it", function()
    local fmt = require("fathom.format.trace")
    local tr, raw = trace.compile(inputs())
    local ev, t_end = fmt.pipeline_events(tr, raw.result)
    local info = tr:info()
    local passes, names = {}, {}
    for _, e in ipairs(ev) do
      if e.ph == "M" and e.name == "process_name" then names[e.pid] = e.args.name end
      if e.ph == "X" and e.tid == 1 and (e.cat == "forward" or e.cat == "backward" or e.cat == "bubble") then
        passes[e.pid] = passes[e.pid] or {}
        table.insert(passes[e.pid], e)
      end
    end
    local fwd_end = {}
    for s = 0, info.stages - 1 do
      assert.are.equal("stage " .. s, names[s + 1])
      local list, n, t = passes[s + 1], 0, 0
      for i, e in ipairs(list) do
        assert.is_true(e.ts >= t - 1e-6, "passes on a stage do not overlap") -- microseconds
        t = e.ts + e.dur
        if e.cat ~= "bubble" then n = n + 1 end
        if e.cat == "forward" then
          local mb = e.args.microbatch
          fwd_end[s] = fwd_end[s] or {}
          fwd_end[s][mb] = t
          if s > 0 then -- its input: the previous stage's forward plus one hand-off
            assert.is_true(e.ts >= fwd_end[s - 1][mb] + 1e6 * info.pp_hop_s - 1e-6)
          end
        end
        if i == 1 then -- only a later stage waits for its first input
          assert.are.equal(s == 0 and "forward" or "bubble", e.cat)
        end
      end
      assert.are.equal(2 * info.microbatches, n)
    end
    assert.is_true(t_end > 0 and t_end <= 2 * raw.result.step_time_s)
  end)

  -- A workload file from its text (removed by the caller).
  local function workload(text)
    local w = os.tmpname()
    local f = assert(io.open(w, "w"))
    f:write("global_batch_size: 16\nmicro_batch_size: 1\nseq_length: 1024\nfloat_size_bytes: 2\n" ..
      "full_precision_param_float_size: 4\nrecompute: selective\nsequence_parallel: true\n" ..
      "dp_spec: {variant: ZERO1}\n" .. text)
    f:close()
    return w
  end

  -- The Perfetto timeline of a chunked schedule: on every stage its passes in order, none
  -- overlapping, each after the pass it receives from (tr:hop) plus one hand-off; returns
  -- per stage the passes (with start and end) and the idle time before the last pass ends.
  local function timeline(tr, raw)
    local fmt = require("fathom.format.trace")
    local ev = fmt.pipeline_events(tr, raw.result)
    local info = tr:info()
    local by = {}
    for _, e in ipairs(ev) do
      if e.ph == "X" and e.tid == 1 and (e.cat == "forward" or e.cat == "backward" or e.cat == "bubble") then
        by[e.pid - 1] = by[e.pid - 1] or {}
        table.insert(by[e.pid - 1], e)
      end
    end
    local ends, out = {}, {}
    for s = 0, info.stages - 1 do
      out[s] = { passes = {}, idle_us = 0 }
      local t, k = 0, 0
      for _, e in ipairs(by[s]) do
        assert.is_true(e.ts >= t - 1e-6, "passes on a stage do not overlap")
        t = e.ts + e.dur
        if e.cat == "bubble" then
          out[s].idle_us = out[s].idle_us + e.dur
        else
          local fwd, mb, c = tr:pass(s, k)
          assert.are.same({ fwd, mb, c }, { e.cat == "forward", e.args.microbatch, e.args.chunk })
          k = k + 1
          table.insert(out[s].passes, { fwd = fwd, mb = mb, chunk = c, ts = e.ts, te = t, first = #by[s] })
          ends[(fwd and "F" or "B") .. s .. ":" .. c .. ":" .. mb] = t
        end
      end
      assert.are.equal(info.stage_passes, k)
      out[s].first = by[s][1]
    end
    for s = 0, info.stages - 1 do
      for _, q in ipairs(out[s].passes) do
        local from, fc = tr:hop(s, q.fwd, q.mb, q.chunk, false)
        if from then
          local t_in = ends[(q.fwd and "F" or "B") .. from .. ":" .. fc .. ":" .. q.mb]
          assert.is_true(q.ts >= t_in + 1e6 * info.pp_hop_s - 1e-6, "a pass starts after its input arrives")
        end
      end
    end
    return out
  end

  it("interleaved, v = 2: chunk-aware passes, the wrap from the last stage, the same checks hold", function()
    local w = workload("pp_spec: {variant: INTERLEAVED, virtual_stages: 2}\n")
    local tr, raw, dir = written({ workload = w })
    local info = tr:info()
    assert.are.same({ "INTERLEAVED", 2, 16 }, { info.schedule, info.chunks, info.stage_passes })
    local _, by_stage = check_job(tr, raw, dir)
    -- Stage 0 (Megatron-LM's order, test_trace.c): F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 ... The hand-off
    -- tags are 2 (mb x v + the lower virtual stage's chunk) + [gradient]: F0.0 -> 0, F1.0 -> 4,
    -- F0.1 (virtual stage 2 -> 3) -> 2, F1.1 -> 6, F2.0 -> 8, and B0.1's gradient (virtual stage
    -- 2 -> 1, the wrap back to stage 1's chunk 0) -> 2 (0 x 2 + 0) + 1 = 1.
    local s0 = by_stage[0][1]
    local tags = {}
    for i = 1, 6 do tags[i] = s0.sends[i][3] end
    assert.are.same({ 0, 4, 2, 6, 8, 1 }, tags)
    -- chunk 1 of stage 1 holds the model's last block and the head: its pass is the longest
    local st = {}
    for s = 0, 1 do for c = 0, 1 do st[#st + 1] = tr:stage_time(s, c).forward_kernel_s end end
    assert.is_true(st[4] > st[1] and st[4] > st[2] and st[4] > st[3])
    -- the chunks of a stage add up to the stage
    h.near(tr:stage_time(1).backward_kernel_s, tr:stage_time(1, 0).backward_kernel_s +
      tr:stage_time(1, 1).backward_kernel_s, 1e-12)
    -- Perfetto: stage 1 first idles for stage 0's first chunk-0 forward plus one hand-off, then
    -- its passes follow the schedule; interleaving leaves less idle time than 1F1B on the same job
    local tl = timeline(tr, raw)
    assert.are.equal("forward", tl[0].first.cat)
    assert.are.equal("bubble", tl[1].first.cat)
    h.near(1e6 * (tr:stage_time(0, 0).forward_s + info.pp_hop_s), tl[1].first.dur, 1e-9)
    local w1 = workload("pp_spec: {variant: 1F1B}\n")
    local tr1, raw1 = trace.compile(inputs({ workload = w1 }))
    local tl1 = timeline(tr1, raw1)
    assert.is_true(tl[1].idle_us < tl1[1].idle_us,
      string.format("interleaved idles %.0f us, 1F1B %.0f us", tl[1].idle_us, tl1[1].idle_us))
    rmdir(dir)
    os.remove(w)
    os.remove(w1)
  end)

  it("DualPipe on 2 stages: every rank holds both stages, half the micro-batches from each end", function()
    local w = workload("pp_spec: {variant: DUALPIPE}\n")
    local tr, raw, dir = written({ workload = w })
    local info = tr:info()
    assert.are.same({ "DUALPIPE", 2, 8 }, { info.schedule, info.chunks, info.stage_passes })
    local _, by_stage = check_job(tr, raw, dir)
    -- stage i and 1 - i on one rank: both ranks compute the same, to the microsecond
    assert.is_true(math.abs(by_stage[0][1].compute_us - by_stage[1][1].compute_us) <= 1)
    h.near(tr:stage_time(0, 1).backward_kernel_s, tr:stage_time(1, 0).backward_kernel_s, 1e-12)
    -- micro-batches 0, 1 enter at stage 0 and leave from stage 1; 2, 3 the other way
    local s0 = by_stage[0][1]
    for _, snd in ipairs(s0.sends) do
      local mb, grad = snd[3] // 2, snd[3] % 2 == 1
      -- rank 0 sends forward activations of its own micro-batches and gradients of the others
      assert.are.equal(mb >= 2, grad)
    end
    -- Perfetto: both ends start at once (no fill bubble on either stage); a rank is named by both stages
    local tl = timeline(tr, raw)
    local named = {}
    for _, e in ipairs(require("fathom.format.trace").pipeline_events(tr, raw.result)) do
      if e.name == "process_name" then named[e.pid] = e.args.name end
    end
    assert.are.same({ "stage 0 (and 1)", "stage 1 (and 0)" }, named)
    assert.are.equal("forward", tl[0].first.cat)
    assert.are.equal("forward", tl[1].first.cat)
    assert.are.equal(0, tl[1].first.ts)
    rmdir(dir)
    os.remove(w)
  end)

  it("DualPipe on 4 stages: middle ranks pair two stages and wait for both ends", function()
    local l = os.tmpname()
    local f = assert(io.open(l, "w"))
    f:write([[
name: tp2_pp4_dp2_ep2
dimensions:
  - {logical_tag: TP_Attn, maps_to_physical_dimension_name: up, size: 2}
  - {logical_tag: PP, maps_to_physical_dimension_name: up, size: 4}
  - {logical_tag: EP_SU, maps_to_physical_dimension_name: up, size: 2}
  - {logical_tag: DP_Attn, maps_to_physical_dimension_name: out, size: 2}
  - {logical_tag: DP_MoE, maps_to_physical_dimension_name: out, size: 2}
]])
    f:close()
    local w = workload("pp_spec: {variant: DUALPIPE}\n")
    local tr, raw, dir = written({ workload = w, logical = l })
    local info = tr:info()
    assert.are.same({ 4, 8, 2 }, { info.stages, info.microbatches, info.chunks })
    local _, by_stage = check_job(tr, raw, dir)
    -- stage 1 holds model stages 1 and 2 (4 - 1 - 1): it talks to stages 0 and 2 in both lines
    local peers = {}
    for _, snd in ipairs(by_stage[1][1].sends) do peers[tr:stage(snd[2])] = true end
    assert.are.same({ [0] = true, [2] = true }, peers)
    -- the first and the last rank hold the same pair of model stages (0 and 3)
    assert.is_true(math.abs(by_stage[0][1].compute_us - by_stage[3][1].compute_us) <= 1)
    -- Perfetto: the ends start at once, the middle ranks wait for the first hand-off
    local tl = timeline(tr, raw)
    assert.are.equal("forward", tl[0].first.cat)
    assert.are.equal("forward", tl[3].first.cat)
    assert.are.equal("bubble", tl[1].first.cat)
    assert.are.equal("bubble", tl[2].first.cat)
    h.near(1e6 * (tr:stage_time(0, 0).forward_s + info.pp_hop_s), tl[1].first.dur, 1e-9)
    rmdir(dir)
    os.remove(w)
    os.remove(l)
  end)

  it("ZeRO-3 (weights gathered for every pass, gradients reduce-scattered after each backward)", function()
    local w = os.tmpname()
    local f = assert(io.open(w, "w"))
    f:write("global_batch_size: 16\nmicro_batch_size: 1\nseq_length: 1024\nfloat_size_bytes: 2\n" ..
      "full_precision_param_float_size: 4\ndp_spec: {variant: ZERO3}\npp_spec: {variant: 1F1B}\n")
    f:close()
    local tr, raw, dir = written({ workload = w })
    local d = check_job(tr, raw, dir)
    local gathers, reduces = 0, 0
    for _, c in ipairs(d[1].colls) do
      if c[1]:find("zero3_gather", 1, true) then gathers = gathers + 1 end
      if c[1]:find("zero3_reduce", 1, true) then reduces = reduces + 1 end
    end
    -- 4 micro-batches, a forward and a backward each, dense and expert groups
    assert.are.equal(2 * 2 * 4, gathers)
    assert.are.equal(2 * 4, reduces)
    rmdir(dir)
    os.remove(w)
  end)

  it("context parallelism, no pipeline: CP's K/V exchange, DP over DP x CP, the same checks hold", function()
    local l = os.tmpname()
    local f = assert(io.open(l, "w"))
    f:write([[
name: tp2_cp2_dp4_ep4
dimensions:
  - {logical_tag: TP_Attn, maps_to_physical_dimension_name: up, size: 2}
  - {logical_tag: CP, maps_to_physical_dimension_name: up, size: 2}
  - {logical_tag: DP_Attn, maps_to_physical_dimension_name: up, size: 2}
  - {logical_tag: EP_SU, maps_to_physical_dimension_name: up, size: 4}
  - {logical_tag: DP_MoE, maps_to_physical_dimension_name: up, size: 2}
  - {logical_tag: DP_Attn, maps_to_physical_dimension_name: out, size: 2}
  - {logical_tag: DP_MoE, maps_to_physical_dimension_name: out, size: 2}
]])
    f:close()
    local tr, raw, dir = written({ logical = l })
    local info = tr:info()
    assert.are.equal(1, info.stages)
    assert.are.equal(2, info.group_size.cp)
    assert.are.equal(8, info.group_size.dp) -- DP_Attn 4 x CP 2: the gradients' group
    local d = check_job(tr, raw, dir)
    local cp = 0
    for _, c in ipairs(d[1].colls) do
      if kind_of(c[4], 16) == "cp" then cp = cp + 1 end
    end
    assert.is_true(cp > 0)
    assert.are.equal(0, #d[1].sends)
    rmdir(dir)
    os.remove(l)
  end)

  local infer_cases = {
    { "inference_prefill", "global_batch_size: 16\nmicro_batch_size: 2\nseq_length: 1024\n" },
    { "inference_decode", "global_batch_size: 16\nmicro_batch_size: 2\nprefill_seq_len: 1024\n" ..
      "num_generated_tokens: 64\n" },
  }
  for _, c in ipairs(infer_cases) do
    it(c[1] .. ": one iteration, every micro-batch's forward through the pipeline", function()
      local w = os.tmpname()
      local f = assert(io.open(w, "w"))
      f:write(c[2])
      f:close()
      local tr, raw, dir = written({ workload = w, pass_mode = c[1] })
      local info = tr:info()
      assert.is_false(info.training)
      assert.are.equal(1, info.passes)
      local paths = {}
      for r = 0, info.ranks - 1 do paths[r + 1] = string.format("%s/fathom.%d.et", dir, r) end
      local d = decode(paths)
      local slowest = 0
      for s = 0, info.stages - 1 do slowest = math.max(slowest, tr:stage_time(s).forward_s) end
      -- the slowest stage's pass is the one the inference model times
      h.near(raw.result.stage_s, slowest, 1e-9, "stage time")
      for r = 0, info.ranks - 1 do
        local s, st = d[r + 1], tr:stage_time(tr:stage(r))
        assert.is_true(s.ids_ok and s.deps_ok)
        assert.are.equal(0, s.recvs_unused)
        -- forwards only: one hand-off per micro-batch per boundary, no DP, no optimizer
        assert.are.equal(tr:stage(r) < info.stages - 1 and info.microbatches or 0, #s.sends)
        assert.are.equal(tr:stage(r) > 0 and info.microbatches or 0, #s.recvs)
        assert.is_true(math.abs(s.compute_us - 1e6 * info.microbatches * st.forward_kernel_s) <= 1.0)
        for _, col in ipairs(s.colls) do
          local kind = kind_of(col[4], info.ranks)
          assert.is_true(kind ~= "dp" and kind ~= "dp_moe", "no data-parallel traffic")
        end
      end
      rmdir(dir)
      os.remove(w)
    end)
  end

  it("the core's trace methods: geometry, schedule, one rank's file", function()
    local tr = trace.compile(inputs())
    local info = tr:info()
    assert.are.same({ 16, 2, 4, 2, true }, { info.ranks, info.stages, info.microbatches, info.passes, info.training })
    -- rank 5: TP 1, DP 0 in the domain, PP 1 (stride 4), domain 0: its stage-0 peer is rank 1
    assert.are.equal(1, tr:stage(5))
    assert.are.equal(1, tr:stage_peer(5, 0))
    assert.are.equal(5, tr:stage_peer(1, 1))
    local id, members = tr:group("dp", 5)
    assert.are.equal(id, tr:group_id("dp", 5))
    assert.are.equal(1 + 5 * 16 + members[1], id) -- kind dp = 5, lowest rank first
    -- stage 0 of 2, 1F1B: one warm-up forward, then backward 0
    local f1, m1 = tr:pass(0, 0)
    local f2, m2 = tr:pass(0, 2)
    assert.are.same({ true, 0, false, 0 }, { f1, m1, f2, m2 })
    local path = os.tmpname()
    local st = tr:write_rank(5, path)
    assert.are.equal(st.bytes, #slurp(path))
    os.remove(path)
    local bad, msg = tr:write_rank(5, "/proc/fathom-no/x.et")
    assert.is_nil(bad)
    assert.matches("x.et", msg)
    assert.error_matches(function() tr:write_rank(16, path) end, "rank outside the job")
    -- the binding takes a compiled plan, nothing else
    local core = require("fathom.core")
    assert.error_matches(function() core.trace_compile({}) end, "TrainPlan or fathom.InferPlan")
  end)

  it("fathom.trace{...} writes what fathom trace writes", function()
    local fathom = require("fathom")
    local dir = tmpdir()
    local s = fathom.trace({ hardware = HW, physical = F .. "physical.yaml", logical = F .. "logical.yaml",
      workload = F .. "train.yaml", model = F .. "model.yaml", output_dir = dir .. "/t", ranks = "0-1" })
    assert.are.equal(3, s.files)
    assert.are.same({ "fathom.0.et", "fathom.1.et", "fathom.comm_groups.json" }, listdir(dir .. "/t"))
    rmdir(dir)
  end)

  it("parse_ranks() reads lists and ranges and refuses ranks outside the job", function()
    assert.are.same({ 0, 3, 4, 5, 9 }, trace.parse_ranks("9,3-5,0,4", 16))
    assert.error_matches(function() trace.parse_ranks("16", 16) end, "rank 16 is outside the job")
    assert.error_matches(function() trace.parse_ranks("a", 16) end, "expected ranks")
  end)
end)

describe("fathom trace (command line)", function()
  it("writes the chosen ranks and says where", function()
    local dir = tmpdir()
    local r = h.run(cli_args({ "--output-dir", dir .. "/t", "--ranks", "3,12", "--prefix", "job" }))
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("wrote 2 Chakra traces", r.stderr)
    assert.are.same({ "job.12.et", "job.3.et", "job.comm_groups.json" }, listdir(dir .. "/t"))
    rmdir(dir)
  end)

  it("writes ASTRA-sim's network, system and memory files with --astra-configs", function()
    local dir = tmpdir()
    local r = h.run(cli_args({ "--output-dir", dir .. "/t", "--ranks", "0", "--astra-configs" }))
    assert.are.equal(0, r.code, r.stderr)
    assert.matches("and ASTRA%-sim's network, system and memory files to", r.stderr)
    assert.are.same({ "fathom.0.et", "fathom.comm_groups.json", "fathom.network.yml", "fathom.remote_memory.json",
      "fathom.system.json" }, listdir(dir .. "/t"))
    -- the TOY node: 8 GPUs on a 100e9 B/s link (1 us), 2 domains on a 10e9 B/s NIC (5 us); ASTRA-sim
    -- reads GB/s of 2^30 bytes: 100e9 / 2^30 = 93.1323, 10e9 / 2^30 = 9.3132
    local net = slurp(dir .. "/t/fathom.network.yml")
    assert.matches("topology: %[ Switch, Switch %]", net)
    assert.matches("npus_count: %[ 8, 2 %]", net)
    assert.matches("bandwidth: %[ 93.1323, 9.3132 %]", net)
    assert.matches("latency: %[ 1000.0, 5000.0 %]", net)
    local sys = json.decode(slurp(dir .. "/t/fathom.system.json"))
    assert.are.equal(0, sys["roofline-enabled"])
    assert.are.same({ "ring", "ring" }, sys["all-to-all-implementation"])
    assert.are.equal("NO_MEMORY_EXPANSION", json.decode(slurp(dir .. "/t/fathom.remote_memory.json"))["memory-type"])
    rmdir(dir)
  end)

  it("astra_network(): a ring dimension gives each of its two links half a GPU's bandwidth", function()
    local p = os.tmpname()
    local f = assert(io.open(p, "w"))
    local ring = slurp(F .. "physical.yaml"):gsub("topology_type: switched\n    size: 8",
      "topology_type: ring\n    size: 8")
    f:write(ring)
    f:close()
    local tr = trace.compile(inputs({ physical = p }))
    local net = trace.astra_network(tr)
    assert.matches("topology: %[ Ring, Switch %]", net)
    assert.matches("bandwidth: %[ 46.5661, 9.3132 %]", net) -- 50e9 / 2^30
    os.remove(p)
  end)

  it("writes the Perfetto timeline to --output-file", function()
    local out = os.tmpname()
    local r = h.run(cli_args({ "--format", "perfetto", "--output-file", out }))
    assert.are.equal(0, r.code, r.stderr)
    local doc = json.decode(slurp(out))
    assert.is_true(#doc.traceEvents > 0)
    assert.matches("wrote the Perfetto timeline to", r.stderr)
    os.remove(out)
  end)

  local bad = {
    { "a rank outside the job", { "--output-dir", "@DIR@/t", "--ranks", "0,16" }, "rank 16 is outside the job" },
    { "an unwritable directory", { "--output-dir", "/proc/fathom-no/t" }, "cannot write traces to" },
    { "a file as the directory", { "--output-dir", "@FILE@" }, "not a directory" },
    { "no output directory", {}, "needs %-%-output%-dir" },
    { "an invalid point", { "--output-dir", "@DIR@/t", "--workload-spec", F .. "bad_train.yaml" },
      "global_batch_size" },
  }
  for _, c in ipairs(bad) do
    it("refuses " .. c[1] .. " with one line, exit 2 and no files", function()
      local dir = tmpdir()
      local file = os.tmpname()
      local a = {}
      for i, x in ipairs(c[2]) do a[i] = x:gsub("@DIR@", dir):gsub("@FILE@", file) end
      local r = h.run(cli_args(a))
      assert.are.equal(2, r.code, r.stderr)
      assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
      assert.matches(c[3], r.stderr)
      assert.are.same({}, listdir(dir))
      rmdir(dir)
      os.remove(file)
    end)
  end

  -- Requests the chunked schedules cannot lay out: one line naming the file and key, exit 2, no files.
  local chunk_bad = {
    { "virtual stages that do not divide a stage's layers",
      "pp_spec: {variant: INTERLEAVED, virtual_stages: 2}\n", { n_layers = 6 },
      ":%d+:%d+: pp_spec.virtual_stages: a trace splits each stage's layers evenly into its 2 model chunks, " ..
      "but stage 0 has 3 layers" },
    { "a DualPipe with fewer than 2 x PP micro-batches", "global_batch_size: 8\npp_spec: {variant: DUALPIPE}\n",
      nil, ":%d+:%d+: global_batch_size: a trace cannot lay out DUALPIPE: .*at least 2 x PP = 4" },
    { "a rank outside the job (DualPipe)", "pp_spec: {variant: DUALPIPE}\n", nil,
      "rank 16 is outside the job", { "--ranks", "0,16" } },
    { "a rank outside the job (interleaved)", "pp_spec: {variant: INTERLEAVED, virtual_stages: 2}\n", nil,
      "rank 99 is outside the job", { "--ranks", "99" } },
  }
  for _, c in ipairs(chunk_bad) do
    it("refuses " .. c[1] .. " with one line, exit 2 and no files", function()
      local w = os.tmpname()
      local f = assert(io.open(w, "w"))
      local base = "global_batch_size: 16\nmicro_batch_size: 1\nseq_length: 1024\n"
      if c[2]:find("global_batch_size", 1, true) then base = "micro_batch_size: 1\nseq_length: 1024\n" end
      f:write(base .. c[2])
      f:close()
      local model = F .. "model.yaml"
      if c[3] then
        model = os.tmpname()
        local src = slurp(F .. "model.yaml"):gsub("n_layers: 4", "n_layers: " .. c[3].n_layers)
        local mf = assert(io.open(model, "w"))
        mf:write(src)
        mf:close()
      end
      local dir = tmpdir()
      local a = { "trace", "--hardware-lib", HW, "--physical-topology", F .. "physical.yaml",
        "--logical-topology", F .. "logical.yaml", "--workload-spec", w, "--model-spec", model,
        "--output-dir", dir .. "/t" }
      for _, x in ipairs(c[5] or {}) do a[#a + 1] = x end
      local r = h.run(table.unpack(a))
      assert.are.equal(2, r.code, r.stderr)
      assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
      assert.matches(c[4], r.stderr)
      assert.are.same({}, listdir(dir))
      rmdir(dir)
      os.remove(w)
      if c[3] then os.remove(model) end
    end)
  end
end)

describe("README.md execution traces", function()
  it("shows what fathom trace prints today, in every '$ fathom trace' block", function()
    local f = assert(io.open("README.md", "rb"))
    local text = f:read("a")
    f:close()
    local n = 0
    for body in text:gmatch("```\n(%$ fathom trace.-)```") do
      n = n + 1
      local cmd, shown = {}, {}
      local continued = true
      for line in body:gmatch("([^\n]*)\n") do
        if continued then
          local part = line:gsub("^%$ fathom ", ""):gsub("^%s+", "")
          continued = part:sub(-1) == "\\"
          cmd[#cmd + 1] = continued and part:sub(1, -2) or part
        else
          shown[#shown + 1] = line
        end
      end
      local args = {}
      for a in table.concat(cmd, " "):gmatch("%S+") do args[#args + 1] = a end
      local out = args[#args]
      rmdir(out)
      local r = h.run(table.unpack(args))
      assert.are.equal(0, r.code, r.stderr)
      assert.are.same(shown, { (r.stderr:gsub("\n$", "")) })
      rmdir(out)
    end
    assert.are.equal(2, n, "the README's '$ fathom trace' blocks")
  end)
end)
