-- Completeness of the default strategy space (issue 16): pinning any single knob to any
-- of its legal values never finds a strategy faster than the unpinned search's best. A
-- pinned search explores a subset of the default space only if every value a strategy
-- can take is in that space, so a "better" pinned answer is a hole in the space (the
-- micro-batch lists {1, 2, 4, 8, 16} and virtual stages {1, 2, 4} had such holes).
local search = require("fathom.search")

local REL = 1e-12

local problems = {
  { name = "GPT-3 175B, 1,024 A100, batch 1536", model = "gpt3_175b", node = "A100_80GB_SXM", gpus = 1024,
    pod_size = 8, global_batch = 1536, seq = 2048 },
  { name = "Mixtral 8x7B (MoE), 32 H100, batch 64", model = "mixtral_8x7b", node = "H100_SXM", gpus = 32,
    pod_size = 8, global_batch = 64, seq = 4096 },
  { name = "MT-NLG 530B, 5,128 A100 (641 pods), batch up to 2520, rounded down", model = "megatron_gpt_530b",
    node = "A100_80GB_SXM", gpus = 5128, pod_size = 8, global_batch = 2520, seq = 2048, batch_rounding = "down" },
}

local function prepare(p, fix)
  local a = { workload = "train_specs/search_default.yaml", top = 1, fix = fix }
  for k, v in pairs(p) do
    if k ~= "name" then a[k] = v end
  end
  return (search.prepare(a))
end

local function best(p, fix)
  local res = search.run(prepare(p, fix), 1, false)
  return res.hits[1]
end

-- The legal values of each knob in the default space: the listed ones as they are; the
-- automatic ones (virtual stages, micro-batch) every value some placement can take.
local function legal(p)
  local def = prepare(p)
  local s = def.space
  local v = {}
  for _, k in ipairs({ "tp", "pp", "recompute", "dp", "schedule", "sp", "cp", "pp_in", "tp_moe", "ep", "trim_first",
    "trim_last" }) do
    v[k] = s[k]
  end
  local layers, gpus, batch = def.model.n_layers, def.pod_size * def.num_pods, def.workload.global_batch_size
  local vs, mb = { [1] = true }, {}
  for _, pp in ipairs(s.pp) do
    -- whole chunks, or Megatron's embedding and loss accounting (layers + 2 in whole chunks)
    for x = 2, (layers + 2) // pp do
      if layers % (pp * x) == 0 or (pp > 1 and (layers + 2) % (pp * x) == 0) then vs[x] = true end
    end
    for _, tp in ipairs(s.tp) do
      local dp = math.max(gpus // (tp * pp), 1)
      for m = 1, math.min(s.mb_max, batch // dp) do
        if def.batch_rounding == "down" or batch % (dp * m) == 0 then mb[m] = true end
      end
    end
  end
  v.vs, v.mb = {}, {}
  for x in pairs(vs) do v.vs[#v.vs + 1] = x end
  for x in pairs(mb) do v.mb[#v.mb + 1] = x end
  table.sort(v.vs)
  table.sort(v.mb)
  return v
end

describe("the default search space is complete", function()
  for _, p in ipairs(problems) do
    it(p.name .. ": pinning one knob never beats the unpinned best", function()
      local free = best(p)
      assert.is_table(free, "the unpinned search finds a strategy")
      local pinned, faster = 0, {}
      for knob, values in pairs(legal(p)) do
        for _, x in ipairs(values) do
          local b = best(p, { [knob] = x })
          if b then
            pinned = pinned + 1
            if b.objective < free.objective * (1 - REL) then
              faster[#faster + 1] = string.format("%s=%s: %.6g s < %.6g s", knob, tostring(x), b.objective,
                free.objective)
            end
          end
        end
      end
      assert.are.same({}, faster)
      assert.is_true(pinned >= 10, "pinned searches that found a strategy: " .. pinned)
    end)
  end

  it("uneven pipeline splits are searched: a pinned trim runs that split", function()
    local def = prepare(problems[1])
    assert.are.same({ 0, 1 }, def.space.trim_first)
    assert.are.same({ 0, 1 }, def.space.trim_last)
    -- GPT-3's 96 layers on PP 8: 12 a stage; one fewer beside the embedding
    local b = best(problems[1], { trim_first = 1, pp = 8 })
    assert.are.equal(1, b.trim_first)
    assert.are.equal(11, b.first_stage_layers)
    b = best(problems[1], { trim_last = 1, pp = 8 })
    assert.are.equal(11, b.last_stage_layers)
  end)

  it("pipeline degrees that do not divide the layers are searched, their stages split unevenly", function()
    -- 126 layers: the divisors up to 128 (1, 2, 3, 6, 7, 9, 14, 18, 21, 42, 63, 126) and, on
    -- 2,048 pods of 8, the powers of two up to 128 that tile (4, 8, 16, 32, 64; 128 > 126 layers)
    assert.are.same({ 1, 2, 3, 4, 6, 7, 8, 9, 14, 16, 18, 21, 32, 42, 63, 64, 126 },
      search.pipeline_degrees(126, 8, 2048))
    -- 61 layers (prime) on one pod of 8: its divisors 1 and 61, and PP 2, 4, 8 inside the pod
    assert.are.same({ 1, 2, 4, 8, 61 }, search.pipeline_degrees(61, 8, 1))
    -- 641 pods (prime), 105 layers: nothing across pods but 641 > 105; inside, 2, 4, 8
    assert.are.same({ 1, 2, 3, 4, 5, 7, 8, 15, 21, 35, 105 }, search.pipeline_degrees(105, 8, 641))
    local llama = { model = "llama3.1_405b", node = "H100_SXM", gpus = 16384, pod_size = 8, global_batch = 2048,
      seq = 8192 }
    -- Meta's PP 16: 16 x ceil(126 / 16) = 128 layer slots, 2 too many: the last and the first
    -- stage hold 7 layers, the 14 middle ones 8 (7 + 14 x 8 + 7 = 126)
    local pinned = best(llama, { pp = 16, trim_first = 0, trim_last = 0 })
    assert.are.equal(16, pinned.pp)
    assert.are.equal(7, pinned.first_stage_layers)
    assert.are.equal(7, pinned.last_stage_layers)
    -- the unpinned search holds it: its best is no slower, and itself a PP that does not divide 126
    local free = best(llama)
    assert.is_true(free.objective <= pinned.objective)
    assert.are_not.equal(0, 126 % free.pp)
  end)

  it("the holes of the old space are gone: micro-batch 3 and 6, virtual stages 3, 6 and 12 are searched", function()
    local def = prepare(problems[1])
    assert.are.equal("auto", def.space.mb)
    assert.are.equal("auto", def.space.vs)
    local v = legal(problems[1])
    local has = {}
    for _, x in ipairs(v.mb) do has["mb" .. x] = true end
    for _, x in ipairs(v.vs) do has["vs" .. x] = true end
    for _, k in ipairs({ "mb3", "mb6", "vs3", "vs6", "vs12" }) do assert.is_true(has[k], k) end
    local b = best(problems[1], { vs = 6 })
    assert.are.equal(6, b.vs)
    b = best(problems[1], { mb = 3 })
    assert.are.equal(3, b.mb)
  end)
end)
