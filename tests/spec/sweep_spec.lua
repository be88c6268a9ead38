local sweep = require("fathom.sweep")
local config = require("fathom.config")

local function docs()
  return {
    workload_spec = config.load_string("global_batch_size: 8\nmicro_batch_size: 1\n", "w.yaml"),
    logical_topology = config.load_string([[
dimensions:
  - {logical_tag: TP_Attn, maps_to_physical_dimension_name: a, size: 2}
  - {logical_tag: DP_Attn, maps_to_physical_dimension_name: b, size: 4}
]], "l.yaml"),
    physical_topology = config.load_string("dimensions: [{name: a, size: 2}, {name: b, size: 4}]\n", "p.yaml"),
    model_spec = {}, hardware_lib = {},
  }
end

describe("fathom.sweep", function()
  describe("#values()", function()
    it("takes lists as they are", function()
      assert.are.same({ 1, 2, 3 }, sweep.values({ x = { 1, 2, 3 } }, "x", "x"))
    end)
    it("expands inclusive ranges", function()
      assert.are.same({ 2048, 4096, 6144, 8192 },
        sweep.values({ x = { start = 2048, stop = 8192, step = 2048 } }, "x", "x"))
      assert.are.same({ 3, 2, 1 }, sweep.values({ x = { start = 3, stop = 1, step = -1 } }, "x", "x"))
    end)
    it("generates powers of two and divisors", function()
      assert.are.same({ 2, 4, 8, 16 }, sweep.values({ x = { powers_of_two = { 2, 20 } } }, "x", "x"))
      assert.are.same({ 1, 2, 3, 4, 6, 12 }, sweep.values({ x = { divisors_of = 12 } }, "x", "x"))
    end)
    it("refuses ranges that never end and unknown generators", function()
      local t = config.load_string("x: {start: 1, stop: 5, step: -1}\n", "s.yaml")
      assert.error_matches(function() sweep.values(t, "x", "sweep.x") end,
        "s%.yaml:1:%d+: sweep%.x%.step: step %-1 never reaches stop 5")
      t = config.load_string("x: {bogus: 3}\n", "s.yaml")
      assert.error_matches(function() sweep.values(t, "x", "sweep.x") end, "s%.yaml:1:4: sweep%.x: expected a list")
    end)
  end)

  describe("#points()", function()
    it("gives one point, unmodified, without a sweep", function()
      local d = docs()
      local pts = sweep.points(nil, d)
      assert.are.equal(1, #pts)
      assert.are.equal(d.workload_spec, pts[1].docs.workload_spec)
    end)

    it("takes the cross product and sets list entries by tag", function()
      local s = config.load_string([[
sweep:
  workload_spec.micro_batch_size: [1, 2]
  logical_topology.dimensions.TP_Attn.size: [1, 2, 4]
]], "sweep.yaml")
      local d = docs()
      local pts = sweep.points(s, d)
      assert.are.equal(6, #pts)
      -- keys sorted: logical first (outer), workload inner
      assert.are.same({ ["logical_topology.dimensions.TP_Attn.size"] = 1,
        ["workload_spec.micro_batch_size"] = 2 }, pts[2].label)
      assert.are.equal(2, pts[2].docs.workload_spec.micro_batch_size)
      assert.are.equal(1, pts[2].docs.logical_topology.dimensions[1].size)
      assert.are.equal(4, pts[6].docs.logical_topology.dimensions[1].size)
      -- originals untouched; untouched specs shared
      assert.are.equal(1, d.workload_spec.micro_batch_size)
      assert.are.equal(d.physical_topology, pts[1].docs.physical_topology)
    end)

    it("advances zip keys together and keeps file positions in copies", function()
      local s = config.load_string([[
zip:
  physical_topology.dimensions.b.size: [4, 8]
  logical_topology.dimensions.DP_Attn.size: [4, 8]
]], "sweep.yaml")
      local pts = sweep.points(s, docs())
      assert.are.equal(2, #pts)
      assert.are.equal(8, pts[2].docs.physical_topology.dimensions[2].size)
      assert.are.equal(8, pts[2].docs.logical_topology.dimensions[2].size)
      local errors = require("fathom.errors")
      assert.are.equal("l.yaml:3:5", errors.where(pts[2].docs.logical_topology.dimensions[2]))
    end)

    it("names a bad key with its position", function()
      local s = config.load_string("sweep:\n  workload_spec.nope.x: [1]\n", "sweep.yaml")
      assert.error_matches(function() sweep.points(s, docs()) end,
        "sweep%.yaml:2:25: sweep%.workload_spec%.nope%.x: no 'nope' in workload_spec")
      s = config.load_string("sweep:\n  modle_spec.d_model: [1]\n", "sweep.yaml")
      assert.error_matches(function() sweep.points(s, docs()) end,
        "unknown spec 'modle_spec' %(did you mean 'model_spec'%?%)")
    end)
  end)
end)
