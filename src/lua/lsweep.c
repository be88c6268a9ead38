/* lsweep.c: `fathom.Sweep`, a training sweep evaluated in C batches
 * (fth_sweep.h); lua/fathom/sweep_batch.lua builds it and checks it against
 * the per-point Lua path.
 *   core.sweep_new(node, topology, model, workload, spec) -> sweep
 *     spec = {axes = {len, ...}, keys = {{field =, index =, axis =, values = {...}}, ...},
 *             goodput = report.goodput_def's table or nil}
 *   sweep:program{columns = {{src =, group =, a =, b =, c =, int =}, ...},
 *                 texts = {cell text, ...}, fabric = {physical dimension name, ...}}
 *   sweep:first_valid(limit) -> the first point the core evaluates (1-based) or nil
 *   sweep:count() -> points
 *   sweep:scan(first, last) -> {mask of the groups first seen, in order}, first point invalid
 *   sweep:reset() forgets the scan; sweep:see(groups) adds groups to the header's;
 *   sweep:mask(i) -> point i's groups
 *   sweep:set_order({column, ...}) the columns a row writes, in order (1-based)
 *   sweep:rows(first, last, err_of) -> CSV text of points first..last (1-based);
 *       err_of(i) -> the error text of invalid point i (the Lua path's), or nil when
 *       the Lua path finds it valid (an internal disagreement: raised)
 *   sweep:write_rows(first, last, err_of, file) -> true, or false, point, groups (a record
 *       with columns the header lacks: rows stop before it), or nil, message: the same
 *       rows written to an io file; sweep:widen(from, to, added [, header]) rewrites them
 *       under a wider header; sweep:reproject(from, to, map) rearranges a part's cells
 *   sweep:json_program{valid = nodes, invalid = nodes} the JSON Lines node programs
 *       (jnode); sweep:lines(first, last,
 *       err_of) and sweep:write_lines(first, last, err_of, file): JSON Lines as rows
 *   sweep:yaml_program{valid = nodes, invalid = nodes} the YAML node programs (a node's `unit`: its number readable, core.unit_text);
 *       sweep:lines(first, last, err_of, "yaml") and sweep:write_lines(first, last, err_of,
 *       file, "yaml"): each point's YAML list item (fathom.analysis.stream's text)
 * A key's value (an integer: sweep_batch.lua takes no other) is its label in every format:
 * its decimal digits, fathom.format.util.number's text of an integer.
 * Nothing is allocated per point; a row is appended to the chunk's buffer (kept and
 * reused from chunk to chunk). */
#if defined(__linux__)
#define _GNU_SOURCE /* copy_file_range */
#include <unistd.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fth_numtext.h"
#include "fth_sweep.h"
#include "lcheck.h"
#include "lfathom.h"

#define SWEEP "fathom.Sweep"

/// A node of the JSON Lines or YAML program (sweep:json_program, sweep:yaml_program).
typedef struct jnode {
  int t;            ///< 0 open an object, 1 close it, 2 a column's value, 3 constant text
  int group;        ///< written where this presence group is in the point's mask
  int col;          ///< t 2: the column (0-based)
  int skip;         ///< t 0: the index of its close node
  int unit;         ///< t 2, YAML: the column's number as fth_unit_text writes it (-1: a number)
  const char *text; ///< JSON: "key":{ (open), } (close), "key": (column), "key":value (constant);
                    ///< YAML: <indent>key: (open, column), <indent>key: value\n (constant)
  size_t len;
} jnode;

/// What fill_rows writes.
enum { OUT_CSV = 0, OUT_JSONL, OUT_YAML };

/// A cell of a CSV row as add_row writes it: a column, or a run of constant columns of one
/// group joined with their commas (one copy for them all).
typedef struct rowcell {
  int col;          ///< the column (0-based), or -1: a run of constant text
  int group;        ///< the run's presence group
  int commas;       ///< the run's columns less one (its commas when absent)
  const char *text; ///< the run's text ("a,b,c")
  size_t len;
} rowcell;

/// A column's last number and its text (a sweep's consecutive points share many values).
typedef struct numcache {
  uint64_t bits; ///< the double's bits (-0 and 0 differ)
  int len;       ///< 0: nothing cached
  char text[40];
} numcache;

typedef struct lsweep {
  fth_sweep_def def;
  double *values;
  fth_sweep_column *cols;
  numcache *numbers; ///< one per column
  int n_cols;
  int *order;
  int n_order;
  rowcell *cells; ///< the order compiled (set_order): n_cells of them
  int n_cells;
  char *run_text; ///< the runs' texts
  const char **texts;
  size_t *text_len;
  int n_texts;
  jnode *jnodes; ///< JSON Lines node program: a valid record's nodes, then an invalid one's
  int n_jvalid, n_jnodes;
  jnode *ynodes; ///< YAML node program (jnodes' layout)
  int n_yvalid, n_ynodes;
  numcache *ynumbers; ///< one per column: its last YAML value text
  lua_State *L;       ///< while filling (the YAML string rule asks Lua's number syntax)
  const char **fabric;
  int n_fabric;
  unsigned long long seen;  ///< groups the header has (scan saw them, or see added them)
  unsigned long long fresh; ///< write_rows stopped at a record with these groups besides

  fth_sweep_point pt;
  char *out; ///< the chunk's text, kept between chunks (grows to one chunk's size once)
  size_t out_len, out_cap;
  int out_failed; ///< out of memory while writing the chunk
} lsweep;

static lsweep *check_sweep(lua_State *L, int idx) {
  return (lsweep *)luaL_checkudata(L, idx, SWEEP);
}

static int sweep_gc(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  free(s->values);
  free(s->cols);
  free(s->numbers);
  s->numbers = NULL;
  free(s->order);
  free(s->cells);
  free(s->run_text);
  s->cells = NULL;
  s->run_text = NULL;
  free(s->texts);
  free(s->text_len);
  free(s->fabric);
  free(s->jnodes);
  free(s->ynodes);
  free(s->ynumbers);
  s->ynodes = NULL;
  s->ynumbers = NULL;
  s->jnodes = NULL;
  free(s->out);
  s->out = NULL;
  s->values = NULL;
  s->cols = NULL;
  s->order = NULL;
  s->texts = NULL;
  s->text_len = NULL;
  s->fabric = NULL;
  return 0;
}

