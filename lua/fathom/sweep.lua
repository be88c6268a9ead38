-- fathom.sweep: the points of a sweep config. Pure: documents in, list of
-- (label, modified documents) out; evaluation is the caller's.
--
-- sweep:
--   workload_spec.micro_batch_size: [1, 2, 4]                 # a list
--   workload_spec.seq_length: {start: 2048, stop: 8192, step: 2048}   # a range (inclusive)
--   logical_topology.dimensions.TP_Attn.size: {powers_of_two: [1, 8]}
--   logical_topology.dimensions.DP_Attn.size: {divisors_of: 64}
-- Keys are dotted paths into a spec (hardware_lib, physical_topology,
-- logical_topology, workload_spec, model_spec); a list of topology
-- dimensions is indexed by a dimension's `name` or `logical_tag` (or a 1-based
-- number). The cross product of all keys is swept; `zip:` holds keys whose
-- lists advance together.
local check = require("fathom.check")
local errors = require("fathom.errors")
local util = require("fathom.format.util")

local M = {}

M.spec_names = { "hardware_lib", "physical_topology", "logical_topology", "workload_spec", "model_spec" }
local aliases = { hardware_library = "hardware_lib", hardware = "hardware_lib", model = "model_spec",
  workload = "workload_spec", physical = "physical_topology", logical = "logical_topology",
  train_spec = "workload_spec" }
M.aliases = aliases

local function deep_copy(t, seen)
  if type(t) ~= "table" then return t end
  seen = seen or {}
  if seen[t] then return seen[t] end
  local out = {}
  seen[t] = out
  for k, v in pairs(t) do out[k] = deep_copy(v, seen) end
  errors.copy_origin(t, out)
  return setmetatable(out, getmetatable(t))
end
M.deep_copy = deep_copy

-- Bounds (README, "Limits"): checked before any value is generated.
M.MAX_AXIS_POINTS = 100000 -- values of one key (a list, a range)
M.MAX_POINTS = 10000000 -- points of a whole sweep (the product of the keys)
M.MAX_POWER = 2 ^ 53 -- powers_of_two: [lo, hi] with hi at most this
M.MAX_DIVISORS_OF = 1e12 -- divisors_of: N at most this (trial division to sqrt N)

local function finite(x)
  return type(x) == "number" and x == x and x ~= math.huge and x ~= -math.huge
end

