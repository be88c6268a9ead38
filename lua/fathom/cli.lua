-- fathom.cli: the command line. The host calls main(arg) and exits with what
-- it returns: 0 success, 2 bad input (one line on stderr), 1 internal error
-- (traceback only with --debug or FATHOM_DEBUG=1).
local errors = require("fathom.errors")

local M = {}

local PROG = "fathom"

-- Subcommands: name -> module under fathom.cmd, loaded on first use.
local commands = {
  { name = "run", module = "fathom.cmd.run",
    summary = "run a Lua scenario script: fathom run FILE [ARGS]" },
  { name = "scenario", module = "fathom.cmd.scenario",
    summary = "list the canned paper scenarios, or run one: fathom scenario run hoti25" },
  { name = "search", module = "fathom.cmd.search",
    summary = "the fastest parallelism strategies that fit, ranked and explained" },
  { name = "estimate", module = "fathom.cmd.estimate",
    summary = "one configuration from flags: step time and where it goes, memory per tier, fit" },
  { name = "route", module = "fathom.cmd.route",
    summary = "MoE routing from a distribution, and its all-to-all: closed form, packet simulation" },
  { name = "analyze", module = "fathom.cmd.analyze",
    summary = "ScaleScope-compatible analysis of a scenario and its sweep (step time, memory, comm)" },
  { name = "trace", module = "fathom.cmd.trace",
    summary = "execution traces of a training step: Chakra ET per rank (ASTRA-sim), Perfetto timeline" },
  { name = "serve", module = "fathom.cmd.serve",
    summary = "request-level serving simulation: latency percentiles, throughput, goodput, capacity" },
  { name = "validate", module = "fathom.cmd.validate",
    summary = "predicted vs measured over the published cases (per-source error summary)" },
  { name = "calibrate", module = "fathom.cmd.calibrate",
    summary = "fit a GPU's efficiencies to your measurements; write a hardware-library overlay" },
  { name = "compare", module = "fathom.cmd.compare",
    summary = "two results side by side: every field, B - A and the relative change" },
  { name = "completion", module = "fathom.cmd.completion",
    summary = "a completion script (bash or zsh), generated from the commands' options" },
  { name = "man", module = "fathom.cmd.man", summary = "the man page, fathom(1) in roff: fathom man | man -l -" },
  { name = "show", module = "fathom.cmd.show",
    summary = "load a YAML/JSON input file and print it as YAML or JSON" },
}

-- Internal commands: dispatched, not listed.
local internal = {}

local function find_command(name)
  for _, c in ipairs(commands) do
    if c.name == name then return c end
  end
  return internal[name]
end

