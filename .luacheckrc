std = "lua54"
max_line_length = 120
files["tests/spec"] = { std = "+busted" }
files["tests/run_specs.lua"] = { std = "+busted" }
exclude_files = { "build*/**" }
