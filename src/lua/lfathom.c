/* lfathom.c: luaopen_fathom_core and the helpers every binding file shares. */
#include "lfathom.h"

#include <string.h>

#ifndef FATHOM_VERSION
#define FATHOM_VERSION "0.0.0"
#endif

int lbind_raise(lua_State *L, const char *prefix, const fth_error *err) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (prefix != NULL && prefix[0] != '\0') {
    luaL_addstring(&b, prefix);
    if (err->path[0] != '\0') luaL_addchar(&b, '.');
  }
  luaL_addstring(&b, err->path);
  if (b.n > 0) luaL_addstring(&b, ": ");
  luaL_addstring(&b, err->msg);
  luaL_pushresult(&b);
  return lua_error(L);
}

void lbind_setfuncs(lua_State *L, const luaL_Reg *funcs) {
  luaL_setfuncs(L, funcs, 0);
}

void lbind_newclass(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods) {
  luaL_newmetatable(L, name); /* mt */
  luaL_setfuncs(L, meta, 0);
  lua_newtable(L); /* mt methods */
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index"); /* mt */
  lua_pop(L, 1);
}

/* () -> string: the library version. */
static int core_version_string(lua_State *L) {
  lua_pushstring(L, FATHOM_VERSION);
  return 1;
}

static const luaL_Reg core_funcs[] = {{"version_string", core_version_string}, {NULL, NULL}};

int luaopen_fathom_core(lua_State *L) {
  luaL_newlib(L, core_funcs);
  lua_pushstring(L, FATHOM_VERSION);
  lua_setfield(L, -2, "version");
#define FTH_OPENER(name) lfth_open_##name(L);
#include "lua_openers.h"
#undef FTH_OPENER
  return 1;
}
