/* lprocess.c: the few POSIX process calls fathom.parallel needs to run work
 * in local worker processes: fork with a pipe back to the parent, whole-pipe
 * reads and writes, wait, kill and _exit. Exposed as `fathom.core.process`.
 *
 * A forked child inherits the whole Lua state (the points, the function to map,
 * every loaded module), so no work has to be serialised on the way out; only
 * results come back, as a string on the pipe. The child must leave through
 * process.exit (_exit), never by returning into the parent's code: that skips
 * atexit handlers and stdio buffers the parent still owns (fork duplicates
 * them, so they are flushed once here, before forking). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lfathom.h"

/* () -> pid, fd: in the parent the child's pid and the read end of its pipe;
 * in the child 0 and the write end. Raises when fork or pipe fails. */
static int process_fork(lua_State *L) {
  int fds[2];
  if (pipe(fds) != 0) return luaL_error(L, "pipe: %s", strerror(errno));
  fflush(NULL); /* buffered output would otherwise be written twice */
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    return luaL_error(L, "fork: %s", strerror(e));
  }
  if (pid == 0) {
    close(fds[0]);
    lua_pushinteger(L, 0);
    lua_pushinteger(L, fds[1]);
  } else {
    close(fds[1]); /* later children must not hold this pipe's write end open */
    lua_pushinteger(L, (lua_Integer)pid);
    lua_pushinteger(L, fds[0]);
  }
  return 2;
}

/* (fd, string) -> true | nil, message: write it all (retrying short writes). */
static int process_write(lua_State *L) {
  int fd = (int)luaL_checkinteger(L, 1);
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  while (len > 0) {
    ssize_t n = write(fd, s, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      luaL_pushfail(L);
      lua_pushstring(L, strerror(errno));
      return 2;
    }
    s += n;
    len -= (size_t)n;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* (fd) -> string: everything until end of file; the fd is closed. */
static int process_read_all(lua_State *L) {
  int fd = (int)luaL_checkinteger(L, 1);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (;;) {
    char *p = luaL_prepbuffer(&b);
    ssize_t n = read(fd, p, LUAL_BUFFERSIZE);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; /* an error reads as end of file: the exit status says why */
    luaL_addsize(&b, (size_t)n);
  }
  close(fd);
  luaL_pushresult(&b);
  return 1;
}


/* ---- encode: a value as a Lua expression, for results sent between processes ----------- */

#define ENCODE_MAX_DEPTH 200

/* The output grows in a userdata at a fixed stack slot (replaced by a larger copy when
 * full), so the encoder may push and pop freely and the GC frees it whatever raises. */
typedef struct wbuf {
  lua_State *L;
  int slot;
  char *p;
  size_t len, cap;
} wbuf;

static void wb_add(wbuf *b, const char *s, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap * 2;
    while (cap < b->len + n) cap *= 2;
    char *p = lua_newuserdatauv(b->L, cap, 0);
    memcpy(p, b->p, b->len);
    lua_replace(b->L, b->slot);
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void wb_str(wbuf *b, const char *s) {
  wb_add(b, s, strlen(s));
}

static void wb_char(wbuf *b, char c) {
  wb_add(b, &c, 1);
}

static int is_identifier(const char *s, size_t len) {
  static const char *const reserved[] = {
      "and",   "break", "do", "else", "elseif", "end",    "false", "for",  "function", "goto",
      "if",    "in",    "local", "nil", "not",  "or",     "repeat", "return", "then", "true",
      "until", "while", NULL};
  if (len == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
    return 0;
  for (size_t i = 1; i < len; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return 0;
  }
  for (int i = 0; reserved[i]; i++)
    if (strlen(reserved[i]) == len && memcmp(reserved[i], s, len) == 0) return 0;
  return 1;
}

/* A string as a quoted Lua literal: printable bytes as they are, the rest as \ddd. */
static void add_quoted(wbuf *b, const char *s, size_t len) {
  wb_char(b, '"');
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      wb_char(b, '\\');
      wb_char(b, (char)c);
    } else if (c < 32 || c == 127) {
      char tmp[8];
      snprintf(tmp, sizeof tmp, "\\%03u", (unsigned)c);
      wb_str(b, tmp);
    } else {
      wb_char(b, (char)c);
    }
  }
  wb_char(b, '"');
}

/* Numbers read back exactly: integers in decimal (the smallest as a hex literal, which
 * Lua reads as an integer), whole floats as "N.0", other floats in C99 hexadecimal (%a:
 * exact, one call), infinities and NaN as expressions. */
static void add_number(lua_State *L, wbuf *b, int idx) {
  char tmp[64];
  if (lua_isinteger(L, idx)) {
    lua_Integer n = lua_tointeger(L, idx);
    if (n == LUA_MININTEGER)
      snprintf(tmp, sizeof tmp, "0x8000000000000000");
    else
      snprintf(tmp, sizeof tmp, LUA_INTEGER_FMT, n);
    wb_str(b, tmp);
    return;
  }
  double x = (double)lua_tonumber(L, idx);
  if (isnan(x)) {
    wb_str(b, "(0/0)");
    return;
  }
  if (isinf(x)) {
    wb_str(b, x > 0 ? "(1/0)" : "(-1/0)");
    return;
  }
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, x);
    if (strtod(tmp, NULL) == x) break;
  }
  wb_str(b, tmp);
  if (strpbrk(tmp, ".en") == NULL) wb_str(b, ".0");
}

