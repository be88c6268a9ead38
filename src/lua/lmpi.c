/* lmpi.c: the MPI calls fathom.parallel needs, as `fathom.core.mpi`: start,
 * rank and size of MPI_COMM_WORLD, an all-gather of one string per rank, abort
 * and finalize. Built with MPI only when CMake's FATHOM_MPI is on (FindMPI);
 * otherwise `available` is false and the job is one rank of one.
 *
 * Every rank runs the same command (SPMD). fathom.parallel splits each map over
 * the ranks and all-gathers the results, so every rank goes on with the same
 * values; only rank 0 writes. A non-root rank's stdout and stderr go to
 * /dev/null once MPI starts (rank 0 alone prints), but its original stderr is
 * kept for abort(), so a failing rank still says which it is and why. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lfathom.h"

#ifdef FATHOM_MPI
#include <mpi.h>

/* The stderr of a non-root rank before it was silenced (-1: not saved). A
 * process-wide fact like the MPI runtime itself, so it lives beside it. */
static int saved_stderr = -1;

static int mpi_started(void) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

/* (silence) -> rank, size: MPI_Init once; with `silence`, a rank other than 0
 * sends its stdout and stderr to /dev/null (its stderr is kept for abort). */
static int mpi_init(lua_State *L) {
  int silence = lua_toboolean(L, 1);
  int init = 0;
  MPI_Initialized(&init);
  if (!init && MPI_Init(NULL, NULL) != MPI_SUCCESS) return luaL_error(L, "MPI_Init failed");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (silence && rank != 0 && saved_stderr < 0) {
    fflush(NULL);
    saved_stderr = dup(2);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
      close(null);
    }
  }
  lua_pushinteger(L, rank);
  lua_pushinteger(L, size);
  return 2;
}

/* (string) -> list of every rank's string, in rank order (MPI_Allgatherv). */
static int mpi_allgather(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  if (!mpi_started()) return luaL_error(L, "MPI is not started");
  luaL_argcheck(L, len <= (size_t)0x7fffffff, 1, "over 2 GiB from one rank");
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* Scratch as userdata, so the GC frees it whatever raises. */
  int *counts = lua_newuserdatauv(L, 2 * (size_t)size * sizeof(int), 0);
  int *displs = counts + size;
  int mine = (int)len;
  if (MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS)
    return luaL_error(L, "MPI_Allgather failed");
  long long total = 0;
  for (int i = 0; i < size; i++) {
    displs[i] = (int)total;
    total += counts[i];
  }
  if (total > 0x7fffffffLL) return luaL_error(L, "all ranks together send over 2 GiB");
  char *buf = lua_newuserdatauv(L, total > 0 ? (size_t)total : 1, 0);
  if (MPI_Allgatherv(s, mine, MPI_CHAR, buf, counts, displs, MPI_CHAR, MPI_COMM_WORLD) !=
      MPI_SUCCESS)
    return luaL_error(L, "MPI_Allgatherv failed");
  lua_createtable(L, size, 0);
  for (int i = 0; i < size; i++) {
    lua_pushlstring(L, buf + displs[i], (size_t)counts[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* (code, message) -> never returns: the message on this rank's own stderr,
 * then MPI_Abort, which ends every rank of the job. */
static int mpi_abort(lua_State *L) {
  int code = (int)luaL_optinteger(L, 1, 1);
  size_t len;
  const char *msg = luaL_optlstring(L, 2, "", &len);
  int fd = saved_stderr >= 0 ? saved_stderr : 2;
  if (len > 0) {
    ssize_t w = write(fd, msg, len);
    w = write(fd, "\n", 1);
    (void)w;
  }
  fflush(NULL);
  if (mpi_started()) MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);
  return 0;
}

/* () -> nothing: MPI_Finalize once (idempotent). */
static int mpi_finalize(lua_State *L) {
  (void)L;
  if (mpi_started()) {
    fflush(NULL);
    MPI_Finalize();
  }
  return 0;
}

/* () -> whether MPI_Init has run and MPI_Finalize has not. */
static int mpi_active(lua_State *L) {
  lua_pushboolean(L, mpi_started());
  return 1;
}

static const luaL_Reg mpi_funcs[] = {{"init", mpi_init},         {"allgather", mpi_allgather},
                                     {"abort", mpi_abort},       {"finalize", mpi_finalize},
                                     {"active", mpi_active},     {NULL, NULL}};
#define MPI_AVAILABLE 1
#else
/* Without MPI: one rank of one; nothing to gather, abort is an exit. */
static int mpi_init(lua_State *L) {
  lua_pushinteger(L, 0);
  lua_pushinteger(L, 1);
  return 2;
}

static int mpi_allgather(lua_State *L) {
  luaL_checkstring(L, 1);
  lua_createtable(L, 1, 0);
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  return 1;
}

static int mpi_abort(lua_State *L) {
  int code = (int)luaL_optinteger(L, 1, 1);
  const char *msg = luaL_optstring(L, 2, "");
  if (msg[0]) fprintf(stderr, "%s\n", msg);
  fflush(NULL);
  exit(code);
  return 0;
}

static int mpi_finalize(lua_State *L) {
  (void)L;
  return 0;
}

static int mpi_active(lua_State *L) {
  lua_pushboolean(L, 0);
  return 1;
}

static const luaL_Reg mpi_funcs[] = {{"init", mpi_init},         {"allgather", mpi_allgather},
                                     {"abort", mpi_abort},       {"finalize", mpi_finalize},
                                     {"active", mpi_active},     {NULL, NULL}};
#define MPI_AVAILABLE 0
#endif

void lfth_open_mpi(lua_State *L) {
  luaL_newlib(L, mpi_funcs); /* core mpi */
  lua_pushboolean(L, MPI_AVAILABLE);
  lua_setfield(L, -2, "available");
  lua_setfield(L, -2, "mpi"); /* core */
}
