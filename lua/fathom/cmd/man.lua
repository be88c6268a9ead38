-- fathom man: the man page, fathom(1) in roff, generated from the commands' option tables
-- (fathom.cmd.completion builds it). `fathom man | man -l -` reads it.
local M = {}

M.usage = [[
usage: fathom man

Prints fathom(1) in roff: every command with its options, choices and defaults (from the
same tables the commands parse), examples, output conventions and exit status.

examples:
  fathom man | man -l -
  fathom man > fathom.1
]]

function M.main(argv)
  if argv[1] == "--help" or argv[1] == "-h" then
    io.stdout:write(M.usage)
    return 0
  end
  if argv[1] ~= nil then require("fathom.errors").raise("man: unexpected argument '%s'", argv[1]) end
  io.stdout:write(require("fathom.cmd.completion").man_page())
  return 0
end

return M
