-- fathom.progress: a progress line with rate and ETA on a terminal, cleared when done,
-- silent otherwise.
local progress = require("fathom.progress")

-- a fake clock and stderr
local function rig(enabled)
  local t, out = 0, {}
  local p = progress.new({ label = "sweep", total = 200, unit = "points", enabled = enabled,
    now = function() return t end, write = function(s) out[#out + 1] = s end })
  return p, function(x) t = x end, out
end

describe("fathom.progress", function()
  it("line(): done/total, percent, rate and ETA (50 of 200 in 10 s: 5/s, 150 left: 30 s)", function()
    assert.are.equal("sweep 50/200 (25%), 5 points/s, ETA 30 s", progress.line("sweep", 50, 200, 10, "points"))
  end)

  it("duration(): seconds, minutes, hours", function()
    assert.are.equal("42 s", progress.duration(42))
    assert.are.equal("3 min 5 s", progress.duration(185))
    assert.are.equal("2 h 10 min", progress.duration(7800))
    assert.are.equal("?", progress.duration(math.huge))
  end)

  it("draws nothing in the first second, then at most ten times a second, and clears when done", function()
    local p, at, out = rig(true)
    at(0.5); p:update(10)
    assert.are.same({}, out) -- work that ends within a second leaves no trace
    at(1.0); p:update(20)
    assert.are.equal(1, #out)
    assert.are.equal("\r\27[Ksweep 20/200 (10%), 20 points/s, ETA 9 s", out[1])
    at(1.05); p:update(21)
    assert.are.equal(1, #out) -- 50 ms later: not redrawn
    at(1.2); p:update(24)
    assert.are.equal(2, #out)
    p:finish()
    assert.are.equal("\r\27[K", out[3])
  end)

  it("disabled (stderr not a terminal): writes nothing", function()
    local p, at, out = rig(false)
    at(5); p:update(100)
    p:finish()
    assert.are.same({}, out)
  end)

  it("a to-be-closed line is cleared when the work fails", function()
    local p, at, out = rig(true)
    local ok = pcall(function()
      local bar <close> = p
      at(2); bar:update(50)
      error("boom")
    end)
    assert.is_false(ok)
    assert.are.equal("\r\27[K", out[#out])
  end)

  it("a sweep piped to a file writes no progress to stderr", function()
    local h = require("helpers")
    local T = "tests/fixtures/tiny/"
    local sweep = os.tmpname()
    local f = assert(io.open(sweep, "w"))
    f:write("sweep:\n  workload_spec.micro_batch_size: [1, 2]\n")
    f:close()
    local r = h.run("analyze", "--hardware-lib", T .. "hardware.yaml", "--physical-topology", T .. "physical.yaml",
      "--logical-topology", T .. "logical.yaml", "--workload-spec", T .. "train.yaml", "--model-spec",
      T .. "model.yaml", "--sweep-config", sweep, "--format", "csv")
    os.remove(sweep)
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("", r.stderr)
  end)
end)