static lua_Integer field_int(lua_State *L, int t, const char *k, lua_Integer lo, lua_Integer hi) {
  lua_getfield(L, t, k);
  int ok;
  lua_Integer v = lua_tointegerx(L, -1, &ok);
  lua_pop(L, 1);
  if (!ok || v < lo || v > hi)
    luaL_error(L, "sweep_new: '%s' must be an integer in [%d, %d]", k, (int)lo, (int)hi);
  return v;
}

/* Keep string at stack top alive in the keep table (at `keep`) and return it. */
static const char *keep_string(lua_State *L, int keep) {
  const char *s = lua_tostring(L, -1);
  if (!s) luaL_error(L, "sweep_new: expected a string");
  lua_pushvalue(L, -1);
  lua_rawseti(L, keep, (lua_Integer)lua_rawlen(L, keep) + 1);
  return s;
}

static void *xcalloc(lua_State *L, size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) luaL_error(L, "sweep_new: out of memory");
  return p;
}

static int core_sweep_new(lua_State *L) {
  luaL_checktype(L, 5, LUA_TTABLE);
  lsweep *s = (lsweep *)lua_newuserdatauv(L, sizeof(lsweep), 2);
  memset(s, 0, sizeof *s);
  luaL_setmetatable(L, SWEEP);
  int ud = lua_gettop(L);
  lua_newtable(L);
  int keep = lua_gettop(L);
  lua_pushvalue(L, keep);
  lua_setiuservalue(L, ud, 1);
  lua_newtable(L); /* error prefixes by core path (see error_text) */
  lua_setiuservalue(L, ud, 2);
  lcheck_node(L, 1, &s->def.node);
  lcheck_topology(L, 2, &s->def.topo);
  lcheck_model(L, 3, &s->def.model);
  lcheck_train(L, 4, &s->def.work);
  /* axes */
  lua_getfield(L, 5, "axes");
  luaL_checktype(L, -1, LUA_TTABLE);
  s->def.n_axes = (int)lua_rawlen(L, -1);
  if (s->def.n_axes > FTH_SWEEP_MAX_AXES) return luaL_error(L, "sweep_new: too many axes");
  for (int a = 0; a < s->def.n_axes; a++) {
    lua_rawgeti(L, -1, a + 1);
    s->def.axis_len[a] = (long long)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  /* keys and their values, one block */
  lua_getfield(L, 5, "keys");
  luaL_checktype(L, -1, LUA_TTABLE);
  int keys = lua_gettop(L);
  s->def.n_keys = (int)lua_rawlen(L, keys);
  if (s->def.n_keys > FTH_SWEEP_MAX_KEYS) return luaL_error(L, "sweep_new: too many keys");
  size_t n_values = 0;
  for (int k = 0; k < s->def.n_keys; k++) {
    lua_rawgeti(L, keys, k + 1);
    lua_getfield(L, -1, "values");
    n_values += lua_rawlen(L, -1);
    lua_pop(L, 2);
  }
  s->values = (double *)xcalloc(L, n_values, sizeof(double));
  size_t at = 0;
  for (int k = 0; k < s->def.n_keys; k++) {
    lua_rawgeti(L, keys, k + 1);
    int kt = lua_gettop(L);
    fth_sweep_key *key = &s->def.key[k];
    key->field = (fth_sweep_field)field_int(L, kt, "field", 0, FTH_SWEEP_FIELD_COUNT - 1);
    key->index = (int)field_int(L, kt, "index", 0, 1 << 20);
    key->axis = (int)field_int(L, kt, "axis", 1, s->def.n_axes) - 1;
    lua_getfield(L, kt, "values");
    size_t n = lua_rawlen(L, -1);
    if ((long long)n != s->def.axis_len[key->axis])
      return luaL_error(L, "sweep_new: key %d: values != axis", k + 1);
    key->values = s->values + at;
    for (size_t i = 0; i < n; i++) {
      lua_rawgeti(L, -1, (lua_Integer)i + 1);
      lua_Integer v = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
      if (v < 1 || v > (1 << 22))
        return luaL_error(L, "sweep_new: key %d: value %d is not an integer in [1, 2^22]", k + 1, (int)i + 1);
      s->values[at + i] = (double)v;
      lua_pop(L, 1);
    }
    at += n;
    lua_pop(L, 2);
  }
  lua_pop(L, 1); /* keys */
  /* the run with failures, energy and cost (report.goodput_def), as core.goodput reads it */
  lua_getfield(L, 5, "goodput");
  if (lua_istable(L, -1)) {
    int g = lua_gettop(L);
    fth_goodput_def *d = &s->def.gp;
    *d = fth_goodput_def_default();
    d->gpu_mtbf_s = lcheck_number_or_inf(L, g, "reliability", "gpu_mtbf_s", d->gpu_mtbf_s);
    d->checkpoint_bytes = lcheck_number(L, g, "reliability", "checkpoint_bytes", 0);
    d->checkpoint_bw = lcheck_number(L, g, "reliability", "checkpoint_bw", 0);
    d->restart_s = lcheck_number(L, g, "reliability", "restart_s", 0);
    d->interval_s = lcheck_number(L, g, "reliability", "interval_s", 0);
    d->gpu_power_w = lcheck_number(L, g, "reliability", "gpu_power_w", 0);
    d->pue = lcheck_number(L, g, "reliability", "pue", 1);
    d->price_per_gpu_hour = lcheck_number(L, g, "reliability", "price_per_gpu_hour", 0);
    lua_getfield(L, g, "checkpoint_from_footprint");
    s->def.gp_checkpoint_from_footprint = lua_toboolean(L, -1);
    lua_pop(L, 1);
    s->def.goodput = 1;
  }
  lua_pop(L, 1);
  fth_error err;
  if (fth_sweep_check(&s->def, &err) != FTH_OK)
    return luaL_error(L, "sweep_new: %s: %s", err.path, err.msg);
  lua_settop(L, ud);
  return 1;
}

/* sweep:program{columns, texts, fabric}: the column program (once). */
static int sweep_program(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (s->cols) return luaL_error(L, "sweep:program: already set");
  lua_getiuservalue(L, 1, 1);
  int keep = lua_gettop(L);
  /* columns */
  lua_getfield(L, 2, "columns");
  luaL_checktype(L, -1, LUA_TTABLE);
  int cols = lua_gettop(L);
  s->n_cols = (int)lua_rawlen(L, cols);
  s->cols = (fth_sweep_column *)xcalloc(L, (size_t)s->n_cols, sizeof(fth_sweep_column));
  s->order = (int *)xcalloc(L, (size_t)s->n_cols, sizeof(int));
  s->numbers = (numcache *)xcalloc(L, (size_t)s->n_cols, sizeof(numcache));
  for (int i = 0; i < s->n_cols; i++) {
    lua_rawgeti(L, cols, i + 1);
    int ct = lua_gettop(L);
    fth_sweep_column *c = &s->cols[i];
    c->src = (fth_sweep_src)field_int(L, ct, "src", 0, FTH_SWEEP_SRC_COUNT - 1);
    c->group = (int)field_int(L, ct, "group", 0, FTH_SG_COUNT - 1);
    c->a = (int)field_int(L, ct, "a", -1, 1 << 20);
    c->b = (int)field_int(L, ct, "b", -1, 1 << 20);
    c->c = (int)field_int(L, ct, "c", -1, 1 << 20);
    c->as_integer = (int)field_int(L, ct, "int", 0, 1);
    if (c->src == FTH_SWEEP_SRC_LABEL && (c->a < 1 || c->a > s->def.n_keys))
      return luaL_error(L, "sweep:program: column %d: no key %d", i + 1, c->a);
    if ((c->src == FTH_SWEEP_SRC_RESULT || c->src == FTH_SWEEP_SRC_BOOL ||
         c->src == FTH_SWEEP_SRC_NAME) &&
        (c->a < 0 || c->a >= FTH_SV_COUNT))
      return luaL_error(L, "sweep:program: column %d: no value %d", i + 1, c->a);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  /* texts, fabric */
  lua_getfield(L, 2, "texts");
  luaL_checktype(L, -1, LUA_TTABLE);
  s->n_texts = (int)lua_rawlen(L, -1);
  s->texts = (const char **)xcalloc(L, (size_t)s->n_texts, sizeof(char *));
  s->text_len = (size_t *)xcalloc(L, (size_t)s->n_texts, sizeof(size_t));
  for (int i = 0; i < s->n_texts; i++) {
    lua_rawgeti(L, -1, i + 1);
    s->texts[i] = keep_string(L, keep);
    s->text_len[i] = strlen(s->texts[i]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  for (int i = 0; i < s->n_cols; i++)
    if (s->cols[i].src == FTH_SWEEP_SRC_TEXT && (s->cols[i].a < 1 || s->cols[i].a > s->n_texts))
      return luaL_error(L, "sweep:program: column %d: no text %d", i + 1, s->cols[i].a);
  lua_getfield(L, 2, "fabric");
  if (lua_istable(L, -1)) {
    s->n_fabric = (int)lua_rawlen(L, -1);
    s->fabric = (const char **)xcalloc(L, (size_t)s->n_fabric, sizeof(char *));
    for (int i = 0; i < s->n_fabric; i++) {
      lua_rawgeti(L, -1, i + 1);
      s->fabric[i] = keep_string(L, keep);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return 0;
}

/* Read one node list (table at idx) into nodes from `at` (`yaml`: the YAML program); returns
 * the next index. */
static int read_jnodes(lua_State *L, lsweep *s, jnode *nodes, int yaml, int idx, int at, int keep) {
  int n = (int)lua_rawlen(L, idx), stack[64], depth = 0;
  const char *what = yaml ? "sweep:yaml_program" : "sweep:json_program";
  for (int i = 0; i < n; i++, at++) {
    lua_rawgeti(L, idx, i + 1);
    int nt = lua_gettop(L);
    jnode *nd = &nodes[at];
    lua_getfield(L, nt, "unit");
    nd->unit = lua_isnil(L, -1) ? -1 : luaL_checkoption(L, -1, NULL, ltext_unit_names);
    lua_pop(L, 1);
    nd->t = (int)field_int(L, nt, "t", 0, 3);
    nd->group = (int)field_int(L, nt, "group", 0, FTH_SG_COUNT - 1);
    lua_getfield(L, nt, "text");
    nd->text = keep_string(L, keep);
    nd->len = strlen(nd->text);
    lua_pop(L, 1);
    if (nd->t == 2) {
      nd->col = (int)field_int(L, nt, "col", 1, s->n_cols) - 1;
      fth_sweep_src src = s->cols[nd->col].src;
      if (src == FTH_SWEEP_SRC_TEXT)
        return luaL_error(L, "%s: node %d: column %d has no value", what, i + 1, nd->col + 1);
      if (nd->unit >= 0 && src != FTH_SWEEP_SRC_RESULT)
        return luaL_error(L, "%s: node %d: a unit on a column that is not a number", what, i + 1);
    } else if (nd->t == 0) {
      if (depth == 64) return luaL_error(L, "%s: objects nest too deep", what);
      stack[depth++] = at;
    } else if (nd->t == 1) {
      if (depth == 0) return luaL_error(L, "%s: node %d closes nothing", what, i + 1);
      nodes[stack[--depth]].skip = at;
    }
    lua_pop(L, 1);
  }
  if (depth != 0) return luaL_error(L, "%s: an object is not closed", what);
  return at;
}

/* sweep:json_program{valid = nodes, invalid = nodes}: the JSON Lines node programs (once,
 * after program); node = {t =, group =, text =, col =} (jnode). */
static int sweep_json_program(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!s->cols) return luaL_error(L, "sweep:json_program: no program");
  if (s->jnodes) return luaL_error(L, "sweep:json_program: already set");
  lua_getiuservalue(L, 1, 1);
  int keep = lua_gettop(L);
  lua_getfield(L, 2, "valid");
  luaL_checktype(L, -1, LUA_TTABLE);
  lua_getfield(L, 2, "invalid");
  luaL_checktype(L, -1, LUA_TTABLE);
  size_t n = lua_rawlen(L, -2) + lua_rawlen(L, -1);
  s->jnodes = (jnode *)xcalloc(L, n, sizeof(jnode));
  s->n_jvalid = read_jnodes(L, s, s->jnodes, 0, keep + 1, 0, keep);
  s->n_jnodes = read_jnodes(L, s, s->jnodes, 0, keep + 2, s->n_jvalid, keep);
  lua_settop(L, keep - 1);
  return 0;
}

/* sweep:yaml_program{valid = nodes, invalid = nodes}: the YAML node programs (once, after
 * program). */
static int sweep_yaml_program(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!s->cols) return luaL_error(L, "sweep:yaml_program: no program");
  if (s->ynodes) return luaL_error(L, "sweep:yaml_program: already set");
  lua_getiuservalue(L, 1, 1);
  int keep = lua_gettop(L);
  lua_getfield(L, 2, "valid");
  luaL_checktype(L, -1, LUA_TTABLE);
  lua_getfield(L, 2, "invalid");
  luaL_checktype(L, -1, LUA_TTABLE);
  size_t n = lua_rawlen(L, -2) + lua_rawlen(L, -1);
  s->ynodes = (jnode *)xcalloc(L, n, sizeof(jnode));
  s->ynumbers = (numcache *)xcalloc(L, (size_t)s->n_cols, sizeof(numcache));
  s->n_yvalid = read_jnodes(L, s, s->ynodes, 1, keep + 1, 0, keep);
  s->n_ynodes = read_jnodes(L, s, s->ynodes, 1, keep + 2, s->n_yvalid, keep);
  lua_settop(L, keep - 1);
  return 0;
}

/* sweep:first_valid(limit) -> the first point (1-based) the core evaluates, or nil */
static int sweep_first_valid(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  long long n = fth_sweep_count(&s->def), limit = (long long)luaL_checkinteger(L, 2);
  for (long long i = 0; i < n && i < limit; i++) {
    fth_sweep_point_eval(&s->def, i, &s->pt);
    if (s->pt.valid) {
      lua_pushinteger(L, (lua_Integer)i + 1);
      return 1;
    }
  }
  lua_pushnil(L);
  return 1;
}

static int sweep_count(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)fth_sweep_count(&check_sweep(L, 1)->def));
  return 1;
}

/* Evaluate point i (0-based) into s->pt; a result a written column reads as not
 * finite makes the point invalid, as errors.check_finite makes it on the Lua path. */
static unsigned long long eval_point(lsweep *s, long long i) {
  fth_sweep_point_eval(&s->def, i, &s->pt);
  if (s->pt.valid && !fth_sweep_finite(&s->pt, s->cols, s->n_cols)) s->pt.valid = 0;
  return fth_sweep_mask(&s->pt);
}

static void point_range(lua_State *L, lsweep *s, long long *first, long long *last) {
  long long n = fth_sweep_count(&s->def);
  *first = (long long)luaL_checkinteger(L, 2);
  *last = (long long)luaL_checkinteger(L, 3);
  luaL_argcheck(L, *first >= 1 && *first <= n, 2, "point out of range");
  luaL_argcheck(L, *last >= *first - 1 && *last <= n, 3, "point out of range");
}

static int sweep_scan(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  if (!s->cols) return luaL_error(L, "sweep:scan: no program");
  long long first, last;
  point_range(L, s, &first, &last);
  lua_newtable(L);
  int n = 0, first_invalid = 0;
  for (long long i = first; i <= last; i++) {
    unsigned long long m = eval_point(s, i - 1);
    if (i == 1 && !s->pt.valid) first_invalid = 1;
    unsigned long long fresh = m & ~s->seen;
    if (fresh) {
      lua_pushinteger(L, (lua_Integer)fresh);
      lua_rawseti(L, -2, ++n);
      s->seen |= m;
    }
  }
  lua_pushboolean(L, first_invalid);
  return 2;
}

/* sweep:reset() forgets what scan saw (the header's groups). */
static int sweep_reset(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  s->seen = 0;
  return 0;
}

static int sweep_set_order(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  int n = (int)lua_rawlen(L, 2);
  luaL_argcheck(L, n <= s->n_cols, 2, "more columns than the program has");
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 2, i + 1);
    lua_Integer c = luaL_checkinteger(L, -1);
    luaL_argcheck(L, c >= 1 && c <= s->n_cols, 2, "no such column");
    s->order[i] = (int)c - 1;
    lua_pop(L, 1);
  }
  s->n_order = n;
  /* the row's cells: consecutive constant columns of one group become one run */
  size_t text = 0;
  for (int i = 0; i < n; i++)
    if (s->cols[s->order[i]].src == FTH_SWEEP_SRC_TEXT)
      text += s->text_len[s->cols[s->order[i]].a - 1] + 1;
  free(s->cells);
  free(s->run_text);
  s->cells = NULL;
  s->run_text = NULL;
  s->cells = (rowcell *)xcalloc(L, (size_t)n, sizeof(rowcell));
  s->run_text = (char *)xcalloc(L, text, 1);
  size_t at = 0;
  int nc = 0;
  for (int i = 0; i < n; i++) {
    const fth_sweep_column *c = &s->cols[s->order[i]];
    rowcell *cell = &s->cells[nc];
    if (c->src != FTH_SWEEP_SRC_TEXT) {
      *cell = (rowcell){s->order[i], c->group, 0, NULL, 0};
      nc++;
      continue;
    }
    int joins = nc > 0 && s->cells[nc - 1].col < 0 && s->cells[nc - 1].group == c->group;
    if (joins) {
      cell = &s->cells[nc - 1];
      s->run_text[at++] = ',';
      cell->commas++;
    } else {
      *cell = (rowcell){-1, c->group, 0, s->run_text + at, 0};
      nc++;
    }
    memcpy(s->run_text + at, s->texts[c->a - 1], s->text_len[c->a - 1]);
    at += s->text_len[c->a - 1];
    cell->len = (size_t)(s->run_text + at - cell->text);
  }
  s->n_cells = nc;
  return 0;
}

