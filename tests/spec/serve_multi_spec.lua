-- Several models on one cluster (fathom.serve_multi: pools and clients) and speculative
-- decoding with a separate draft model (`--draft-model`).
local core = require("fathom.core")
local h = require("helpers")
local json = require("fathom.format.json")
local serve = require("fathom.serve")

local function write(text) return h.write_temp(text, ".yaml") end

-- Two pools on disjoint GPUs, each with one client; a third client shares the 70B pool.
local TWO = [[
hardware: H100_SXM
seed: 7
pools:
  big: {model: llama3.1_70b, tp: 4, replicas: 2, policy: chunked}
  small: {model: llama3.1_8b, replicas: 2}
clients:
  agents: {model: llama3.1_8b, rate_per_s: 10, requests: 300, input: 512, output: 64, slo_ttft_s: 0.3}
  chat: {model: llama3.1_70b, rate_per_s: 3, requests: 200, input: {kind: lognormal, mean: 1024, sigma: 0.5},
         output: 128, slo_ttft_s: 1, slo_tpot_s: 0.05}
]]

local SHARED = TWO .. [[
  batch: {pool: big, arrival: fixed, rate_per_s: 0.5, requests: 40, input: 4096, output: 256}
]]

local FIELDS = { "requests_completed", "duration_s", "throughput", "ttft_s", "tpot_s", "e2e_s", "queue_s", "goodput",
  "preemptions" }

