/* main.c: the fathom host, modelled on Lua's lua.c. `main` creates a state
 * and runs `pmain` under lua_pcall; pmain opens the libraries, preloads
 * fathom.core, sets the search path so the bundled lua/ is found (build tree
 * or installed prefix) ahead of the system path, builds `arg`, and hands over
 * to require("fathom.cli").main(arg), which returns the exit status.
 *
 * SIGINT and SIGTERM are handled as lua.c handles SIGINT: the handler only
 * sets a hook, and the hook raises {kind = "interrupt", signal = N} in the
 * running Lua code, which unwinds to cli.lua; the CLI removes its temporary
 * files and exits 128 + N. A second signal kills (the default action). */
#define _POSIX_C_SOURCE 200809L
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "lfathom.h"
#include "paths.h"

#define PROGNAME "fathom"

static void l_message(const char *msg) {
  fprintf(stderr, "%s: %s\n", PROGNAME, msg);
  fflush(stderr);
}

/* Message handler: turn any error object into a string with a traceback.
 * Only reached for errors that escape cli.lua's own handling (a bug). */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

static lua_State *globalL = NULL;
static volatile sig_atomic_t caught_signal = 0;

/* Instructions between two raises of an interrupt nobody acknowledged (a pcall
 * swallowed it): the program still stops, soon. */
#define INTERRUPT_REPEAT 1000000
#define INTERRUPT_MAX_RAISES 50 /* then the default action: about a second */
static int interrupt_raises = 0;

/* Hook set by the handler: raise the interrupt error in the running code, and
 * again every INTERRUPT_REPEAT instructions until the CLI acknowledges it. */
static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  if (++interrupt_raises > INTERRUPT_MAX_RAISES) { /* everything swallows it: die as the signal */
    lua_sethook(L, NULL, 0, 0);
    raise(caught_signal); /* the handler is SIG_DFL again */
    return;
  }
  lua_sethook(L, lstop, LUA_MASKCOUNT, INTERRUPT_REPEAT);
  lua_createtable(L, 0, 3);
  lua_pushliteral(L, "interrupt");
  lua_setfield(L, -2, "kind");
  lua_pushinteger(L, caught_signal);
  lua_setfield(L, -2, "signal");
  lua_pushstring(L, caught_signal == SIGINT ? "interrupted" : "terminated");
  lua_setfield(L, -2, "msg");
  lua_error(L);
}

static void on_signal(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL); /* a second one kills */
  caught_signal = sig;
  int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT;
  lua_sethook(globalL, lstop, flag, 1);
}

/* () -> the signal caught (0: none); lets Lua notice an interrupt that a pcall swallowed. */
static int l_interrupted(lua_State *L) {
  lua_pushinteger(L, caught_signal);
  return 1;
}

/* () -> nothing: the CLI has the interrupt in hand; stop raising it (cleanup runs). */
static int l_acknowledge(lua_State *L) {
  if (caught_signal) lua_sethook(L, NULL, 0, 0);
  return 0;
}

static void install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

/* Set package.path: FATHOM_LUA_PATH (";;" = what follows), then the
 * installed share/fathom/lua next to the binary, then the source tree's
 * lua/, then the path Lua already had (system modules: cjson, busted). */
