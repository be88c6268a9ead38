-- Runs every busted spec through the fathom host: `fathom tests/run_specs.lua [busted args]`.
-- The host has already put the project's lua/ on package.path and preloaded fathom.core.
package.path = "tests/?.lua;" .. package.path
require("busted.runner")({ standalone = false })
