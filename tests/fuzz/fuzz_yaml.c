/* fuzz_yaml.c: libFuzzer harness for the YAML loader (fathom.core.yaml_decode).
 * Any input must give a value or "nil, message": never a crash, a hang or a
 * sanitizer report. Build: cmake -DCMAKE_C_COMPILER=clang -DFATHOM_FUZZ=ON;
 * run: fuzz_yaml -max_total_time=60 CORPUS (seed: configs/). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stddef.h>
#include <stdint.h>

#include "lfathom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lua_State *state(void) {
  static lua_State *L = NULL;
  if (L == NULL) {
    L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "fathom.core", luaopen_fathom_core, 0);
    lua_getfield(L, -1, "yaml_decode"); /* core decode */
    lua_setfield(L, LUA_REGISTRYINDEX, "fathom.fuzz.decode");
    lua_settop(L, 0);
  }
  return L;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned runs = 0;
  lua_State *L = state();
  lua_getfield(L, LUA_REGISTRYINDEX, "fathom.fuzz.decode");
  lua_pushlstring(L, (const char *)data, size);
  lua_pushliteral(L, "fuzz");
  if (lua_pcall(L, 2, 2, 0) != LUA_OK) {
    /* Only a memory error may escape the loader. */
    if (lua_type(L, -1) != LUA_TSTRING) __builtin_trap();
  }
  lua_settop(L, 0);
  if (++runs % 256 == 0) lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
