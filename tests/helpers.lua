-- Shared helpers for the specs: relative-tolerance checks and running the host.
local M = {}

-- near(expected, actual, rel_tol): assert |a - e| <= tol * |e| with a useful message.
function M.near(expected, actual, rel_tol, what)
  local scale = math.max(math.abs(expected), 1e-300)
  local err = math.abs(actual - expected) / scale
  if not (err <= rel_tol) then -- luacheck: ignore 581 (NaN must fail)
    error(string.format("%s: expected %.17g, got %.17g (rel err %.3g > %.3g)",
      what or "value", expected, actual, err, rel_tol), 2)
  end
  return true
end

-- evaluate_case(case) -> the training result `fathom validate` compares for a case table
-- (the case reader's documents on the calibrated library of its GPU and kernel library).
function M.evaluate_case(case)
  local cases = require("fathom.cases")
  local validate = require("fathom.validate")
  M.validate_state = M.validate_state or validate.state()
  local docs = assert(cases.training_docs(case))
  local setting = require("fathom.calibration").lookup(docs.gpu.generation, docs.fw.kernels,
    M.validate_state.settings)
  local lib = validate.calibrated_lib(M.validate_state, docs.gpu.node, setting, docs.power_limit_watts)
  return require("fathom.scenario").new({ hardware_lib = lib, physical = docs.physical,
    logical = docs.logical, model = docs.model, workload = docs.workload }):evaluate()
end

-- case(file, id) -> the case of that id in a validation file (fathom.validate.load); an error
-- naming both when there is none.
function M.case(file, id)
  for _, c in ipairs(require("fathom.validate").load({ file })) do
    if c.id == id then return c end
  end
  error("no case " .. id .. " in " .. file, 2)
end

-- The host binary under test (ctest sets FATHOM_TEST_BIN).
function M.bin()
  return os.getenv("FATHOM_TEST_BIN") or "build/fathom"
end

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.shell_quote = shell_quote

-- run(args...) -> {code, stdout, stderr}: run the host with arguments.
function M.run(...)
  local parts = { shell_quote(M.bin()) }
  for _, a in ipairs({ ... }) do parts[#parts + 1] = shell_quote(a) end
  local out = os.tmpname()
  local err = os.tmpname()
  local cmd = table.concat(parts, " ") .. " >" .. out .. " 2>" .. err
  local _, _, code = os.execute(cmd)
  local function slurp(p)
    local f = io.open(p, "rb")
    local s = f and f:read("a") or ""
    if f then f:close() end
    os.remove(p)
    return s
  end
  return { code = code, stdout = slurp(out), stderr = slurp(err) }
end

-- write_temp(text [, ext]) -> the path of a new temporary file holding text (its name ends
-- in ext when given: ".yaml", ".csv").
function M.write_temp(text, ext)
  local path = os.tmpname() .. (ext or "")
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

-- placed_as(ep, straddling, groups, in_pod, across): an expert-parallel placement on pods
-- (hoti25.study's placement(...).ep) as counted by hand: groups that straddle pods, groups
-- in all, and the worst placed member's peers in its pod and across.
function M.placed_as(ep, straddling, groups, in_pod, across)
  for what, want in pairs({ straddling = straddling, groups = groups }) do
    if ep[what] ~= want then
      error(string.format("%s: expected %s, got %s", what, tostring(want), tostring(ep[what])), 2)
    end
  end
  M.near(in_pod, ep.levels[1], 1e-12, "worst member's peers in its pod")
  M.near(across, ep.levels[2], 1e-12, "the rest across")
end

-- lines(s) -> number of lines in s.
function M.count_lines(s)
  local n = 0
  for _ in s:gmatch("[^\n]*\n") do n = n + 1 end
  return n
end

return M