describe("several models on one cluster", function()
  local two = write(TWO)
  local shared = write(SHARED)

  it("two clients on disjoint pools give exactly what each gives alone", function()
    local r = h.run("serve", two, "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local m = json.decode(r.stdout)
    -- client i in name order draws with seed + i - 1: agents 7, chat 8
    local alone = {
      agents = { "--model", "llama3.1_8b", "--replicas", "2", "--qps", "10", "--requests", "300", "--input-tokens",
        "512", "--output-tokens", "64", "--slo-ttft", "0.3", "--seed", "7" },
      chat = { "--model", "llama3.1_70b", "--tp", "4", "--replicas", "2", "--policy", "chunked", "--qps", "3",
        "--requests", "200", "--input-tokens", "lognormal:mean=1024,sigma=0.5", "--output-tokens", "128",
        "--slo-ttft", "1", "--slo-tpot", "0.05", "--seed", "8" },
    }
    for name, args in pairs(alone) do
      local a = h.run("serve", "--hardware", "H100_SXM", "--format", "json", table.unpack(args))
      assert.are.equal(0, a.code, a.stderr)
      local one = json.decode(a.stdout)
      for _, k in ipairs(FIELDS) do assert.are.same(one[k], m.clients[name][k], name .. "." .. k) end
    end
    -- the totals: requests and tokens summed over the clients, GPUs over the pools
    local t = m.totals
    assert.are.equal(500, t.requests_completed)
    assert.are.equal(10, t.gpus)
    local out = 0
    for _, c in pairs(m.clients) do out = out + c.throughput.output_tokens_per_s * c.duration_s end
    h.near(out / t.duration_s, t.throughput.output_tokens_per_s, 1e-12, "output tokens/s")
    h.near(t.throughput.output_tokens_per_s / 10, t.throughput.output_tokens_per_s_per_gpu, 1e-12, "per GPU")
  end)

  it("clients sharing a pool: each its own requests and SLOs, the same bytes every run", function()
    local a = h.run("serve", shared, "--format", "json")
    local b = h.run("serve", shared, "--format", "json")
    assert.are.equal(0, a.code, a.stderr)
    assert.are.equal(a.stdout, b.stdout)
    local m = json.decode(a.stdout)
    assert.are.equal(40, m.clients.batch.requests_completed)
    assert.are.equal(200, m.clients.chat.requests_completed)
    assert.are.equal(240, m.pools.big.requests_completed)
    assert.are.same({ "batch", "chat" }, m.pools.big.clients)
    -- the small pool is untouched by the big one's new client
    local alone = json.decode(h.run("serve", two, "--format", "json").stdout)
    assert.are.same(alone.clients.agents, m.clients.agents)
    -- chat now waits behind 4096-token prompts: its TTFT grows
    assert.is_true(m.clients.chat.ttft_s.p99 > alone.clients.chat.ttft_s.p99)
    -- no SLO for batch: all of its requests count as good
    assert.are.equal(1, m.clients.batch.goodput.slo_attainment)
    local t = h.run("serve", shared)
    assert.are.equal(0, t.code, t.stderr)
    assert.is_truthy(t.stdout:find("3 clients of 2 models on 10 GPUs in 2 pools, seed 7", 1, true))
    assert.is_truthy(t.stdout:find("\nbatch ", 1, true))
  end)

  it("fathom.serve{pools, clients} in Lua gives the spec's numbers", function()
    local r = serve.run({ hardware = "H100_SXM", seed = 7,
      pools = { big = { model = "llama3.1_70b", tp = 4, replicas = 2, policy = "chunked" },
        small = { model = "llama3.1_8b", replicas = 2 } },
      clients = { agents = { model = "llama3.1_8b", rate_per_s = 10, requests = 300, input = 512, output = 64,
        slo_ttft_s = 0.3 },
        chat = { model = "llama3.1_70b", rate_per_s = 3, requests = 200, input = "lognormal:mean=1024,sigma=0.5",
          output = 128, slo_ttft_s = 1, slo_tpot_s = 0.05 } } })
    local m = json.decode(h.run("serve", two, "--format", "json").stdout)
    assert.are.equal(m.clients.chat.ttft_s.p99, r.clients.chat.ttft_s.p99)
    assert.are.equal(m.totals.goodput.requests_per_s, r.totals.goodput.requests_per_s)
    assert.error_matches(function()
      serve.run({ hardware = "H100_SXM", pools = { p = { model = "llama3.1_8b" } },
        clients = { c = { pool = "q", rate_per_s = 1 } } })
    end, "clients.c.pool: unknown pool 'q'", 1, true)
  end)

  it("core.serve_draw: a drawn stream replayed as a trace runs as the draws themselves", function()
    local def = { cost = { base_s = 0.01, per_token_s = 1e-4 }, kv_capacity_tokens = 1e6, requests = 200,
      rate_per_s = 20, arrival = "gamma", burstiness = 2, seed = 5,
      input = { kind = "lognormal", mean = 512, sigma = 0.5 }, output = { kind = "uniform", min = 2, max = 64 } }
    local own = core.serve_run(def)
    local tr = core.serve_draw(def)
    assert.are.equal(200, #tr.arrival_s)
    assert.are.equal(0, tr.arrival_s[1])
    def.trace = tr
    assert.are.same(own, core.serve_run(def))
  end)

  local bad = {
    { "a client naming a missing pool", "agents: {model: llama3.1_8b,", "agents: {pool: smal,",
      ":7:18: clients.agents.pool: unknown pool 'smal' (did you mean 'small'?)" },
    { "a client naming a missing model", "agents: {model: llama3.1_8b,", "agents: {model: llama9,",
      ":7:19: clients.agents.model: no model 'llama9'" },
    { "two models on one pool", "agents: {model: llama3.1_8b,", "agents: {pool: big, model: llama3.1_8b,",
      ":7:30: clients.agents.model: two models on pool big" },
    { "a pool no client uses", "agents: {model: llama3.1_8b,", "agents: {pool: big,",
      ":5:10: pools.small: no client uses this pool" },
    { "a negative rate", "rate_per_s: 10,", "rate_per_s: -10,",
      ":7:44: clients.agents.rate_per_s: expected a value > 0" },
    { "an SLO below what a lone request gets", "slo_ttft_s: 0.3}", "slo_ttft_s: 0.001}",
      ":7:99: clients.agents.slo_ttft_s: 0.001 s is below the" },
    { "a pool's engine that cannot be built", "tp: 4, replicas: 2", "tp: 3, replicas: 2",
      ":4:8: pools.big: TP=3 does not divide the 64 attention heads" },
    { "a closed loop on a shared pool", "batch: {pool: big, arrival: fixed, rate_per_s: 0.5,",
      "batch: {pool: big, concurrency: 4,", ":10:35: clients.batch.concurrency: a closed loop shares no pool" },
  }
  for _, c in ipairs(bad) do
    it("refuses " .. c[1] .. " at its place in the file (exit 2)", function()
      local from, to = c[2]:gsub("%p", "%%%0"), c[3]:gsub("%%", "%%%%")
      local text, n = SHARED:gsub(from, to, 1)
      assert.are.equal(1, n, c[2])
      local path = write(text)
      local r = h.run("serve", path)
      assert.are.equal(2, r.code, r.stdout)
      assert.is_truthy(r.stderr:find(path .. c[4], 1, true), r.stderr)
      assert.are.equal(1, h.count_lines(r.stderr), r.stderr)
      os.remove(path)
    end)
  end

  it("refuses flags beside a spec with clients", function()
    local r = h.run("serve", two, "--qps", "3")
    assert.are.equal(2, r.code)
    assert.is_truthy(r.stderr:find("--qps: a spec with clients sets everything in the file", 1, true), r.stderr)
  end)

  it("the shipped example runs", function()
    local r = h.run("serve", "configs/serve_specs/two_models.yaml", "--format", "json")
    assert.are.equal(0, r.code, r.stderr)
    local m = json.decode(r.stdout)
    assert.are.equal("llama3.2_1b", m.pools.large.draft_model)
    assert.are.equal(7350, m.totals.requests_completed)
  end)
end)

describe("speculative decoding with a draft model", function()
  local ENGINE = { "serve", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--tp", "4", "--qps", "0.5",
    "--requests", "100", "--output-tokens", "256", "--format", "json" }
  local function run(...)
    local a = {}
    for _, v in ipairs(ENGINE) do a[#a + 1] = v end
    for _, v in ipairs({ ... }) do a[#a + 1] = v end
    return h.run(table.unpack(a))
  end

  it("tokens a step: (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023)", function()
    h.near(1.875, core.serve_spec_tokens_per_step(3, 0.5), 1e-15, "k 3, a 1/2")
    h.near(5, core.serve_spec_tokens_per_step(4, 1), 1e-15, "all accepted")
    h.near(1, core.serve_spec_tokens_per_step(4, 0), 1e-15, "none")
  end)

  it("a small draft cuts TPOT at low load; its weights and KV shrink the cache", function()
    local plain = run()
    local r = run("--draft-model", "llama3.2_1b", "--spec-tokens", "4", "--spec-acceptance", "0.8")
    assert.are.equal(0, r.code, r.stderr)
    local p, d = json.decode(plain.stdout), json.decode(r.stdout)
    -- 3.36 tokens a step for one target pass and four 1B steps: well under half the TPOT
    assert.is_true(d.tpot_s.mean < 0.5 * p.tpot_s.mean, d.tpot_s.mean .. " vs " .. p.tpot_s.mean)
    -- every token's KV in both: 1B's 16 layers x 8 KV heads x 64 against 70B's 80 x 8 x 128,
    -- 10% more bytes per token, and the draft's weights besides
    assert.is_true(d.kv_cache.capacity_tokens < p.kv_cache.capacity_tokens / 1.1)
    assert.is_true(d.kv_cache.capacity_tokens > p.kv_cache.capacity_tokens / 1.2)
    -- never accepted: every step still emits one token, at the price of the drafting
    local none = json.decode(run("--draft-model", "llama3.2_1b", "--spec-tokens", "4", "--spec-acceptance",
      "0").stdout)
    assert.is_true(none.tpot_s.mean > p.tpot_s.mean)
    local t = h.run("serve", "--model", "llama3.1_70b", "--hardware", "H100_SXM", "--tp", "4", "--qps", "0.5",
      "--requests", "20", "--draft-model", "llama3.2_1b", "--spec-tokens", "4", "--spec-acceptance", "0.8")
    assert.is_truthy(t.stdout:find("speculative decoding: llama3.2_1b drafts 4 tokens a step, each accepted with "
      .. "probability 0.8: 3.362 tokens a step expected", 1, true), t.stdout)
  end)

  local refusals = {
    { { "--draft-model", "llama2_70b", "--spec-tokens", "4", "--spec-acceptance", "0.8" },
      "a draft must share the target's tokenizer" },
    { { "--draft-model", "llama3.2_1b", "--spec-acceptance", "0.8" }, "--spec-acceptance needs --spec-tokens" },
    { { "--draft-model", "llama3.2_1b", "--spec-tokens", "4" }, "needs spec_acceptance (--spec-acceptance)" },
    { { "--draft-model", "llama3.2_1b", "--spec-tokens", "4", "--spec-acceptance", "0.8", "--prefill-replicas",
      "1" }, "with disaggregated prefill is not modelled" },
  }
  for _, c in ipairs(refusals) do
    it("refuses: " .. c[2], function()
      local r = run(table.unpack(c[1]))
      assert.are.equal(2, r.code, r.stdout)
      assert.is_truthy(r.stderr:find(c[2], 1, true), r.stderr)
    end)
  end
end)
