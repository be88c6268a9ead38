local config = require("fathom.config")
local errors = require("fathom.errors")
local core = require("fathom.core")

describe("fathom.config", function()
  describe("#load_file()", function()
    local doc = config.load_file("tests/fixtures/good_types.yaml")

    it("types plain scalars as users expect", function()
      assert.are.equal(1.8e15, doc.float_exp)
      assert.are.equal("float", math.type(doc.float_exp))
      assert.are.equal(4.0e12, doc.float_dot)
      assert.are.equal(42, doc.int_dec)
      assert.are.equal("integer", math.type(doc.int_dec))
      assert.are.equal(-7, doc.int_neg)
      assert.are.equal(16, doc.int_hex)
      assert.are.equal(15, doc.int_oct)
      assert.is_true(doc.bool_true)
      assert.is_false(doc.bool_false)
      assert.are.equal(math.huge, doc.inf)
      assert.are.equal("hello world", doc.string)
    end)

    it("keeps quoted scalars as strings", function()
      assert.are.equal("4.0e12", doc.quoted_number)
      assert.are.equal("true", doc.quoted_bool)
    end)

    it("drops null mapping values and keeps null list items as core.null", function()
      assert.is_nil(doc.null_word)
      assert.is_nil(doc.null_tilde)
      assert.are.equal(3, #doc.list)
      assert.are.equal(core.null, doc.list[2])
      assert.are.equal("three", doc.list[3])
    end)

    it("resolves anchors, aliases and merge keys", function()
      assert.are.same({ x = 1, y = 2 }, doc.alias)
      assert.are.same({ x = 1, y = 3 }, doc.merged)
    end)

    it("remembers where every key and value came from", function()
      assert.are.equal("tests/fixtures/good_types.yaml:2:12", errors.where(doc, "float_exp"))
      assert.are.equal("tests/fixtures/good_types.yaml:2:1", errors.where_key(doc, "float_exp"))
      assert.are.equal("tests/fixtures/good_types.yaml:17:11", errors.where(doc.list, 2))
      -- a null value still has a position
      assert.are.equal("tests/fixtures/good_types.yaml:11:12", errors.where(doc, "null_word"))
    end)
  end)

  describe("refuses bad files with file:line:col and an input error", function()
    local cases = {
      { "bad_syntax.yaml", "bad_syntax%.yaml:4:1: did not find expected" },
      { "bad_duplicate_key.yaml", "bad_duplicate_key%.yaml:4:3: duplicate key 'd_model'" },
      { "bad_alias_bomb.yaml", "bad_alias_bomb%.yaml:%d+:%d+: document expands to more than" },
      { "bad_too_deep.yaml", "bad_too_deep%.yaml:1:%d+: document nests deeper than 64" },
      { "bad_not_utf8.yaml", "bad_not_utf8%.yaml:2:14: invalid .*UTF%-8" },
      { "bad_multi_doc.yaml", "bad_multi_doc%.yaml:2:1: file holds more than one YAML document" },
    }
    for _, c in ipairs(cases) do
      it(c[1], function()
        local ok, err = pcall(config.load_file, "tests/fixtures/" .. c[1])
        assert.is_false(ok)
        assert.is_true(errors.is_input(err))
        assert.matches(c[2], tostring(err))
      end)
    end

    it("a missing file", function()
      local ok, err = pcall(config.load_file, "tests/fixtures/no_such_file.yaml")
      assert.is_false(ok)
      assert.matches("no_such_file%.yaml: cannot open file", tostring(err))
    end)
  end)

  describe("#load_string()", function()
    it("parses text and names it in errors", function()
      assert.are.same({ a = { 1, 2 } }, config.load_string("a: [1, 2]\n", "inline"))
      local ok, err = pcall(config.load_string, "a: 1\na: 2\n", "inline")
      assert.is_false(ok)
      assert.matches("^inline:2:1: duplicate key 'a'", tostring(err))
    end)
  end)

  describe("#load_mapping()", function()
    it("refuses a document that is not a mapping", function()
      local f = os.tmpname()
      local h = io.open(f, "w")
      h:write("- 1\n- 2\n")
      h:close()
      local ok, err = pcall(config.load_mapping, f, "model spec")
      os.remove(f)
      assert.is_false(ok)
      assert.matches(":1:1: expected a model spec %(a YAML mapping%), got a list", tostring(err))
    end)
  end)
end)