/* Grow the chunk's buffer to hold n more bytes; 0 when out of memory (the chunk fails). */
static int grow(lsweep *s, size_t n) {
  size_t cap = s->out_cap ? s->out_cap : 1 << 16;
  while (cap < s->out_len + n) cap *= 2;
  char *p = (char *)realloc(s->out, cap);
  if (!p) {
    s->out_failed = 1;
    return 0;
  }
  s->out = p;
  s->out_cap = cap;
  return 1;
}

/* Room for n more bytes of the chunk's text (the check inline, growing rarely). */
static inline int room(lsweep *s, size_t n) {
  return s->out_len + n <= s->out_cap || grow(s, n);
}

static inline void put(lsweep *s, const char *t, size_t n) {
  if (!room(s, n)) return;
  memcpy(s->out + s->out_len, t, n);
  s->out_len += n;
}

static inline void put_char(lsweep *s, char c) {
  if (!room(s, 1)) return;
  s->out[s->out_len++] = c;
}

/* Append column `col`'s number v (finite) as fth_sweep_format_number writes it, from the
 * column's cache when v is the number it wrote last. */
static inline void put_number(lsweep *s, int col, double v, int as_integer) {
  numcache *c = &s->numbers[col];
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  if (c->len == 0 || c->bits != bits) {
    c->len = fth_sweep_format_number(c->text, sizeof c->text, v, as_integer);
    c->bits = bits;
  }
  /* a fixed-size copy (no call): the text is under 32 bytes, the cache 40 */
  if (!room(s, 32)) return;
  memcpy(s->out + s->out_len, c->text, 32);
  s->out_len += (size_t)c->len;
}