-- values(t, key, path) -> list of values for one sweep key.
function M.values(t, key, path)
  local v = t[key]
  if type(v) ~= "table" then return { v } end
  if v[1] ~= nil then
    if #v > M.MAX_AXIS_POINTS then
      errors.at(t, key, path, "has %d values (limit %d)", #v, M.MAX_AXIS_POINTS)
    end
    return v
  end
  if next(v) == nil then errors.at(t, key, path, "expected at least one value, got an empty list") end
  if v.start ~= nil or v.stop ~= nil then
    check.fields(v, path, { start = { type = "number", required = true },
      stop = { type = "number", required = true }, step = { type = "number", default = 1 } })
    local step = v.step or 1
    if step == 0 or (v.stop - v.start) * step < 0 then
      errors.at(v, "step", path .. ".step", "step %s never reaches stop %s from start %s",
        tostring(step), tostring(v.stop), tostring(v.start))
    end
    local span = (v.stop - v.start) / step
    if not finite(span) or span + 1 > M.MAX_AXIS_POINTS then
      errors.at(v, "step", path .. ".step", "range has %.3g points (limit %d)", span + 1, M.MAX_AXIS_POINTS)
    end
    local out = {}
    local n = math.floor(span + 1e-9)
    for i = 0, n do
      local x = v.start + i * step
      out[#out + 1] = math.tointeger(x) or x
    end
    return out
  end
  if v.powers_of_two ~= nil then
    local r = v.powers_of_two
    if type(r) ~= "table" or #r ~= 2 or not finite(r[1]) or not finite(r[2]) or r[1] < 1 or r[2] < r[1]
      or r[2] > M.MAX_POWER then
      errors.at(v, "powers_of_two", path .. ".powers_of_two",
        "expected [low, high] with 1 <= low <= high <= 2^53, got %s", check.describe(r))
    end
    local out, x = {}, 1
    while x <= r[2] do
      if x >= r[1] then out[#out + 1] = x end
      x = x * 2
    end
    if #out == 0 then
      errors.at(v, "powers_of_two", path .. ".powers_of_two", "no power of two lies in [%s, %s]",
        tostring(r[1]), tostring(r[2]))
    end
    return out
  end
  if v.divisors_of ~= nil then
    local n = v.divisors_of
    if math.type(n) ~= "integer" or n < 1 or n > M.MAX_DIVISORS_OF then
      errors.at(v, "divisors_of", path .. ".divisors_of", "expected an integer in [1, 10^12], got %s",
        check.describe(n))
    end
    local low, high = {}, {}
    local i = 1
    while i * i <= n do
      if n % i == 0 then
        low[#low + 1] = i
        if i * i ~= n then high[#high + 1] = n // i end
      end
      i = i + 1
    end
    for j = #high, 1, -1 do low[#low + 1] = high[j] end
    return low
  end
  errors.at(t, key, path, "expected a list, {start, stop, step}, {powers_of_two: [lo, hi]} or {divisors_of: N}")
end

-- Resolve a dotted key against the documents; returns (table, field) to assign.
local function target(docs, key, sweep_t)
  local segs = {}
  for s in key:gmatch("[^%.]+") do segs[#segs + 1] = s end
  local spec_name = aliases[segs[1]] or segs[1]
  local doc = docs[spec_name]
  if doc == nil then
    errors.at(sweep_t, key, "sweep." .. key, "unknown spec '%s'%s", segs[1],
      errors.suggest(segs[1], M.spec_names))
  end
  local t = doc
  for i = 2, #segs - 1 do
    local s = segs[i]
    local nxt = t[s]
    if nxt == nil and t[1] ~= nil then -- a list: by number, name or tag
      local n = tonumber(s)
      if n then
        nxt = t[n]
      else
        for _, item in ipairs(t) do
          if type(item) == "table" and (item.name == s or item.logical_tag == s) then nxt = item end
        end
      end
    end
    if type(nxt) ~= "table" then
      errors.at(sweep_t, key, "sweep." .. key, "no '%s' in %s", s, spec_name)
    end
    t = nxt
  end
  return t, segs[#segs]
end

M.target = target

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- axes(sweep_doc, docs) -> list of axes {keys, values, zipped}, every key checked to
-- resolve and every generator bounded; the count of points (their product), refused
-- over MAX_POINTS; and the set of specs the sweep touches.
function M.axes(sweep_doc, docs)
  local sweep = sweep_doc and sweep_doc.sweep or nil
  local zip = sweep_doc and sweep_doc.zip or nil
  if sweep_doc then
    check.fields(sweep_doc, "", { sweep = { type = "table" }, zip = { type = "table" },
      description = { type = "string" }, notes = { type = "any" } })
  end
  local axes = {}
  for _, key in ipairs(sorted_keys(sweep or {})) do
    axes[#axes + 1] = { keys = { key }, values = { M.values(sweep, key, "sweep." .. key) }, source = sweep }
  end
  if zip then
    local keys = sorted_keys(zip)
    local vals, n = {}, nil
    for i, key in ipairs(keys) do
      vals[i] = M.values(zip, key, "zip." .. key)
      if n and #vals[i] ~= n then
        errors.at(zip, key, "zip." .. key, "has %d values but the other zip keys have %d", #vals[i], n)
      end
      n = #vals[i]
    end
    if #keys > 0 then axes[#axes + 1] = { keys = keys, values = vals, zipped = true, source = zip } end
  end
  -- Check every key resolves before building points.
  for _, ax in ipairs(axes) do
    for _, key in ipairs(ax.keys) do target(docs, key, ax.source) end
  end
  local count = 1
  for _, ax in ipairs(axes) do
    count = count * #ax.values[1]
    if count > M.MAX_POINTS then
      errors.at(ax.source, ax.keys[1], (ax.zipped and "zip." or "sweep.") .. ax.keys[1],
        "the sweep has more than %d points", M.MAX_POINTS)
    end
  end
  local touched = {}
  for _, ax in ipairs(axes) do
    for _, key in ipairs(ax.keys) do
      local head = key:match("^[^%.]+")
      touched[aliases[head] or head] = true
    end
  end
  return axes, count, touched
end

-- swept_positions(axes, docs) -> set of "file:line:col" of the base values the sweep
-- replaces (an error there depends on the sweep).
function M.swept_positions(axes, docs)
  local out = {}
  for _, ax in ipairs(axes) do
    for _, key in ipairs(ax.keys) do
      local t, field = target(docs, key, ax.source)
      local w = errors.where(t, field)
      if w then out[w] = true end
    end
  end
  return out
end

-- build(axes, idx, docs, touched) -> the point at positions idx of the axes:
-- {label = {key = value}, docs = {...}} (touched specs copied, then the keys set).
local function build(axes, idx, docs, touched)
  local label, order = {}, {}
  for a, ax in ipairs(axes) do
    for k, key in ipairs(ax.keys) do
      label[key] = ax.values[k][idx[a]]
      order[#order + 1] = key
    end
  end
  util.ordered(label, order) -- sweep order, for labels and plots
  local copies = {}
  for name, d in pairs(docs) do copies[name] = touched[name] and deep_copy(d) or d end
  for _, key in ipairs(sorted_keys(label)) do
    local t, field = target(copies, key, {})
    t[field] = label[key]
  end
  return { label = label, docs = copies }
end

-- iterate(sweep_doc, docs) -> iterator, count: the points one at a time, in the
-- order of M.points, each built only when asked for (memory does not grow with the
-- number of points). The iterator returns i, {label = {key = value}, docs = {...}}.
function M.iterate(sweep_doc, docs)
  local axes, count, touched = M.axes(sweep_doc, docs)
  local idx = {}
  for a = 1, #axes do idx[a] = 1 end
  local i = 0
  return function()
    if i >= count then return nil end
    i = i + 1
    if i > 1 then -- odometer: the last axis turns fastest
      local a = #axes
      while a >= 1 do
        idx[a] = idx[a] + 1
        if idx[a] <= #axes[a].values[1] then break end
        idx[a] = 1
        a = a - 1
      end
    end
    return i, build(axes, idx, docs, touched)
  end, count
end

-- at(sweep_doc, docs) -> function(i) -> point i (1-based, the order of iterate), count, axes:
-- any point without walking to it (the C batch path asks for a few).
function M.at(sweep_doc, docs)
  local axes, count, touched = M.axes(sweep_doc, docs)
  return function(i)
    local idx, rest = {}, i - 1
    for a = #axes, 1, -1 do
      local n = #axes[a].values[1]
      idx[a] = rest % n + 1
      rest = rest // n
    end
    return build(axes, idx, docs, touched)
  end, count, axes
end

-- points(sweep_doc, docs) -> list of {label = {key = value}, docs = {spec = modified copy}}.
-- `docs` maps spec names to loaded documents; each point gets deep copies.
function M.points(sweep_doc, docs)
  local points = {}
  local it = M.iterate(sweep_doc, docs)
  for i, pt in it do points[i] = pt end
  return points
end

return M
