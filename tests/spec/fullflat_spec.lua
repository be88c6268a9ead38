-- scenarios/fullflat: the FullFlat co-design study (Tithi et al. 2025) at its default size. The
-- study's qualitative findings are checked as fathom answers them (two it disagrees with, as
-- the README says), and the README's output block is what the scenario prints.
local h = require("helpers")

local study = dofile("scenarios/fullflat/study.lua")
local report = dofile("scenarios/fullflat/report.lua")

local res -- computed once (28 searches over 2 processes), on first use
local function result()
  res = res or study.run({ jobs = 2 })
  return res
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

describe("scenarios/fullflat", function()
  it("has the study's axes: 2 models x 2 networks x 2 domains, and 5 one-at-a-time changes per model and network",
    function()
      local pts = study.points("default")
      local grid, sens = 0, 0
      for _, p in ipairs(pts) do
        if p.kind == "grid" then grid = grid + 1 else sens = sens + 1 end
      end
      assert.are.equal(8, grid)
      assert.are.equal(2 * 2 * 5, sens)
    end)

  it("FullFlat is one tier at the scale-up link's bandwidth; two-tier keeps its 800 Gb/s NIC", function()
    local ff = study.def({ model = "dense", network = "full_flat", domain = 8, flops = 1, hbm_bw = 1, hbm_cap = 1,
      overlap = true, inc = true })
    assert.are.equal("full_flat", ff.scale_out_type)
    assert.are.same(ff.scale_up, ff.scale_out)
    local tt = study.def({ model = "dense", network = "two_tier", domain = 8, flops = 2, hbm_bw = 2, hbm_cap = 1,
      overlap = false, inc = false })
    assert.are.equal("two_tier", tt.scale_out_type)
    -- ib_xdr: 100e9 B/s (800 Gb/s) per direction; B200 2.25e15 BF16 and 8 x 1e12 B/s HBM, both doubled
    assert.are.equal(100e9, tt.scale_out.bandwidth_nominal)
    assert.are.equal(4.5e15, tt.node.device_compute.bf16_nominal)
    assert.are.equal(2e12, tt.node.device_memory_tiers.xpu_memory.bandwidth_per_stack_nominal)
    assert.are.equal(0, tt.workload.comp_comm_efficiency)
    assert.is_false(tt.scale_up.in_network_reduction)
  end)

  it("answers every point with a strategy that fits; with uniform bandwidth the domain does not matter", function()
    local r = result()
    for i, p in ipairs(r.points) do
      assert.is_true(r.results[i].fits, p.model .. " " .. p.network .. " " .. p.domain)
      assert.is_true(r.results[i].mfu > 0.05 and r.results[i].mfu < 0.8)
    end
    local a = study.find(r, { kind = "grid", model = "dense", network = "full_flat", domain = 8 })
    local b = study.find(r, { kind = "grid", model = "dense", network = "full_flat", domain = 64 })
    -- within 5%, not exactly: both pick TP 4 x PP 2 DualPipe over DP 512, but in an 8-GPU
    -- domain TP has the scale-up links to itself while DP crosses the (equally fast)
    -- scale-out tier, and in a 64-GPU domain 8 of DP's 512 share TP's links, so the TP
    -- collectives of the passes DualPipe runs alone (comp_comm_efficiency 0.5 here) take twice
    -- as long: 41 -> 81 ms exposed
    assert.are.same({ 4, 2, 512 }, { a.tp, a.pp, a.dp })
    assert.are.same({ 4, 2, 512 }, { b.tp, b.pp, b.dp })
    assert.is_true(b.tokens_per_s <= a.tokens_per_s)
    h.near(a.tokens_per_s, b.tokens_per_s, 4e-2, "GPT-3 on FullFlat, 8- vs 64-GPU domains")
    -- and that is the TP traffic: twice as long where DP shares its links
    assert.is_true(b.exposed_s.tp > 1.9 * a.exposed_s.tp)
    h.near(b.step_s - a.step_s, b.exposed_s.tp - a.exposed_s.tp, 0.1, "the step's growth is the TP's")
  end)

  it("agrees with five of the study's findings and disagrees with two (in-network collectives, HBM capacity)",
    function()
      local holds = {}
      for _, f in ipairs(study.findings(result())) do holds[#holds + 1] = f.holds end
      assert.are.same({ true, true, true, true, false, true, false }, holds)
      assert.is_true(study.advantage(result(), "moe", 8) > 1.5) -- the MoE gains most, at small domains
      assert.is_true(study.advantage(result(), "dense", 64) < 1.10)
    end)

  it("prints what README.md shows", function()
    local shown = read("README.md"):match("```\n%$ fathom scenario run fullflat\n(.-)```")
    assert.is_not_nil(shown)
    assert.are.equal(shown, report.text(study, result()))
  end)

  it("draws the MFU heatmap (a cell per model x network x domain) and the gain per model", function()
    local svgs = report.svgs(study, result())
    local _, rects = svgs["fullflat_mfu.svg"]:gsub("<rect ", "")
    assert.are.equal(2 * 2 * 2, rects)
    assert.matches("MFU %(%%%) of the best strategy", svgs["fullflat_mfu.svg"])
    local _, lines = svgs["fullflat_gain.svg"]:gsub("<polyline ", "")
    assert.are.equal(2, lines)
    assert.matches("GPT%-3 175B %(dense%): 8, 1%.18", svgs["fullflat_gain.svg"])
  end)

  it("refuses a bad argument with one line and exit 2", function()
    local r = h.run("scenario", "run", "fullflat", "--jobs", "0")
    assert.are.equal(2, r.code)
    assert.are.equal("fathom: fullflat: --jobs 0: expected a positive integer\n", r.stderr)
    r = h.run("scenario", "run", "fullflat", "--fast")
    assert.are.equal(2, r.code)
    assert.matches("unknown argument '%-%-fast'", r.stderr)
  end)
end)
