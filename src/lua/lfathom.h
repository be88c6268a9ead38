/* lfathom.h: the Lua module `fathom.core` and helpers shared by its binding
 * files. Each src/lua/l<name>.c (other than lfathom.c and lcheck.c) defines
 * `void lfth_open_<name>(lua_State *L)`, which adds its functions and
 * metatables to the module table on top of the stack; CMake generates the
 * list of openers from the file names. */
#ifndef LFATHOM_H
#define LFATHOM_H

#include <lauxlib.h>
#include <lua.h>

#include "fth_common.h"

/// Opens the module: (none) -> module table.
int luaopen_fathom_core(lua_State *L);

/// Raise a Lua error for a core failure: "<prefix>.<path>: <msg>" (prefix may
/// be NULL). The message is a plain string so luaL_error's position is not
/// prepended: config checks in Lua translate the path to a file position.
/// Never returns.
int lbind_raise(lua_State *L, const char *prefix, const fth_error *err);

/// Register `funcs` into the table on top of the stack.
void lbind_setfuncs(lua_State *L, const luaL_Reg *funcs);

/// Create metatable `name` with `meta` metamethods and `methods` as __index;
/// leaves the stack unchanged.
void lbind_newclass(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods);

#define FTH_OPENER(name) void lfth_open_##name(lua_State *L);
#include "lua_openers.h"
#undef FTH_OPENER

#endif
