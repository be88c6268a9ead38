-- Shell completion and the man page, generated from the command table and each
-- command's option table; every command's --help shows examples.
local h = require("helpers")

local function have(cmd)
  return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true
end

-- options_in_help(command) -> the --options a command's --help lists in its option block
local function options_in_help(argv)
  local r = h.run(table.unpack(argv))
  assert.are.equal(0, r.code, r.stderr)
  local out = {}
  for o in r.stdout:gmatch("\n  (%-%-[%w%-]+)") do out[#out + 1] = o end
  return out, r.stdout
end

describe("fathom completion and man", function()
  local cli = require("fathom.cli")

  it("every command's --help shows examples", function()
    for _, c in ipairs(cli.commands()) do
      local _, text = options_in_help({ c.name, "--help" })
      assert.matches("\nexamples:\n  ", text, c.name)
    end
  end)

  it("the man page documents every option every --help lists", function()
    local man = h.run("man").stdout
    assert.matches("^%.TH FATHOM 1 ", man)
    for _, c in ipairs(cli.commands()) do
      assert.matches("\n%.SS " .. c.name:gsub("%-", "\\%-") .. "\n", man, c.name)
      for _, o in ipairs((options_in_help({ c.name, "--help" }))) do
        local roff = "\\fB" .. o:gsub("%-", "\\-") .. "\\fR"
        assert.is_truthy(man:find(roff, 1, true), c.name .. " " .. o .. " is not in the man page")
      end
    end
  end)

  it("the man page renders without roff errors", function()
    if not have("groff") then return pending("groff is not installed") end
    local page = os.tmpname()
    local f = assert(io.open(page, "w"))
    f:write(h.run("man").stdout)
    f:close()
    local p = io.popen("groff -man -Tutf8 -z " .. page .. " 2>&1")
    local msgs = p:read("a")
    p:close()
    os.remove(page)
    assert.are.equal("", msgs)
  end)

  describe("bash", function()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(h.run("completion", "bash").stdout)
    f:close()

    -- complete(words...) -> the candidates bash offers for the last word
    local function complete(...)
      local words = { ... }
      local quoted = {}
      for i, w in ipairs(words) do quoted[i] = h.shell_quote(w) end
      local cmd = string.format("bash -c %s", h.shell_quote(string.format(
        "source %s; COMP_WORDS=(fathom %s); COMP_CWORD=%d; _fathom; printf '%%s\\n' \"${COMPREPLY[@]}\"",
        script, table.concat(quoted, " "), #words)))
      local p = io.popen(cmd)
      local out = {}
      for l in p:lines() do if l ~= "" then out[#out + 1] = l end end
      p:close()
      return out
    end

    local function has(list, x)
      for _, v in ipairs(list) do if v == x then return true end end
      return false
    end

    it("is valid bash", function()
      if not have("bash") then return pending("bash is not installed") end
      assert.is_true(os.execute("bash -n " .. script) == true)
    end)

    it("completes commands, options, choices, model and node names", function()
      if not have("bash") then return pending("bash is not installed") end
      assert.are.same({ "estimate" }, complete("esti"))
      assert.is_true(has(complete("estimate", "--mi"), "--micro-batch"))
      assert.are.same({ "table", "yaml", "json", "csv" }, complete("estimate", "--format", ""))
      assert.is_true(has(complete("search", "--format", ""), "svg"))
      assert.is_true(has(complete("estimate", "--model", "llama3"), "llama3.1_70b"))
      assert.is_true(has(complete("search", "--hardware", "H100"), "H100_SXM"))
      assert.is_true(has(complete("estimate", "--schedule", ""), "DUALPIPE"))
      assert.are.same({}, complete("estimate", "--tp", ""))
    end)
  end)

  it("zsh wraps the bash script through bashcompinit", function()
    local r = h.run("completion", "zsh")
    assert.are.equal(0, r.code)
    assert.matches("^#compdef fathom\n", r.stdout)
    assert.matches("bashcompinit", r.stdout)
    local bad = h.run("completion", "fish")
    assert.are.equal(2, bad.code)
    assert.matches("expected bash or zsh, got 'fish'", bad.stderr)
  end)
end)