/* Key k's value at this point as its label: an integer's digits. */
static inline void put_label(lsweep *s, int k) {
  const fth_sweep_key *key = &s->def.key[k];
  if (!room(s, 24)) return;
  s->out_len += (size_t)fth_numtext_int(s->out + s->out_len, (long long)key->values[s->pt.idx[key->axis]]);
}

/* fathom.format.csv's cell rule for a string: quoted when it holds , " CR or LF */
static void add_cell_text(lsweep *s, const char *t) {
  if (!strpbrk(t, ",\"\n\r")) {
    put(s, t, strlen(t));
    return;
  }
  put_char(s, '"');
  for (const char *p = t; *p; p++) {
    if (*p == '"') put_char(s, '"');
    put_char(s, *p);
  }
  put_char(s, '"');
}

/* Push the Lua path's error text of invalid point i (1-based), in s->pt. A core
 * refusal reads "<file:line:col>: <key path>: <core message>" where the prefix
 * depends on the core's path only: the first point refused at a path asks
 * err_of (the Lua path) and keeps the prefix when the text ends in the core's
 * message; later ones are composed here. Anything else asks err_of every time. */
static void error_text(lua_State *L, lsweep *s, long long i) {
  const fth_error *e = &s->pt.err;
  int cacheable = e->path[0] != '\0' && e->msg[0] != '\0';
  if (cacheable) {
    lua_getiuservalue(L, 1, 2);
    lua_getfield(L, -1, e->path);
    if (lua_isstring(L, -1)) {
      lua_pushstring(L, e->msg);
      lua_concat(L, 2);
      lua_remove(L, -2);
      return;
    }
    lua_pop(L, 2);
  }
  lua_pushvalue(L, 4);
  lua_pushinteger(L, (lua_Integer)i);
  lua_call(L, 1, 1);
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  if (!text) luaL_error(L, "sweep: point %d is valid on the Lua path, not in C", (int)i);
  size_t mlen = strlen(e->msg);
  if (cacheable && len > mlen + 2 && strcmp(text + len - mlen, e->msg) == 0 &&
      text[len - mlen - 2] == ':') {
    lua_getiuservalue(L, 1, 2);
    lua_pushlstring(L, text, len - mlen);
    lua_setfield(L, -2, e->path);
    lua_pop(L, 1);
  }
}