static void set_search_path(lua_State *L, const char *argv0) {
  char exe[4096] = "", dir[4600];
  luaL_Buffer b;
  lua_getglobal(L, "package"); /* package */
  lua_getfield(L, -1, "path"); /* package oldpath */
  const char *old = lua_tostring(L, -1);
  luaL_buffinit(L, &b);
  const char *env = getenv("FATHOM_LUA_PATH");
  if (env != NULL && env[0] != '\0') {
    luaL_addstring(&b, env);
    luaL_addchar(&b, ';');
  }
  const char *data_dir = NULL;
  if (fth_exe_dir(argv0, exe, sizeof exe) == 0) {
    snprintf(dir, sizeof dir, "%s/../share/fathom/lua", exe);
    if (fth_is_dir(dir)) {
      lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", dir, dir);
      luaL_addvalue(&b);
      data_dir = "installed";
    }
  }
#ifdef FATHOM_SOURCE_LUA_DIR
  if (data_dir == NULL && fth_is_dir(FATHOM_SOURCE_LUA_DIR)) {
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", FATHOM_SOURCE_LUA_DIR, FATHOM_SOURCE_LUA_DIR);
    luaL_addvalue(&b);
    data_dir = "source";
  }
#endif
  luaL_addstring(&b, old ? old : "");
  luaL_pushresult(&b);         /* package oldpath newpath */
  lua_setfield(L, -3, "path"); /* package oldpath */
  lua_pop(L, 2);

  /* fathom.paths: where configs/ and scenarios/ live, for the CLI. */
  lua_newtable(L);
  if (data_dir != NULL && strcmp(data_dir, "installed") == 0) {
    lua_pushfstring(L, "%s/../share/fathom", exe);
  }
#ifdef FATHOM_SOURCE_DIR
  else if (data_dir != NULL) {
    lua_pushstring(L, FATHOM_SOURCE_DIR);
  }
#endif
  else {
    lua_pushnil(L);
  }
  lua_setfield(L, -2, "data_dir");
  lua_pushstring(L, FATHOM_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushinteger(L, (lua_Integer)getpid());
  lua_setfield(L, -2, "pid"); /* unique temporary names */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  lua_pushinteger(L, cores > 0 ? (lua_Integer)cores : 1);
  lua_setfield(L, -2, "cores"); /* the cap on worker processes */
  lua_pushcfunction(L, l_interrupted);
  lua_setfield(L, -2, "interrupted");
  lua_pushcfunction(L, l_acknowledge);
  lua_setfield(L, -2, "acknowledge_interrupt");
  if (exe[0] != '\0') {
    lua_pushfstring(L, "%s/fathom", exe);
    lua_setfield(L, -2, "exe"); /* for worker processes */
  }
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_insert(L, -2);
  lua_setfield(L, -2, "fathom.paths");
  lua_pop(L, 1);
}

/* Preload fathom.core so `require "fathom.core"` finds the linked binding. */
static void preload_core(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_fathom_core);
  lua_setfield(L, -2, "fathom.core");
  lua_pop(L, 1);
}

/* arg[0] = program, arg[1..n] = the rest; cli.lua rebuilds it as lua.c
 * does (script at 0) when it runs a script. */
static void create_arg_table(lua_State *L, char **argv, int argc) {
  lua_createtable(L, argc, 0);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i);
  }
}

static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  luaL_checkversion(L);
  luaL_openlibs(L);
  preload_core(L);
  set_search_path(L, argv[0]);
  create_arg_table(L, argv, argc);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "arg");          /* arg */
  lua_pushcfunction(L, msghandler); /* arg h */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "fathom.cli");
  if (lua_pcall(L, 1, 1, -3) != LUA_OK) { /* arg h err */
    l_message(lua_tostring(L, -1));
    lua_pushinteger(L, 1);
    return 1;
  }
  lua_getfield(L, -1, "main");            /* arg h cli main */
  lua_pushvalue(L, -4);                   /* arg h cli main arg */
  if (lua_pcall(L, 1, 1, -4) != LUA_OK) { /* arg h cli err */
    l_message(lua_tostring(L, -1));
    lua_pushinteger(L, 1);
    return 1;
  }
  lua_pushinteger(L, luaL_optinteger(L, -1, 0));
  return 1;
}

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    l_message("cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  globalL = L;
  install_handlers();
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int code = 1;
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    l_message(msg ? msg : "(error object is not a string)");
  } else {
    code = (int)lua_tointeger(L, -1);
  }
  lua_close(L);
  return code;
}
