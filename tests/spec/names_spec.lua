-- fathom.names / core.names: one owner per enum name. The C core owns each name
-- table and parser; the binding exports them (src/lua/lnames.c); Lua builds its
-- choices from them. This spec greps src/ and lua/ so no other file spells them.
local core = require("fathom.core")
local names = require("fathom.names")

-- Names the core cannot spell yet: lnames.c keeps them until the core has
-- fth_recompute_name/_parse, fth_kernel_model_name/_parse and fth_flop_part_name.
local interim = {}

-- Files outside the core that may spell a name, and why (each a different use
-- of the same word, or an input document written the way a user writes one,
-- which the schemas then check against these very names).
local allowed = {
  ["lua/fathom/validate.lua"] = { why = "writes input documents as a user would; spec.lua checks them",
    all = true },
  ["lua/fathom/cases.lua"] = { why = "writes input documents as a user would; spec.lua checks them",
    all = true },
  ["lua/fathom/frameworks.lua"] = { why = "conventions as the keys a user writes; spec.lua checks them",
    all = true },
  ["src/lua/ltrain.c"] = { why = "degree keys of plan:degrees(); a collective's 'op' field",
    enum = "comm_kind", names = { op = true } },
  ["src/lua/linfer.c"] = { why = "degree keys of plan:degrees()", enum = "comm_kind" },
  ["src/lua/lsearch.c"] = { why = "degree keys of a search strategy and hit; space.vs/mb = 'auto'",
    enum = "comm_kind", names = { auto = true } },
  ["lua/fathom/search.lua"] = { why = "degree keys of the search space and --fix; space.vs/mb = 'auto'; per-op "
    .. "recompute left out of the default space", enum = "comm_kind", names = { auto = true, op = true } },
  ["lua/fathom/report.lua"] = { why = "degree keys of a record's configuration", enum = "comm_kind" },
  ["lua/fathom/cmd/search.lua"] = { why = "column headers", names = { PP = true, CP = true } },
  ["lua/fathom/cmd/estimate.lua"] = { why = "degree keys of a strategy and its flags", enum = "comm_kind" },
  ["lua/fathom/format/pareto.lua"] = { why = "SVG's fill=\"none\"", names = { none = true } },
  ["lua/fathom/precision.lua"] = { why = "'none': the recipe of plain BF16/FP32 (no FP8/FP4 GEMMs)",
    names = { none = true } },
  ["lua/fathom/cmd/analyze.lua"] = { why = "column headers", names = { PP = true } },
  ["lua/fathom/format/svg.lua"] = { why = "legend labels", names = { PP = true, CP = true } },
  ["lua/fathom/spec.lua"] = { why = "'size: auto' of a logical dimension", names = { auto = true } },
  ["lua/fathom/sweep_batch.lua"] = { why = "degree keys of a compiled plan (ltrain.c's degrees()) and the record's "
    .. "communication labels; 'size: auto' of a logical dimension", enum = "comm_kind", names = { auto = true } },
  ["lua/fathom/route.lua"] = { why = "the router's 'histogram' field and the 'mesh' section",
    names = { histogram = true, mesh = true } },
  ["src/lua/lroute.c"] = { why = "the 'histogram' field and the 'mesh' table",
    names = { histogram = true, mesh = true } },
  ["lua/fathom/cmd/serve.lua"] = { why = "the engine's degree keys; the result's 'kv_cache' section",
    names = { tp = true, pp = true, ep = true, kv_cache = true } },
  ["lua/fathom/serve.lua"] = { why = "the engine's degree keys", names = { tp = true, pp = true, ep = true } },
  ["lua/fathom/serve_multi.lua"] = { why = "a pool's degree keys", names = { tp = true, pp = true, ep = true } },
  ["src/lua/lserve.c"] = { why = "the result's 'kv_cache' section", names = { kv_cache = true } },
  ["src/lua/ldefaults.c"] = { why = "core.defaults.moe, the MoE constants' table", names = { moe = true } },
}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- Source text without comments (C: /* */ and //; Lua: -- outside a string).
local function code_of(path, text)
  if path:match("%.[ch]$") then
    return (text:gsub("/%*.-%*/", ""):gsub("//[^\n]*", ""))
  end
  local out = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local s = 1
    while true do
      local i = line:find("--", s, true)
      if not i then break end
      local _, quotes = line:sub(1, i - 1):gsub('"', "")
      if quotes % 2 == 0 then
        line = line:sub(1, i - 1)
        break
      end
      s = i + 2
    end
    out[#out + 1] = line
  end
  return table.concat(out, "\n")
end

local function sources()
  local p = io.popen("find src lua -name '*.c' -o -name '*.h' -o -name '*.lua' | sort")
  local files = {}
  for f in p:lines() do files[f] = code_of(f, read(f)) end
  p:close()
  return files
end

-- occurrences(text, name) -> how often "name" appears, strict lookups (KEY["name"]) aside.
local function occurrences(text, name)
  local pat = '"' .. name:gsub("%p", "%%%0") .. '"'
  local n, s = 0, 1
  while true do
    local i, j = text:find(pat, s)
    if not i then return n end
    if not (text:sub(i - 1, i - 1) == "[" and text:sub(j + 1, j + 1) == "]") then n = n + 1 end
    s = j + 1
  end
end

local function enums()
  local out = {}
  for k, v in pairs(core.names) do
    if type(v) == "table" and k ~= "aliases" then out[#out + 1] = k end
  end
  table.sort(out)
  return out
end

describe("fathom.names", function()
  it("exports every enum in the core's order and parses its names back", function()
    assert.are.same({ "cast_kernels", "collective_algorithm", "collective_op", "comm_kind", "cp_comm",
      "cuda_graph_scope", "dp_variant", "flop_part", "kernel_model",
      "logical_tag", "lora_targets", "memory_component", "memory_tier", "op_keep", "pp_schedule", "precision_recipe",
      "recompute",
      "recompute_module", "route_distribution", "route_placement", "route_scheduler", "serve_arrival", "serve_length",
      "serve_policy", "serve_routing", "topology_type" }, enums())
    for _, e in ipairs(enums()) do
      assert.is_true(#names[e] >= 2, e)
      for _, n in ipairs(names[e]) do assert.are.equal(n, names.canonical(e, n)) end
      assert.is_nil(names.canonical(e, "no_such_name"))
    end
  end)

  it("documents each alias in one place, and the core parses it to its target", function()
    assert.are.same({ FSDP = "ZERO3" }, names.aliases.dp_variant)
    assert.are.same({ activations = "saved_activations", gradients = "gradient_buffers" },
      names.aliases.memory_component)
    for e, map in pairs(names.aliases) do
      for alias, target in pairs(map) do assert.are.equal(target, names.canonical(e, alias)) end
    end
  end)

  it("key() is strict: a misspelt name raises", function()
    assert.are.equal("TP_Attn", names.key("logical_tag").TP_Attn)
    assert.error_matches(function() return names.key("logical_tag").TP_Atn end, "not a logical_tag")
  end)

  it("every enum name is spelled in the core only (src/ and lua/ grepped)", function()
    local files = sources()
    local stray = {}
    for _, e in ipairs(enums()) do
      local list = {}
      for _, n in ipairs(names[e]) do list[#list + 1] = n end
      for a in pairs(names.aliases[e] or {}) do list[#list + 1] = a end
      local spelled_in_core = 0
      for _, n in ipairs(list) do
        local in_core = 0
        for path, text in pairs(files) do
          local k = occurrences(text, n)
          if k > 0 then
            if path:match("^src/core/") then
              in_core = in_core + k
            else
              local a = allowed[path]
              local ok = a and (a.all or a.enum == e or (a.names and a.names[n]))
              if not ok then stray[#stray + 1] = string.format("%s: \"%s\" (%s)", path, n, e) end
            end
          end
        end
        if in_core > 0 then spelled_in_core = spelled_in_core + 1 end
        if not interim[e] and in_core == 0 then
          stray[#stray + 1] = string.format("\"%s\" (%s) is not in src/core", n, e)
        end
      end
      if interim[e] and spelled_in_core == #list then
        stray[#stray + 1] = string.format("src/core spells every %s name: drop lnames.c's interim table", e)
      end
    end
    table.sort(stray)
    assert.are.same({}, stray)
  end)
end)