static void encode_value(lua_State *L, wbuf *b, int idx, int depth);

static void encode_table(lua_State *L, wbuf *b, int idx, int depth) {
  if (depth > ENCODE_MAX_DEPTH) luaL_error(L, "cannot send tables nested over %d deep", ENCODE_MAX_DEPTH);
  luaL_checkstack(L, 6, "encode");
  int order = 0, array = 0;
  if (lua_getmetatable(L, idx)) {                           /* ... mt */
    order = lua_getfield(L, -1, "__order") == LUA_TTABLE;  /* ... mt order */
    array = lua_getfield(L, -2, "__array") == LUA_TBOOLEAN && lua_toboolean(L, -1);
    lua_pop(L, 1); /* ... mt order */
    lua_remove(L, -2); /* ... order */
    if (!order) lua_pop(L, 1);
  }
  int order_idx = order ? lua_gettop(L) : 0;
  wb_str(b, order || array ? "M({" : "{");
  lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_rawgeti(L, idx, i);
    encode_value(L, b, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
    wb_char(b, ',');
  }
  lua_pushnil(L);
  while (lua_next(L, idx)) { /* ... key value */
    if (lua_isinteger(L, -2)) {
      lua_Integer k = lua_tointeger(L, -2);
      if (k >= 1 && k <= len) {
        lua_pop(L, 1);
        continue;
      }
    }
    int kt = lua_type(L, -2);
    if (kt == LUA_TSTRING) {
      size_t kl;
      const char *ks = lua_tolstring(L, -2, &kl);
      if (is_identifier(ks, kl)) {
        wb_add(b, ks, kl);
      } else {
        wb_char(b, '[');
        add_quoted(b, ks, kl);
        wb_char(b, ']');
      }
    } else {
      wb_char(b, '[');
      encode_value(L, b, lua_absindex(L, -2), depth + 1);
      wb_char(b, ']');
    }
    wb_char(b, '=');
    encode_value(L, b, lua_gettop(L), depth + 1);
    wb_char(b, ',');
    lua_pop(L, 1); /* ... key */
  }
  wb_char(b, '}');
  if (order || array) {
    wb_char(b, ',');
    if (order)
      encode_value(L, b, order_idx, depth + 1);
    else
      wb_str(b, "nil");
    wb_str(b, array ? ",true)" : ")");
  }
  if (order) lua_remove(L, order_idx);
}

