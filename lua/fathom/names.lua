-- fathom.names: the spelling of every enum, from the C core (fathom.core.names).
-- Lua never writes an enum's list of names itself: schemas take their choices from
-- here, and code that needs one name takes it from a strict lookup
-- (`names.key("logical_tag").TP_Attn`), so a misspelling is an error, not a new name.
--
--   names.<enum>            canonical names in the core's order (dp_variant, pp_schedule,
--                           recompute, kernel_model, collective_op, collective_algorithm,
--                           topology_type, logical_tag, memory_tier, memory_component,
--                           comm_kind, flop_part, route_distribution, route_placement,
--                           serve_arrival, serve_length, serve_policy, serve_routing, cp_comm)
--   names.aliases.<enum>    {alias = canonical}: other spellings the core accepts
--                           (dp_variant FSDP = ZERO3; memory_component activations,
--                           gradients); documented here and in src/lua/lnames.c only
local core = require("fathom.core")

local M = {}

for k, v in pairs(core.names) do
  if type(v) == "table" and k ~= "aliases" then M[k] = v end
end
M.aliases = core.names.aliases

-- with_aliases(enum) -> a new list: the canonical names, then the aliases (sorted).
function M.with_aliases(enum)
  local out = {}
  for i, n in ipairs(M[enum]) do out[i] = n end
  local extra = {}
  for a in pairs(M.aliases[enum] or {}) do extra[#extra + 1] = a end
  table.sort(extra)
  for _, a in ipairs(extra) do out[#out + 1] = a end
  return out
end

-- canonical(enum, name) -> the canonical spelling of name (aliases resolved), or nil.
function M.canonical(enum, name)
  return core.names.parse(enum, name)
end

local keys = {}

-- key(enum) -> strict table name -> name (aliases included); an unknown key raises.
function M.key(enum)
  if keys[enum] then return keys[enum] end
  local list = M[enum]
  if not list then error("fathom.names: unknown enum '" .. tostring(enum) .. "'", 2) end
  local t = {}
  for _, n in ipairs(list) do t[n] = n end
  for a in pairs(M.aliases[enum] or {}) do t[a] = a end
  keys[enum] = setmetatable(t, { __index = function(_, k)
    error(string.format("fathom.names: '%s' is not a %s (%s)", tostring(k), enum, table.concat(list, ", ")), 2)
  end })
  return keys[enum]
end

return M
