/* lfathom.c: luaopen_fathom_core and the helpers every binding file shares. */
#include "lfathom.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifndef FATHOM_VERSION
#define FATHOM_VERSION "0.0.0"
#endif

/* The error kinds, by fth_status: what the caller may do about it. */
static const char *error_kind(fth_status s) {
  switch (s) {
  case FTH_EINVAL: return "input";        /* an input is out of range or inconsistent */
  case FTH_ERANGE: return "range";        /* a derived value overflowed */
  case FTH_ENOTSUP: return "unsupported"; /* valid, but not modelled */
  case FTH_ETILE: return "tiling";        /* sizes that do not divide each other */
  case FTH_OK: break;
  }
  return "internal";
}

int lbind_raise(lua_State *L, const char *prefix, const fth_error *err) {
  lua_createtable(L, 0, 3); /* e */
  lua_pushstring(L, error_kind(err->status));
  lua_setfield(L, -2, "kind");
  luaL_Buffer b;
  luaL_buffinit(L, &b); /* e buffer */
  if (prefix != NULL && prefix[0] != '\0') {
    luaL_addstring(&b, prefix);
    if (err->path[0] != '\0') luaL_addchar(&b, '.');
  }
  luaL_addstring(&b, err->path);
  luaL_pushresult(&b); /* e path */
  lua_setfield(L, -2, "path");
  lua_pushstring(L, err->msg);
  lua_setfield(L, -2, "msg");
  luaL_setmetatable(L, LBIND_ERROR);
  return lua_error(L);
}

int lbind_fail(lua_State *L, fth_status status, const char *path, const char *fmt, ...) {
  fth_error err;
  err.status = status;
  snprintf(err.path, sizeof err.path, "%s", path != NULL ? path : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err.msg, sizeof err.msg, fmt, ap);
  va_end(ap);
  return lbind_raise(L, NULL, &err);
}

/* (error) -> "path: msg", or "msg" without a path */
static int error_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "path");
  lua_getfield(L, 1, "msg");
  const char *path = lua_tostring(L, -2);
  const char *msg = lua_tostring(L, -1);
  if (path != NULL && path[0] != '\0')
    lua_pushfstring(L, "%s: %s", path, msg ? msg : "");
  else
    lua_pushstring(L, msg ? msg : "");
  return 1;
}

void lbind_setcount(lua_State *L, const char *k, double v) {
  lua_Integer i;
  if (lua_numbertointeger(v, &i) && (double)i == v)
    lua_pushinteger(L, i);
  else
    lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
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
  luaL_newmetatable(L, LBIND_ERROR);
  lua_pushcfunction(L, error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newlib(L, core_funcs);
  lua_pushstring(L, FATHOM_VERSION);
  lua_setfield(L, -2, "version");
#define FTH_OPENER(name) lfth_open_##name(L);
#include "lua_openers.h"
#undef FTH_OPENER
  return 1;
}
