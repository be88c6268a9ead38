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

/// Metatable of the error values the binding raises (its __name).
#define LBIND_ERROR "fathom.Error"

/// Raise a core failure as a value, never as text to parse back:
/// {kind = "input"|"range"|"unsupported"|"tiling", path = "<prefix>.<path>", msg = "..."}
/// (kind from err->status; prefix may be NULL) with metatable fathom.Error, whose
/// __tostring gives "<path>: <msg>". Lua maps the path to a file position
/// (scenario.lua) and the CLI chooses the exit status from the kind. Never returns.
int lbind_raise(lua_State *L, const char *prefix, const fth_error *err);

/// Raise as lbind_raise, with a printf-style message, for input the binding refuses
/// while reading a table (`path` is the dotted field path). Never returns.
int lbind_fail(lua_State *L, fth_status status, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/// t[k] = v for the table on top of the stack: a count held in a double (GPUs,
/// micro-batches) as a Lua integer when whole, else as a number.
void lbind_setcount(lua_State *L, const char *k, double v);

/// Register `funcs` into the table on top of the stack.
void lbind_setfuncs(lua_State *L, const luaL_Reg *funcs);

/// Create metatable `name` with `meta` metamethods and `methods` as __index;
/// leaves the stack unchanged.
void lbind_newclass(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods);

/// Push a training result (fth_train.h) as the table plan:evaluate() returns
/// (ltrain.c); core.search_eval returns the same shape.
struct fth_train_result;
void lfth_push_train_result(lua_State *L, const struct fth_train_result *r);

/* The text of values (ltext.c): one owner for fathom.format.yaml and the C sweep writer. */

/// fth_unit's names, in its order (NULL-terminated): core.unit_text's first argument.
extern const char *const ltext_unit_names[];

/// 1 when NUL-terminated s (len bytes, no NUL inside) can be a plain YAML scalar.
int ltext_yaml_plain(lua_State *L, const char *s, size_t len);

/// Bytes ltext_yaml_quote may write for `len` bytes of text.
#define LTEXT_YAML_QUOTED_CAP(len) (4 * (len) + 2)

/// s double-quoted with YAML escapes into out (LTEXT_YAML_QUOTED_CAP(len) bytes); the length.
size_t ltext_yaml_quote(const char *s, size_t len, char *out);

#define FTH_OPENER(name) void lfth_open_##name(lua_State *L);
#include "lua_openers.h"
#undef FTH_OPENER

#endif