local function command_names()
  local out = {}
  for _, c in ipairs(commands) do out[#out + 1] = c.name end
  return out
end

-- commands() -> the public commands, in help order: {name, module, summary} (completion
-- scripts and the man page are generated from this list and each module's option table).
function M.commands()
  local out = {}
  for i, c in ipairs(commands) do out[i] = c end
  return out
end

-- register(entry): add a subcommand {name, module, summary} (modules call this
-- at load time of cli only through this table, so the list stays in one place).
function M.register(entry)
  if not find_command(entry.name) then commands[#commands + 1] = entry end
end

local function version()
  local paths = package.loaded["fathom.paths"] or {}
  return paths.version or require("fathom.core").version
end

local function help_text()
  local lines = {
    "usage: fathom COMMAND [OPTIONS]    or    fathom FILE.lua [ARGS]",
    "",
    "Predict LLM training and inference step time, memory per accelerator and the",
    "best parallelism strategy on clusters that may not exist yet.",
    "",
    "commands:",
  }
  for _, c in ipairs(commands) do
    lines[#lines + 1] = string.format("  %-11s %s", c.name, c.summary)
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "global options: --help, --version, --debug (tracebacks for internal errors)"
  lines[#lines + 1] = "'fathom COMMAND --help' describes one command."
  return table.concat(lines, "\n") .. "\n"
end

M.help_text = help_text

-- Source prefix of fathom's own Lua files ("@.../lua/"): frames under it are the library.
local LIB = debug.getinfo(1, "S").source:match("^(@.*[/\\])fathom[/\\]cli%.lua$")

-- user_frame(level) -> debug info of the first Lua frame from `level` up, when that
-- frame is not fathom's library (a user's script or module), else nil.
local function user_frame(level)
  while true do
    local info = debug.getinfo(level + 1, "Sl")
    if not info then return nil end
    if info.what ~= "C" then
      local src = info.source
      if src:sub(1, 1) ~= "@" or (LIB and src:sub(1, #LIB + 7) == LIB .. "fathom/") then return nil end
      return info
    end
    level = level + 1
  end
end

-- Run `f(...)`, classifying failures. Returns the exit status: 2 for a refusal of
-- the input (errors.is_input: its kind), 1 for an error in a user's script (reported
-- as the script's error, with its file:line) or in fathom itself (internal), 128 + N
-- for signal N. Temporary files still registered with fathom.output are removed on
-- every path out.
local function protected(dbg, f, ...)
  local tb, script
  local ok, res = xpcall(f, function(e)
    if errors.is_input(e) or errors.is_interrupt(e) then return e end
    tb = debug.traceback(tostring(e), 2)
    local info = user_frame(2)
    if info then
      local msg, at = tostring(e), info.short_src .. ":"
      if type(e) ~= "string" or msg:sub(1, #at) ~= at then
        msg = string.format("%s%d: %s", at, info.currentline, msg)
      end
      script = msg
    end
    return e
  end, ...)
  errors.acknowledge_interrupt() -- from here on, cleanup runs without being interrupted
  local out = package.loaded["fathom.output"]
  if out then out.cleanup() end
  local sig = errors.interrupted()
  if sig and not errors.is_interrupt(res) then res, ok = { kind = "interrupt", signal = sig,
    msg = sig == 2 and "interrupted" or "terminated" }, false end
  if ok then
    return math.tointeger(res) or 0
  end
  if errors.is_interrupt(res) then
    io.stderr:write(PROG, ": ", tostring(res.msg), "\n")
    return 128 + (math.tointeger(res.signal) or 2)
  end
  if errors.is_input(res) then
    io.stderr:write(PROG, ": ", errors.one_line(tostring(res)), "\n")
    return 2
  end
  if type(res) == "table" and res.kind == "worker" then -- a worker process or rank failed (fathom.parallel)
    io.stderr:write(PROG, ": ", tostring(res.msg), "\n")
    return 1
  end
  if errors.is_memory(res) then
    io.stderr:write(PROG, ": not enough memory for this input\n")
    return 2
  end
  if script then
    io.stderr:write(PROG, ": ", dbg.enabled and tb or script, "\n")
    return 1
  end
  if dbg.enabled then
    io.stderr:write(PROG, ": internal error: ", tb or tostring(res), "\n")
  else
    io.stderr:write(PROG, ": internal error: ", tostring(res),
      " (run with --debug for a traceback)\n")
  end
  return 1
end

-- Run a Lua file as lua.c does: arg[0] = script, arg[1..] = its arguments,
-- the chunk called with them as varargs.
function M.run_script(script, args, prog)
  local a = { [-1] = prog or PROG, [0] = script }
  for i, v in ipairs(args) do a[i] = v end
  _G.arg = a
  local chunk, err = loadfile(script)
  if not chunk then
    if not io.open(script, "r") then
      errors.raise("cannot open script '%s'%s", script,
        errors.suggest(script, command_names()) ~= "" and
          (" -- not a command either" .. errors.suggest(script, command_names())) or "")
    end
    error(err, 0)
  end
  local n = #args
  return chunk(table.unpack(args, 1, n))
end

local main

-- main(arg) -> exit status. Under mpirun (an MPI build) every rank runs this; MPI starts
-- first and ends last (fathom.parallel).
function M.main(arg)
  local parallel = require("fathom.parallel")
  local ok, err = pcall(parallel.init)
  if not ok then
    io.stderr:write(PROG, ": cannot start MPI: ", tostring(err), "\n")
    return 1
  end
  local code = main(arg)
  parallel.finish()
  return code
end

main = function(arg)
  local argv = {}
  for i = 1, #arg do argv[i] = arg[i] end
  local dbg = { enabled = os.getenv("FATHOM_DEBUG") == "1" }
  -- Global flags before the command.
  while argv[1] == "--debug" do
    dbg.enabled = true
    table.remove(argv, 1)
  end
  -- Under the name scalescope-cli the binary is ScaleScope's command: every flag is analyze's.
  local prog = tostring(arg[0] or ""):match("([^/]+)$")
  if prog == "scalescope-cli" and argv[1] ~= "--version" then
    return protected(dbg, function() return require("fathom.cmd.analyze").main(argv) end)
  end
  local first = argv[1]
  if first == nil or first == "--help" or first == "-h" or first == "help" then
    if first == "help" and argv[2] then
      local c = find_command(argv[2])
      if c then
        return protected(dbg, function()
          return require(c.module).main({ "--help" })
        end)
      end
    end
    io.stdout:write(help_text())
    return 0
  end
  if first == "--version" or first == "-v" or first == "version" then
    io.stdout:write("fathom ", version(), "\n")
    return 0
  end
  local d = dbg
  local cmd = find_command(first)
  if cmd then
    local rest = { table.unpack(argv, 2) }
    return protected(d, function() return require(cmd.module).main(rest) end)
  end
  if first:sub(1, 1) == "-" then
    return protected(d, function()
      errors.raise("unknown option '%s' (see 'fathom --help')", first)
    end)
  end
  -- Not a command: behave like `lua FILE ARGS`.
  local rest = { table.unpack(argv, 2) }
  return protected(d, function()
    M.run_script(first, rest)
    return 0
  end)
end

return M
