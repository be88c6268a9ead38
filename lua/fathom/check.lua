-- fathom.check: validating tables loaded from YAML against small schemas, with
-- every failure reported as "file:line:col: key.path: what is wrong (hint)".
--
-- A schema maps field names to rules:
--   { type = "integer"|"number"|"string"|"boolean"|"table"|"list"|"any",
--     required = true, min = x, max = x, above = x (strictly greater),
--     choices = {...}, default = v, hint = "..." }
local errors = require("fathom.errors")

local M = {}

local function describe(v)
  if type(v) == "string" then return string.format("'%s'", v) end
  if type(v) == "table" then return v[1] ~= nil and "a list" or "a mapping" end
  if v == nil then return "nothing" end
  return tostring(v)
end
M.describe = describe

local function join(path, key)
  if type(key) == "number" then return string.format("%s[%d]", path, key) end
  if path == nil or path == "" then return key end
  return path .. "." .. key
end
M.join = join

-- fail(t, key, path, fmt, ...) raises an input error at t[key].
function M.fail(t, key, path, fmt, ...)
  errors.at(t, key, path, fmt, ...)
end

local function check_value(t, key, path, v, rule)
  local ty = rule.type or "any"
  local hint = rule.hint and (" (" .. rule.hint .. ")") or ""
  -- a key read for compatibility whose meaning fathom does not model: refused, never ignored
  if rule.refuse then M.fail(t, key, path, "not modelled: %s", rule.refuse) end
  if ty == "integer" then
    local iv = type(v) == "number" and math.tointeger(v) or nil
    if iv == nil then
      M.fail(t, key, path, "expected an integer, got %s%s", describe(v), hint)
    end
    -- the core keeps counts in C ints
    if iv > 2147483647 or iv < -2147483648 then
      M.fail(t, key, path, "expected an integer below 2^31, got %s%s", describe(v), hint)
    end
    v = iv
  elseif ty == "number" then
    if type(v) ~= "number" or v ~= v then M.fail(t, key, path, "expected a number, got %s%s", describe(v), hint) end
  elseif ty == "string" then
    if type(v) ~= "string" then M.fail(t, key, path, "expected a string, got %s%s", describe(v), hint) end
  elseif ty == "boolean" then
    if type(v) ~= "boolean" then M.fail(t, key, path, "expected true or false, got %s%s", describe(v), hint) end
  elseif ty == "table" then
    if type(v) ~= "table" or v[1] ~= nil then
      M.fail(t, key, path, "expected a mapping, got %s%s", describe(v), hint)
    end
  elseif ty == "list" then
    if type(v) ~= "table" or (next(v) ~= nil and v[1] == nil) then
      M.fail(t, key, path, "expected a list, got %s%s", describe(v), hint)
    end
  end
  if type(v) == "number" then
    if v == math.huge or v == -math.huge then
      M.fail(t, key, path, "expected a finite number, got %s%s", describe(v), hint)
    end
    if rule.above ~= nil and v <= rule.above then
      M.fail(t, key, path, "expected a value > %s, got %s%s", describe(rule.above), describe(v), hint)
    end
    if rule.min ~= nil and v < rule.min then
      M.fail(t, key, path, "expected a value >= %s, got %s%s", describe(rule.min), describe(v), hint)
    end
    if rule.max ~= nil and v > rule.max then
      M.fail(t, key, path, "expected a value <= %s, got %s%s", describe(rule.max), describe(v), hint)
    end
    if rule.below ~= nil and v >= rule.below then
      M.fail(t, key, path, "expected a value < %s, got %s%s", describe(rule.below), describe(v), hint)
    end
  end
  if rule.choices then
    local ok = false
    for _, c in ipairs(rule.choices) do if c == v then ok = true end end
    if not ok then
      local names = {}
      for i, c in ipairs(rule.choices) do names[i] = tostring(c) end
      M.fail(t, key, path, "expected one of %s, got %s%s", table.concat(names, ", "), describe(v),
        type(v) == "string" and errors.suggest(v, names) or "")
    end
  end
  return v
end

-- fields(t, path, schema [, out]) -> out: every known field of t checked and
-- copied (defaults filled); unknown fields are errors with a "did you mean" hint.
function M.fields(t, path, schema, out)
  out = out or {}
  if type(t) ~= "table" then
    errors.raise("%s: expected a mapping, got %s", path, describe(t))
  end
  local names = {}
  for k in pairs(schema) do names[#names + 1] = k end
  table.sort(names)
  -- Keys in document order: the first problem in the file is the one reported.
  for _, k in ipairs(errors.ordered_keys(t)) do
    if type(k) ~= "string" or schema[k] == nil then
      local hint = errors.suggest(tostring(k), names)
      errors.at_key(t, k, join(path, tostring(k)), "unknown key%s",
        hint ~= "" and hint or " (known keys: " .. table.concat(names, ", ") .. ")")
    end
    out[k] = check_value(t, k, join(path, k), t[k], schema[k])
  end
  for _, k in ipairs(names) do
    local rule = schema[k]
    if t[k] == nil then -- present keys were checked above, in document order
      if rule.required then
        local w = errors.where(t)
        errors.raise("%s%s: missing required key%s", w and (w .. ": ") or "", join(path, k),
          rule.hint and (" (" .. rule.hint .. ")") or "")
      end
      out[k] = rule.default
    end
  end
  return out
end

-- value(t, key, path, rule) -> checked t[key] (for one-off fields).
function M.value(t, key, path, rule)
  local v = t[key]
  if v == nil then
    if rule.required then errors.at(t, key, path, "missing required key") end
    return rule.default
  end
  return check_value(t, key, path, v, rule)
end

-- ref(t, key, path, registry, what) -> registry[t[key]], or an error naming the
-- missing reference with the closest known name.
function M.ref(t, key, path, registry, what)
  local name = t[key]
  local entry = registry[name]
  if entry == nil then
    local names = {}
    for k in pairs(registry) do names[#names + 1] = k end
    table.sort(names)
    errors.at(t, key, path, "unknown %s '%s'%s", what, tostring(name),
      errors.suggest(tostring(name), names) ~= "" and errors.suggest(tostring(name), names)
        or (#names > 0 and " (known: " .. table.concat(names, ", ") .. ")" or ""))
  end
  return entry
end

return M