/* fathom.format.json's string text: " and \\ escaped, control characters as \\b \\f \\n
 * \\r \\t or \\u00XX, every other byte as it is */
static void add_json_string(lsweep *s, const char *t) {
  put_char(s, '"');
  for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
    unsigned char c = *p;
    if (c >= 32 && c != 127 && c != '"' && c != '\\') {
      put_char(s, (char)c);
      continue;
    }
    char esc[8];
    const char *e = NULL;
    switch (c) {
    case '"':
      e = "\\\"";
      break;
    case '\\':
      e = "\\\\";
      break;
    case '\b':
      e = "\\b";
      break;
    case '\f':
      e = "\\f";
      break;
    case '\n':
      e = "\\n";
      break;
    case '\r':
      e = "\\r";
      break;
    case '\t':
      e = "\\t";
      break;
    default:
      snprintf(esc, sizeof esc, "\\u%04x", c);
      e = esc;
    }
    put(s, e, strlen(e));
  }
  put_char(s, '"');
}

/* A string as a YAML scalar (ltext.c's rule, fathom.format.yaml's): plain or quoted. */
static void add_yaml_string(lsweep *s, const char *t, size_t len) {
  if (ltext_yaml_plain(s->L, t, len)) {
    put(s, t, len);
    return;
  }
  if (!room(s, LTEXT_YAML_QUOTED_CAP(len))) return;
  s->out_len += ltext_yaml_quote(t, len, s->out + s->out_len);
}

/* Column `col`'s number v (finite) as its YAML scalar: readable in `unit` (>= 0; a string,
 * quoted where the rule says) or fathom.format.yaml's number (a float that prints without a
 * point or an exponent gets ".0"); from the column's cache when v is its last number. */
static void put_yaml_number(lsweep *s, int col, double v, int unit, int as_integer) {
  numcache *c = &s->ynumbers[col];
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  if (c->len > 0 && c->bits == bits) {
    put(s, c->text, (size_t)c->len);
    return;
  }
  size_t start = s->out_len;
  if (unit >= 0) {
    char text[FTH_UNIT_TEXT_CAP];
    int n = fth_unit_text(text, (fth_unit)unit, v);
    add_yaml_string(s, text, (size_t)n);
  } else {
    char text[40];
    int n = fth_sweep_format_number(text, sizeof text, v, as_integer);
    put(s, text, (size_t)n);
    if (!as_integer && !strpbrk(text, ".eEn")) put(s, ".0", 2);
  }
  if (s->out_failed) return;
  size_t len = s->out_len - start;
  c->len = 0;
  if (len < sizeof c->text) {
    memcpy(c->text, s->out + start, len);
    c->len = (int)len;
    c->bits = bits;
  }
}

