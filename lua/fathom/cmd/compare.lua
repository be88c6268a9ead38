-- fathom compare A B: two results side by side (any JSON or YAML fathom wrote: an
-- estimate, analyze records of a sweep, a search), field by field, with the absolute
-- and relative delta of every number. Records are matched by position in lists and by
-- key in tables (dotted paths, as CSV columns are named).
local args = require("fathom.args")
local config = require("fathom.config")
local csv = require("fathom.format.csv")
local errors = require("fathom.errors")
local output = require("fathom.output")
local tablefmt = require("fathom.format.table")
local util = require("fathom.format.util")

local M = {}

local spec = args.with_output({
  { name = "all", flag = true, help = "list fields that are equal too" },
  { name = "match", arg = "PATTERN", help = "only fields whose dotted path contains PATTERN (plain text)" },
  { name = "rel-tol", arg = "R", number = true, default = 0,
    help = "numbers within R relative to A count as equal (e.g. 1e-9)" },
  { name = "help", flag = true, help = "this help" },
}, { raw = false, help = "table: the fields that differ; yaml, json: one entry per field; csv: one row per field" })

M.spec = spec

M.usage = "usage: fathom compare A B [--all] [--match PATTERN] [--rel-tol R] [--format table|yaml|json|csv]\n" ..
  "                      [--output-file F]\n\n" ..
  "Two results fathom wrote (JSON or YAML: estimate, analyze --output-file, search\n" ..
  "--format json, validate), field by field: A's value, B's, B - A and (B - A) / A for\n" ..
  "numbers. Lists of records pair by position (a sweep's points, a search's hits), so\n" ..
  "the same sweep or search before and after a change compares point by point. Only\n" ..
  "fields that differ are listed unless --all; a field present on one side only is\n" ..
  "listed with the other side empty. Compare raw outputs (JSON, or YAML with\n" ..
  "--raw-output): readable units are text.\n\n" ..
  "examples:\n" ..
  "  fathom estimate --model llama3.1_70b --hardware H100_SXM --gpus 64 --tp 8 --pp 4 --format json \\\n" ..
  "      --output-file a.json\n" ..
  "  fathom estimate --model llama3.1_70b --hardware H100_SXM --gpus 64 --tp 4 --pp 8 --format json \\\n" ..
  "      --output-file b.json\n" ..
  "  fathom compare a.json b.json --match time.\n\n" ..
  args.usage(spec) .. "\n"

-- fields(v) -> dotted path -> scalar, and the paths in first-seen order (csv's flattening).
local function fields(v)
  local flat, order = {}, {}
  csv.flatten("", v, flat, order)
  return flat, order
end

-- diff(a, b, opts) -> list of {field, a, b, delta, relative} (delta and relative for two
-- numbers; relative nil when a is 0), in A's field order then B's new fields.
function M.diff(a, b, opts)
  opts = opts or {}
  local fa, oa = fields(a)
  local fb, ob = fields(b)
  local keys, seen = {}, {}
  for _, list in ipairs({ oa, ob }) do
    for _, k in ipairs(list) do
      if not seen[k] then
        seen[k] = true
        keys[#keys + 1] = k
      end
    end
  end
  local rows = {}
  local tol = opts.rel_tol or 0
  for _, k in ipairs(keys) do
    if not opts.match or k:find(opts.match, 1, true) then
      local x, y = fa[k], fb[k]
      local row = util.ordered({ field = k, a = x, b = y }, { "field", "a", "b", "delta", "relative" })
      local same
      if type(x) == "number" and type(y) == "number" then
        row.delta = y - x
        row.relative = x ~= 0 and (y - x) / math.abs(x) or nil
        same = x == y or (x ~= 0 and math.abs(y - x) <= tol * math.abs(x))
      else
        same = x == y
      end
      if opts.all or not same then rows[#rows + 1] = row end
    end
  end
  return rows
end

local function cell(v)
  if v == nil then return "" end
  if type(v) == "number" then return util.number(v) and string.format("%.6g", v) or tostring(v) end
  return tostring(v)
end

local function table_text(rows, pa, pb, n)
  local out = {}
  for i, r in ipairs(rows) do
    out[i] = { r.field, cell(r.a), cell(r.b), r.delta and string.format("%+.6g", r.delta) or "",
      r.relative and string.format("%+.2f%%", 100 * r.relative) or "" }
  end
  local head = string.format("A: %s\nB: %s\n%d of %d fields differ\n\n", pa, pb, n.differ, n.total)
  if #rows == 0 then return head end
  return head .. tablefmt.render({ "field", "A", "B", "B - A", "relative" }, out, { "l", "r", "r", "r", "r" })
end

function M.main(argv)
  local opts, files = args.parse(argv, spec, "compare")
  if opts.help then
    io.stdout:write(M.usage)
    return 0
  end
  if #files ~= 2 then
    errors.raise("compare: expected two files, got %d (usage: fathom compare A B)", #files)
  end
  if opts.rel_tol < 0 then errors.raise("compare: --rel-tol must be >= 0, got %s", tostring(opts.rel_tol)) end
  local a, b = config.load_file(files[1]), config.load_file(files[2])
  local rows = M.diff(a, b, { all = opts.all, match = opts.match, rel_tol = opts.rel_tol })
  local n = { total = #M.diff(a, b, { all = true, match = opts.match }),
    differ = #M.diff(a, b, { match = opts.match, rel_tol = opts.rel_tol }) }
  output.emit(opts, {
    table = function() return table_text(rows, files[1], files[2], n) end,
    data = function() return util.array(rows) end,
  }, "compare")
  return 0
end

return M