/* Encodes the value at idx (an absolute index). */
static void encode_value(lua_State *L, wbuf *b, int idx, int depth) {
  switch (lua_type(L, idx)) {
  case LUA_TNIL:
    wb_str(b, "nil");
    break;
  case LUA_TBOOLEAN:
    wb_str(b, lua_toboolean(L, idx) ? "true" : "false");
    break;
  case LUA_TNUMBER:
    add_number(L, b, idx);
    break;
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    add_quoted(b, s, len);
    break;
  }
  case LUA_TTABLE:
    encode_table(L, b, idx, depth);
    break;
  default:
    luaL_error(L, "cannot send a %s between processes", luaL_typename(L, idx));
  }
}

/* (value) -> string: a Lua expression for value (nil, booleans, numbers, strings and
 * tables of them; a metatable's __order list and __array flag as M(t, order, array)).
 * Numbers read back bit for bit. Raises for functions, userdata, and tables nested
 * over 200 deep (a cycle reaches that too). */
static int process_encode(lua_State *L) {
  luaL_checkany(L, 1);
  lua_settop(L, 1);
  wbuf b = {L, 2, NULL, 0, 4096};
  b.p = lua_newuserdatauv(L, b.cap, 0); /* v buf */
  encode_value(L, &b, 1, 0);
  lua_pushlstring(L, b.p, b.len);
  return 1;
}

/* (fd) -> nothing: close a descriptor (idempotent for our purposes). */
static int process_close(lua_State *L) {
  close((int)luaL_checkinteger(L, 1));
  return 0;
}

/* (pid) -> "exit", status | "signal", signal number: wait for a child. */
static int process_wait(lua_State *L) {
  pid_t pid = (pid_t)luaL_checkinteger(L, 1);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return luaL_error(L, "waitpid %d: %s", (int)pid, strerror(errno));
  if (WIFSIGNALED(status)) {
    lua_pushliteral(L, "signal");
    lua_pushinteger(L, WTERMSIG(status));
  } else {
    lua_pushliteral(L, "exit");
    lua_pushinteger(L, WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  return 2;
}

/* (pid, signal) -> true | nil, message. */
static int process_kill(lua_State *L) {
  pid_t pid = (pid_t)luaL_checkinteger(L, 1);
  int sig = (int)luaL_checkinteger(L, 2);
  luaL_argcheck(L, pid > 0, 1, "expected a child's pid");
  if (kill(pid, sig) != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* (status) -> never returns: _exit, for a forked child (see the file comment). */
static int process_exit(lua_State *L) {
  int code = (int)luaL_optinteger(L, 1, 0);
  fflush(NULL);
  _exit(code);
  return 0;
}

/* () -> seconds on the monotonic clock (an in-process clock for benchmarks). */
static int process_now(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

/* () -> CPU seconds (user + system) of this process and of its children already waited
 * for: with now(), what parallel work costs in all, whatever else the machine runs. */
static int process_cpu(lua_State *L) {
  struct rusage self, kids;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &kids);
  double s = 0.0;
  const struct rusage *r[2] = {&self, &kids};
  for (int i = 0; i < 2; i++)
    s += (double)r[i]->ru_utime.tv_sec + (double)r[i]->ru_utime.tv_usec * 1e-6 +
         (double)r[i]->ru_stime.tv_sec + (double)r[i]->ru_stime.tv_usec * 1e-6;
  lua_pushnumber(L, (lua_Number)s);
  return 1;
}

/* () -> pid of this process. */
static int process_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

static const luaL_Reg process_funcs[] = {
    {"fork", process_fork}, {"write", process_write}, {"read_all", process_read_all},
    {"close", process_close}, {"wait", process_wait}, {"kill", process_kill},
    {"exit", process_exit}, {"pid", process_pid}, {"encode", process_encode}, {"now", process_now}, {"cpu", process_cpu},
    {NULL, NULL}};

void lfth_open_process(lua_State *L) {
  luaL_newlib(L, process_funcs); /* core process */
  lua_pushinteger(L, SIGKILL);
  lua_setfield(L, -2, "SIGKILL");
  lua_pushinteger(L, SIGTERM);
  lua_setfield(L, -2, "SIGTERM");
  lua_setfield(L, -2, "process"); /* core */
}