/* How a point's values are written: CSV cells, JSON Lines members, YAML list items. */
typedef enum cell_enc { ENC_CSV, ENC_JSON, ENC_YAML } cell_enc;

static void put_string(lsweep *s, cell_enc enc, const char *t) {
  if (enc == ENC_CSV)
    add_cell_text(s, t);
  else if (enc == ENC_JSON)
    add_json_string(s, t);
  else
    add_yaml_string(s, t, strlen(t));
}

/* Column `col`'s value at point s->pt in encoding `enc` (YAML numbers readable in `unit`
 * when >= 0); 0 when its number is not finite. Constant texts are CSV's alone (the node
 * programs of JSON and YAML carry their own). */
static int put_value(lsweep *s, cell_enc enc, int col, int unit, const char *err_text) {
  const fth_sweep_column *c = &s->cols[col];
  switch (c->src) {
  case FTH_SWEEP_SRC_TEXT:
    if (enc == ENC_CSV) put(s, s->texts[c->a - 1], s->text_len[c->a - 1]);
    break;
  case FTH_SWEEP_SRC_LABEL:
    put_label(s, c->a - 1);
    break;
  case FTH_SWEEP_SRC_RESULT: {
    double v = fth_sweep_number(&s->pt, c);
    if (!isfinite(v)) return 0;
    if (enc == ENC_YAML)
      put_yaml_number(s, col, v, unit, c->as_integer);
    else
      put_number(s, col, v, c->as_integer);
    break;
  }
  case FTH_SWEEP_SRC_BOOL:
    if (fth_sweep_number(&s->pt, c) != 0)
      put(s, "true", 4);
    else
      put(s, "false", 5);
    break;
  case FTH_SWEEP_SRC_NAME:
    put_string(s, enc, fth_sweep_name(&s->pt, c, s->fabric, s->n_fabric));
    break;
  case FTH_SWEEP_SRC_ERROR:
    put_string(s, enc, err_text ? err_text : "");
    break;
  case FTH_SWEEP_SRC_COUNT:
    break;
  }
  return 1;
}

/* Append point s->pt's row; 0 (row partly written) when a number is not finite. */
static int add_row(lsweep *s, unsigned long long m, const char *err_text) {
  static const char commas[] = ",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,";
  for (int j = 0; j < s->n_cells; j++) {
    const rowcell *cell = &s->cells[j];
    if (j > 0) put_char(s, ',');
    if (cell->col < 0) { /* a run of constants: its text, or its commas where absent */
      if (m & (1ULL << cell->group))
        put(s, cell->text, cell->len);
      else
        for (int k = cell->commas; k > 0; k -= (int)sizeof commas - 1)
          put(s, commas, (size_t)(k < (int)sizeof commas - 1 ? k : (int)sizeof commas - 1));
      continue;
    }
    if (!(m & (1ULL << s->cols[cell->col].group))) continue;
    if (!put_value(s, ENC_CSV, cell->col, -1, err_text)) return 0;
  }
  put_char(s, '\n');
  return 1;
}

/* Append point s->pt's JSON line (the valid or the invalid node program); 0 (line partly
 * written) when a number is not finite. */
static int add_line(lsweep *s, unsigned long long m, const char *err_text) {
  int lo = s->pt.valid ? 0 : s->n_jvalid, hi = s->pt.valid ? s->n_jvalid : s->n_jnodes;
  int first = 1; /* the next member is its object's first: no comma */
  for (int i = lo; i < hi; i++) {
    const jnode *nd = &s->jnodes[i];
    if (nd->t == 1) {
      put_char(s, '}');
      first = 0;
      continue;
    }
    if (!(m & (1ULL << nd->group))) {
      if (nd->t == 0) i = nd->skip;
      continue;
    }
    if (!first) put_char(s, ',');
    put(s, nd->text, nd->len);
    first = nd->t == 0;
    if (nd->t != 2) continue;
    if (!put_value(s, ENC_JSON, nd->col, -1, err_text)) return 0;
  }
  put_char(s, '\n');
  return 1;
}

/* Append point s->pt's YAML list item (the valid or the invalid node program): an object's
 * key line ends once its first member is written (" {}" when none is); 0 (item partly
 * written) when a number is not finite. */
static int add_doc(lsweep *s, unsigned long long m, const char *err_text) {
  int lo = s->pt.valid ? 0 : s->n_yvalid, hi = s->pt.valid ? s->n_yvalid : s->n_ynodes;
  int written[64], depth = 0; /* per open object: a member was written */
  for (int i = lo; i < hi; i++) {
    const jnode *nd = &s->ynodes[i];
    if (nd->t == 1) {
      if (depth > 0 && !written[--depth]) put(s, " {}\n", 4);
      continue;
    }
    if (!(m & (1ULL << nd->group))) {
      if (nd->t == 0) i = nd->skip;
      continue;
    }
    if (depth > 0 && !written[depth - 1]) {
      put_char(s, '\n');
      written[depth - 1] = 1;
    }
    put(s, nd->text, nd->len);
    if (nd->t == 0) {
      if (depth < 64) written[depth++] = 0;
      continue;
    }
    if (nd->t != 2) continue;
    put_char(s, ' ');
    if (!put_value(s, ENC_YAML, nd->col, nd->unit, err_text)) return 0;
    put_char(s, '\n');
  }
  return 1;
}

/* Rows (CSV) or lines (JSON Lines: `json`) of points first..last (arguments 2, 3; err_of
 * at 4) into s->out. `stop`: a CSV point whose record has a group of columns the header
 * lacks (not in s->seen) ends the chunk before its row; returns that point (1-based), 0
 * when every row was made. */
