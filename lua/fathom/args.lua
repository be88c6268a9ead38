-- fathom.args: command-line option parsing for the subcommands.
-- spec = { {name = "format", arg = "FMT", choices = {...}, default = "yaml", help = "..."},
--          {name = "raw-output", flag = true, help = "..."},
--          {name = "top", arg = "K", integer = {1, 1000}, help = "..."}, ... }
-- `number = true` takes any finite number; `integer = {lo, hi}` an exact integer in
-- [lo, hi] (never truncated); `bytes = true` a size such as 2GiB (fathom.units.parse_bytes).
-- Accepts --name VALUE, --name=VALUE and --flag; everything else is positional.
local errors = require("fathom.errors")

local M = {}

-- int(value, what, lo, hi) -> the exact integer `value` (a number or numeric
-- string) in [lo, hi], or an input error naming `what`.
function M.int(value, what, lo, hi)
  local n = type(value) == "number" and value or tonumber(value)
  local iv = n and math.tointeger(n)
  if not iv or iv < lo or iv > hi then
    errors.raise("%s: expected an integer in [%d, %d], got %s", what, lo, hi, tostring(value))
  end
  return iv
end

-- max_workers() -> worker processes allowed: 4 per core (fathom.paths.cores).
function M.max_workers()
  local paths = package.loaded["fathom.paths"]
  return 4 * math.max(1, math.tointeger(paths and paths.cores) or 1)
end

-- parse(argv, spec, command) -> options table (keys with '-' turned into '_'),
-- positionals list. Raises an input error naming the bad option.
function M.parse(argv, spec, command)
  local by_name, names = {}, {}
  for _, o in ipairs(spec) do
    by_name[o.name] = o
    names[#names + 1] = "--" .. o.name
  end
  local opts, pos = {}, {}
  for _, o in ipairs(spec) do
    local key = o.name:gsub("-", "_")
    if o.multi then opts[key] = {} elseif o.default ~= nil then opts[key] = o.default end
  end
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--" then
      for j = i + 1, #argv do pos[#pos + 1] = argv[j] end
      break
    end
    local name, value = a:match("^%-%-([^=]+)=(.*)$")
    if not name then name = a:match("^%-%-(.+)$") end
    if name then
      local o = by_name[name]
      if not o then
        errors.raise("%s: unknown option '--%s'%s (see 'fathom %s --help')", command, name,
          errors.suggest("--" .. name, names), command)
      end
      local key = o.name:gsub("-", "_")
      if o.flag then
        if value then errors.raise("%s: option '--%s' takes no value", command, name) end
        opts[key] = true
      else
        if not value then
          i = i + 1
          value = argv[i]
          if value == nil then
            errors.raise("%s: option '--%s' needs a value (%s)", command, name, o.arg or "VALUE")
          end
        end
        if o.choices then
          local ok = false
          for _, c in ipairs(o.choices) do if c == value then ok = true end end
          if not ok then
            errors.raise("%s: option '--%s' must be one of %s, got '%s'%s", command, name,
              table.concat(o.choices, ", "), value, errors.suggest(value, o.choices))
          end
        end
        if o.bytes then
          local b = require("fathom.units").parse_bytes(value)
          if not b then
            errors.raise("%s: option '--%s' expects a size >= 0 such as 2GiB, 512MiB, 1.5GB or 0, got '%s'",
              command, name, value)
          end
          value = b
        end
        if o.number or o.integer then
          local n = tonumber(value)
          if not n then
            errors.raise("%s: option '--%s' expects a number, got '%s'", command, name, value)
          end
          if n ~= n or n == math.huge or n == -math.huge then
            errors.raise("%s: option '--%s' expects a finite number, got '%s'", command, name, value)
          end
          if o.integer then
            local lo, hi = o.integer[1], o.integer[2]
            local iv = math.tointeger(n)
            if not iv or iv < lo or iv > hi then
              if lo == 1 then
                errors.raise("%s: --%s must be a positive integer (at most %d), got '%s'", command, name, hi, value)
              end
              errors.raise("%s: --%s must be an integer in [%d, %d], got '%s'", command, name, lo, hi, value)
            end
            n = iv
          end
          value = n
        end
        if o.multi then table.insert(opts[key], value) else opts[key] = value end
      end
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  if opts.help then return opts, pos end -- asking for help needs nothing else
  for _, o in ipairs(spec) do
    if o.required and opts[(o.name:gsub("-", "_"))] == nil then
      errors.raise("%s: missing required option '--%s %s'", command, o.name, o.arg or "VALUE")
    end
  end
  return opts, pos
end

-- The output formats, one list: every command takes --format from it (svg only where
-- the command draws a plot). table: the readable view; yaml: readable units unless
-- --raw-output; json, csv: raw SI numbers, units in the key names; jsonl: JSON Lines, one
-- record per line (only where the command writes records: a sweep).
M.FORMATS = { "table", "yaml", "json", "jsonl", "csv", "svg" }

-- output_options{svg = bool, jsonl = bool, default = "table" (false: none), raw = bool, help = text} -> the rows of
-- --format, --output-file and --raw-output, the one definition every command appends to
-- its option table (fathom.output.emit reads them).
function M.output_options(o)
  o = o or {}
  local choices = {}
  for _, f in ipairs(M.FORMATS) do
    if (f ~= "svg" or o.svg) and (f ~= "jsonl" or o.jsonl) then choices[#choices + 1] = f end
  end
  local rows = {
    { name = "format", arg = "FMT", choices = choices, default = o.default == nil and "table" or o.default or nil,
      help = o.help or "table: readable; yaml: readable units unless --raw-output; json, csv: raw SI numbers"
        .. (o.svg and "; svg: a plot" or "") },
    { name = "output-file", arg = "FILE", help = "write there (whole or not at all) instead of stdout" },
  }
  if o.raw ~= false then
    rows[#rows + 1] = { name = "raw-output", flag = true, help = "yaml: plain SI numbers instead of readable units" }
  end
  return rows
end

-- with_output(spec, o) -> spec with output_options(o) appended before its --help row.
function M.with_output(spec, o)
  local out, help = {}, nil
  for _, row in ipairs(spec) do
    if row.name == "help" then help = row else out[#out + 1] = row end
  end
  for _, row in ipairs(M.output_options(o)) do out[#out + 1] = row end
  out[#out + 1] = help or { name = "help", flag = true, help = "this help" }
  return out
end

-- usage(spec) -> option help text, one option per line.
function M.usage(spec)
  local lines = {}
  for _, o in ipairs(spec) do
    local left = "--" .. o.name .. (o.flag and "" or (" " .. (o.arg or "VALUE")))
    local help = o.help or ""
    if o.choices then help = help .. " (" .. table.concat(o.choices, "|") .. ")" end
    if o.default ~= nil and not o.flag then help = help .. " [default: " .. tostring(o.default) .. "]" end
    lines[#lines + 1] = string.format("  %-30s %s", left, help)
  end
  return table.concat(lines, "\n")
end

return M
