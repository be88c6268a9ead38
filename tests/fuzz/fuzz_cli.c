/* fuzz_cli.c: libFuzzer harness for the whole command line, in process. The
 * first byte picks how the rest is used: as one input file of `analyze` (model,
 * workload, hardware library, physical or logical topology, sweep config, a JSON
 * model), as a `route --config`, a `show` file, a `validate --cases` file, or as
 * an argument list (NUL or newline separated) for analyze/route/search/show/validate.
 * Exit 0 and 2 are fine; exit 1 (an internal error) and any crash, hang or
 * sanitizer report are findings: the harness traps on exit 1 (FATHOM_FUZZ_VERBOSE=1
 * shows the message). */
#define _POSIX_C_SOURCE 200809L
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lfathom.h"

#ifndef FATHOM_SOURCE_DIR
#define FATHOM_SOURCE_DIR "."
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char workdir[] = "/tmp/fathom-fuzz-XXXXXX";

/* The driver: main(kind, path, argv...) in Lua, returning the exit status. */
static const char *driver =
    "local kind, path, extra = ...\n"
    "-- smaller bounds than a user gets, so one input stays well under the hang timeout\n"
    "local sweep, route = require('fathom.sweep'), require('fathom.route')\n"
    "sweep.MAX_POINTS, sweep.MAX_AXIS_POINTS = 200, 200\n"
    "route.MAX_ROUTING_WORK, route.MAX_SIMULATION_WORK = 1e8, 1e8\n"
    "local T = SRC .. '/tests/fixtures/tiny/'\n"
    "local slots = { 'model', 'workload', 'hardware', 'physical', 'logical', 'sweep', 'json' }\n"
    "local flags = { model = '--model-spec', workload = '--workload-spec', hardware = '--hardware-lib',\n"
    "  physical = '--physical-topology', logical = '--logical-topology' }\n"
    "local files = { model = T .. 'model.yaml', workload = T .. 'train.yaml', hardware = T .. 'hardware.yaml',\n"
    "  physical = T .. 'physical.yaml', logical = T .. 'logical.yaml' }\n"
    "local argv\n"
    "local slot = slots[kind + 1]\n"
    "if slot then\n"
    "  argv = { 'analyze' }\n"
    "  for _, s in ipairs({ 'hardware', 'physical', 'logical', 'workload', 'model' }) do\n"
    "    argv[#argv + 1] = flags[s]\n"
    "    argv[#argv + 1] = (s == slot or (slot == 'json' and s == 'model')) and path or files[s]\n"
    "  end\n"
    "  if slot == 'sweep' then argv[#argv + 1] = '--sweep-config'; argv[#argv + 1] = path end\n"
    "elseif kind == 7 then argv = { 'route', '--config', path }\n"
    "elseif kind == 8 then argv = { 'show', path }\n"
    "elseif kind == 9 then argv = { 'validate', '--cases', path }\n"
    "else\n"
    "  argv = {}\n"
    "  for a in extra:gmatch('[^%z\\n]+') do argv[#argv + 1] = a end\n"
    "  local ok = { analyze = true, route = true, search = true, show = true, validate = true }\n"
    "  if not ok[argv[1]] then return 0 end\n"
    "  for i = #argv, 1, -1 do\n"
    "    local a = argv[i]\n"
    "    if a:match('^%-%-workers') or a:match('^%-%-output') or a:match('^%-%-trace') then\n"
    "      table.remove(argv, i)\n"
    "    end\n"
    "  end\n"
    "  if argv[1] == 'search' then argv[#argv + 1] = '--workers'; argv[#argv + 1] = '1' end\n"
    "end\n"
    "argv[0] = 'fathom'\n"
    "return require('fathom.cli').main(argv)\n";

static lua_State *state(void) {
  static lua_State *L = NULL;
  if (L != NULL) return L;
  if (mkdtemp(workdir) == NULL) abort();
  L = luaL_newstate();
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_fathom_core);
  lua_setfield(L, -2, "fathom.core");
  lua_pop(L, 1);
  lua_getglobal(L, "package");
  lua_pushstring(L, FATHOM_SOURCE_DIR "/lua/?.lua;" FATHOM_SOURCE_DIR "/lua/?/init.lua;");
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_newtable(L); /* fathom.paths: data under the source tree, one core */
  lua_pushstring(L, FATHOM_SOURCE_DIR);
  lua_setfield(L, -2, "data_dir");
  lua_pushinteger(L, 1);
  lua_setfield(L, -2, "cores");
  lua_pushinteger(L, (lua_Integer)getpid());
  lua_setfield(L, -2, "pid");
  lua_setfield(L, -2, "fathom.paths");
  lua_pop(L, 1);
  lua_pushstring(L, FATHOM_SOURCE_DIR);
  lua_setglobal(L, "SRC");
  /* Quiet: the commands' output goes to /dev/null. */
  if (luaL_dostring(L, "local null = io.open('/dev/null', 'w'); io.stdout = null; io.output(null); "
                       "if not os.getenv('FATHOM_FUZZ_VERBOSE') then io.stderr = null end") != LUA_OK)
    abort();
  if (luaL_loadstring(L, driver) != LUA_OK) abort();
  lua_setfield(L, LUA_REGISTRYINDEX, "fathom.fuzz.driver");
  return L;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned runs = 0;
  if (size < 1) return 0;
  lua_State *L = state();
  int kind = data[0] % 11;
  char path[128];
  snprintf(path, sizeof path, "%s/input.%s", workdir, kind == 6 ? "json" : "yaml");
  FILE *f = fopen(path, "wb");
  if (f == NULL) abort();
  fwrite(data + 1, 1, size - 1, f);
  fclose(f);
  lua_getfield(L, LUA_REGISTRYINDEX, "fathom.fuzz.driver");
  lua_pushinteger(L, kind);
  lua_pushstring(L, path);
  lua_pushlstring(L, (const char *)data + 1, size - 1);
  if (lua_pcall(L, 3, 1, 0) != LUA_OK) {
    fprintf(stdout, "fuzz_cli: escaped error: %s\n", lua_tostring(L, -1));
    __builtin_trap();
  }
  lua_Integer code = lua_tointeger(L, -1);
  if (code == 1 && getenv("FATHOM_FUZZ_ALLOW_INTERNAL") == NULL) {
    fprintf(stdout, "fuzz_cli: internal error (exit 1) for kind %d\n", kind);
    __builtin_trap();
  }
  lua_settop(L, 0);
  remove(path);
  if (++runs % 64 == 0) lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