static long long fill_rows(lua_State *L, lsweep *s, int format, int stop) {
  int (*add)(lsweep *, unsigned long long, const char *) =
      format == OUT_YAML ? add_doc : format == OUT_JSONL ? add_line : add_row;
  if (format == OUT_JSONL && !s->jnodes) luaL_error(L, "sweep:lines: no JSON program");
  if (format == OUT_YAML && !s->ynodes) luaL_error(L, "sweep:lines: no YAML program");
  if (!s->cols) luaL_error(L, "sweep:rows: no program");
  s->L = L;
  long long first, last;
  point_range(L, s, &first, &last);
  luaL_checktype(L, 4, LUA_TFUNCTION);
  s->out_len = 0;
  s->out_failed = 0;
  for (long long i = first; i <= last; i++) {
    fth_sweep_point_eval(&s->def, i - 1, &s->pt);
    size_t start = s->out_len;
    if (s->pt.valid && !add(s, fth_sweep_mask(&s->pt), NULL)) {
      /* a number not finite: the Lua path refuses the result (errors.check_finite) */
      s->out_len = start;
      s->pt.valid = 0;
      fth_error_clear(&s->pt.err);
    }
    unsigned long long m = fth_sweep_mask(&s->pt);
    if (stop && (m & ~s->seen)) {
      s->out_len = start;
      s->fresh = m & ~s->seen;
      return i;
    }
    if (!s->pt.valid) {
      error_text(L, s, i);
      add(s, m, lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    if (s->out_failed) luaL_error(L, "sweep:rows: out of memory");
  }
  return 0;
}

static const char *const LINE_FORMATS[] = {"jsonl", "yaml", NULL};

static int push_rows(lua_State *L, int format) {
  lsweep *s = check_sweep(L, 1);
  fill_rows(L, s, format, 0);
  lua_pushlstring(L, s->out ? s->out : "", s->out_len);
  return 1;
}

static int sweep_rows(lua_State *L) {
  return push_rows(L, OUT_CSV);
}
/* sweep:lines(first, last, err_of [, "jsonl" | "yaml"]) */
static int sweep_lines(lua_State *L) {
  return push_rows(L, OUT_JSONL + luaL_checkoption(L, 5, "jsonl", LINE_FORMATS));
}

/* sweep:write_rows(first, last, err_of, file) -> true, or false, point, groups when a
 * point's record has columns the header lacks (the rows before it are written; see
 * sweep:widen), or nil, message: the rows written to an open io file straight from the
 * chunk's buffer (no Lua string of the chunk). sweep:write_lines(first, last, err_of, file
 * [, "jsonl" | "yaml"]): the same in JSON Lines or YAML (which have no header: true or nil,
 * message). */
static int write_to(lua_State *L, int format) {
  lsweep *s = check_sweep(L, 1);
  luaL_Stream *f = (luaL_Stream *)luaL_checkudata(L, 5, LUA_FILEHANDLE);
  if (f->closef == NULL) return luaL_error(L, "sweep:write_rows: the file is closed");
  long long at = fill_rows(L, s, format, format == OUT_CSV);
  if (s->out_len > 0 && fwrite(s->out, 1, s->out_len, f->f) != s->out_len)
    return luaL_fileresult(L, 0, NULL);
  if (at) {
    lua_pushboolean(L, 0);
    lua_pushinteger(L, (lua_Integer)at);
    lua_pushinteger(L, (lua_Integer)s->fresh);
    return 3;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int sweep_write_rows(lua_State *L) {
  return write_to(L, OUT_CSV);
}
static int sweep_write_lines(lua_State *L) {
  return write_to(L, OUT_JSONL + luaL_checkoption(L, 6, "jsonl", LINE_FORMATS));
}

/* sweep:widen(from, to, added [, header]) -> true or nil, message: the CSV written so far
 * (an io file open for reading) copied to `to` under a wider header: its first line
 * replaced by `header` (newline included; without it, `from` has no header line: a part
 * a worker wrote; added 0 copies it) and `added` empty cells put at the end of
 * every row (a group of columns met after the header was written: its columns come last,
 * as fathom.format.csv's union puts them, and the rows before had none of them). A
 * newline inside a quoted cell is not a row's end. */
/* Copy the rest of `in` (nothing read from it yet) to the end of `out` in the kernel
 * (copy_file_range): 1 done, 0 not possible here (nothing copied: copy it by hand),
 * -1 failed part way. */
static int copy_in_kernel(FILE *in, FILE *out) {
#if defined(__linux__)
  if (fflush(out) != 0) return -1;
  ssize_t n;
  int any = 0;
  while ((n = copy_file_range(fileno(in), NULL, fileno(out), NULL, (size_t)1 << 30, 0)) > 0)
    any = 1;
  if (n == 0) return 1;
  return any ? -1 : 0;
#else
  (void)in;
  (void)out;
  return 0;
#endif
}

static int sweep_widen(lua_State *L) {
  check_sweep(L, 1);
  luaL_Stream *in = (luaL_Stream *)luaL_checkudata(L, 2, LUA_FILEHANDLE);
  luaL_Stream *out = (luaL_Stream *)luaL_checkudata(L, 3, LUA_FILEHANDLE);
  lua_Integer added = luaL_checkinteger(L, 4);
  size_t hlen = 0;
  const char *header = luaL_optlstring(L, 5, NULL, &hlen);
  luaL_argcheck(L, added >= 0 && added < 1 << 20, 4, "out of range");
  if (in->closef == NULL || out->closef == NULL)
    return luaL_error(L, "sweep:widen: a file is closed");
  if (added == 0 && !header) { /* a plain copy (a part joined as it is) */
    int k = copy_in_kernel(in->f, out->f);
    if (k < 0) return luaL_fileresult(L, 0, NULL);
    if (k > 0) {
      lua_pushboolean(L, 1);
      return 1;
    }
  }
  char buf[1 << 16], commas[256];
  memset(commas, ',', sizeof commas);
  int quoted = 0, in_header = header != NULL,
      ok = !header || fwrite(header, 1, hlen, out->f) == hlen;
  size_t n;
  while (ok && (n = fread(buf, 1, sizeof buf, in->f)) > 0) {
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
      /* to the next newline; the quotes before it flip `quoted` (memchr: no byte loop) */
      const char *nl = (const char *)memchr(buf + i, '\n', n - i);
      size_t end = nl ? (size_t)(nl - buf) : n;
      for (const char *q = (const char *)memchr(buf + i, '"', end - i); q;
           q = (const char *)memchr(q + 1, '"', (size_t)(buf + end - q - 1)))
        quoted = !quoted;
      i = end;
      if (!nl || quoted) continue;
      if (!in_header) {
        ok = ok && fwrite(buf + from, 1, i - from, out->f) == i - from;
        for (lua_Integer left = added; ok && left > 0; left -= (lua_Integer)sizeof commas) {
          size_t k = left < (lua_Integer)sizeof commas ? (size_t)left : sizeof commas;
          ok = fwrite(commas, 1, k, out->f) == k;
        }
        from = i;
      } else {
        from = i + 1;
      }
      in_header = 0;
    }
    if (!in_header) ok = ok && fwrite(buf + from, 1, n - from, out->f) == n - from;
  }
  if (!ok || ferror(in->f)) return luaL_fileresult(L, 0, NULL);
  lua_pushboolean(L, 1);
  return 1;
}

/* sweep:reproject(from, to, map) -> true or nil, message: CSV rows without a header (a
 * worker's part) copied to `to` with their cells rearranged: output cell j is input cell
 * map[j] (0-based), empty where map[j] is -1. Cells are split at commas outside quotes. */
static int sweep_reproject(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  luaL_Stream *in = (luaL_Stream *)luaL_checkudata(L, 2, LUA_FILEHANDLE);
  luaL_Stream *out = (luaL_Stream *)luaL_checkudata(L, 3, LUA_FILEHANDLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  if (in->closef == NULL || out->closef == NULL)
    return luaL_error(L, "sweep:reproject: a file is closed");
  int n_map = (int)lua_rawlen(L, 4), max_cells = s->n_cols + 1;
  int *map = (int *)lua_newuserdatauv(L, sizeof(int) * (size_t)(n_map + 1), 0);
  size_t *cell = (size_t *)lua_newuserdatauv(L, sizeof(size_t) * (size_t)(max_cells + 1), 0);
  for (int j = 0; j < n_map; j++) {
    lua_rawgeti(L, 4, j + 1);
    map[j] = (int)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
    luaL_argcheck(L, map[j] >= -1 && map[j] < max_cells, 4, "no such cell");
  }
  /* one row at a time in s->out (the chunk's buffer, free between chunks) */
  char buf[1 << 16];
  size_t n;
  int quoted = 0, ok = 1;
  s->out_len = 0;
  s->out_failed = 0;
  while (ok && (n = fread(buf, 1, sizeof buf, in->f)) > 0) {
    for (size_t i = 0; ok && i < n;) {
      const char *nl = (const char *)memchr(buf + i, '\n', n - i);
      size_t end = nl ? (size_t)(nl - buf) : n;
      for (const char *q = (const char *)memchr(buf + i, '"', end - i); q;
           q = (const char *)memchr(q + 1, '"', (size_t)(buf + end - q - 1)))
        quoted = !quoted;
      put(s, buf + i, end - i);
      if (s->out_failed) return luaL_error(L, "sweep:reproject: out of memory");
      if (!nl) break;
      i = end + 1;
      if (quoted) {
        put_char(s, '\n');
        continue;
      }
      /* a whole row in s->out: its cells' starts (cell[k]) and the end (cell[nc] - 1) */
      int nc = 0, in_q = 0;
      cell[nc++] = 0;
      for (size_t k = 0; k < s->out_len; k++) {
        if (s->out[k] == '"')
          in_q = !in_q;
        else if (s->out[k] == ',' && !in_q) {
          if (nc == max_cells)
            return luaL_error(L, "sweep:reproject: a row has more cells than the program");
          cell[nc++] = k + 1;
        }
      }
      cell[nc] = s->out_len + 1;
      for (int j = 0; ok && j < n_map; j++) {
        if (j > 0) ok = fputc(',', out->f) != EOF;
        int c = map[j];
        if (c < 0 || c >= nc) continue;
        size_t len = cell[c + 1] - 1 - cell[c];
        ok = ok && fwrite(s->out + cell[c], 1, len, out->f) == len;
      }
      ok = ok && fputc('\n', out->f) != EOF;
      s->out_len = 0;
    }
  }
  if (!ok || ferror(in->f)) return luaL_fileresult(L, 0, NULL);
  lua_pushboolean(L, 1);
  return 1;
}

/* sweep:mask(point) -> the presence groups of the point's record (1-based point) */
static int sweep_mask(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  long long n = fth_sweep_count(&s->def), i = (long long)luaL_checkinteger(L, 2);
  luaL_argcheck(L, i >= 1 && i <= n, 2, "point out of range");
  if (!s->cols) return luaL_error(L, "sweep:mask: no program");
  lua_pushinteger(L, (lua_Integer)eval_point(s, i - 1));
  return 1;
}

/* sweep:see(groups): the header has these groups' columns too */
static int sweep_see(lua_State *L) {
  lsweep *s = check_sweep(L, 1);
  s->seen |= (unsigned long long)luaL_checkinteger(L, 2);
  return 0;
}

static const luaL_Reg sweep_methods[] = {{"count", sweep_count},
                                         {"scan", sweep_scan},
                                         {"program", sweep_program},
                                         {"widen", sweep_widen},
                                         {"reproject", sweep_reproject},
                                         {"mask", sweep_mask},
                                         {"see", sweep_see},
                                         {"reset", sweep_reset},
                                         {"first_valid", sweep_first_valid},
                                         {"set_order", sweep_set_order},
                                         {"rows", sweep_rows},
                                         {"write_rows", sweep_write_rows},
                                         {"json_program", sweep_json_program},
                                         {"yaml_program", sweep_yaml_program},
                                         {"lines", sweep_lines},
                                         {"write_lines", sweep_write_lines},
                                         {NULL, NULL}};

static const luaL_Reg sweep_meta[] = {{"__gc", sweep_gc}, {NULL, NULL}};

static const luaL_Reg sweep_funcs[] = {{"sweep_new", core_sweep_new}, {NULL, NULL}};

void lfth_open_sweep(lua_State *L) {
  lbind_newclass(L, SWEEP, sweep_meta, sweep_methods);
  lbind_setfuncs(L, sweep_funcs);
}
