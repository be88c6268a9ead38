-- fathom.args: command-line option parsing for the subcommands.
-- spec = { {name = "format", arg = "FMT", choices = {...}, default = "yaml", help = "..."},
--          {name = "raw-output", flag = true, help = "..."}, ... }
-- Accepts --name VALUE, --name=VALUE and --flag; everything else is positional.
local errors = require("fathom.errors")

local M = {}

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
        if o.number then
          local n = tonumber(value)
          if not n then
            errors.raise("%s: option '--%s' expects a number, got '%s'", command, name, value)
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
