/* lyaml.c: YAML to Lua tables on libyaml, keeping where every key and value
 * came from. Bounded: file size, nesting depth and alias-expanded node count
 * are capped so a hostile file cannot exhaust memory (the "billion laughs"
 * alias bomb); duplicate keys and multi-document streams are refused.
 *
 * (text [, name]) -> value, marks | nil, message
 *   marks[t] = {self = "l:c", key = {k = "l:c"}, val = {k_or_i = "l:c"}} for
 *   every table t of the result (weak keys), positions 1-based.
 * Plain scalars are typed as users expect (YAML 1.2 core schema): null, ~ and
 * empty are null; true/false; decimal, 0x hex and 0o octal integers; floats
 * with or without a dot (1.8e15), .inf and .nan. Quoted scalars stay strings.
 * Mapping keys are always strings. A null mapping value omits the key (its
 * position is still in marks); a null sequence item is core.null. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "lfathom.h"

#define YAML_MAX_BYTES (64L * 1024 * 1024)
#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 2000000L

#define LOADER_META "fathom.YamlLoader"

typedef struct loader {
  yaml_parser_t parser;
  int parser_ready; /* parser needs yaml_parser_delete */
  const char *name;
  const char *text;
  size_t len;
  int marks;         /* absolute stack index of the marks table */
  int anchors;       /* absolute stack index: anchor -> value */
  int anchor_counts; /* absolute stack index: anchor -> expanded node count */
  long nodes;
  int depth;
  char err[512];
} loader;

static int loader_gc(lua_State *L) {
  loader *ld = (loader *)luaL_checkudata(L, 1, LOADER_META);
  if (ld->parser_ready) {
    yaml_parser_delete(&ld->parser);
    ld->parser_ready = 0;
  }
  return 0;
}

static void set_err(loader *ld, const yaml_mark_t *m, const char *what) {
  snprintf(ld->err, sizeof ld->err, "%s:%lu:%lu: %s", ld->name, (unsigned long)m->line + 1,
           (unsigned long)m->column + 1, what);
}

static void set_parser_err(loader *ld) {
  yaml_parser_t *p = &ld->parser;
  const char *problem = p->problem ? p->problem : "invalid YAML";
  char what[400];
  if (p->context != NULL)
    snprintf(what, sizeof what, "%s (%s)", problem, p->context);
  else
    snprintf(what, sizeof what, "%s", problem);
  if (p->error == YAML_READER_ERROR) {
    snprintf(what + strlen(what), sizeof what - strlen(what), " (save the file as UTF-8)");
    /* Encoding errors carry a byte offset, not a mark: count lines up to it. */
    yaml_mark_t m;
    memset(&m, 0, sizeof m);
    for (size_t i = 0; i < p->problem_offset && i < ld->len; i++) {
      if (ld->text[i] == '\n') {
        m.line++;
        m.column = 0;
      } else {
        m.column++;
      }
    }
    set_err(ld, &m, what);
    return;
  }
  set_err(ld, &p->problem_mark, what);
}

static int next_event(loader *ld, yaml_event_t *ev) {
  if (!yaml_parser_parse(&ld->parser, ev)) {
    set_parser_err(ld);
    return -1;
  }
  return 0;
}

static void push_pos(lua_State *L, const yaml_mark_t *m) {
  lua_pushfstring(L, "%d:%d", (int)m->line + 1, (int)m->column + 1);
}

/* Is s (len n) made only of chars from set, and non-empty? */
static int all_of(const char *s, size_t n, const char *set) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (strchr(set, s[i]) == NULL) return 0;
  return 1;
}

static int is_float_text(const char *s, size_t n) {
  size_t i = 0, digits = 0;
  if (i < n && (s[i] == '+' || s[i] == '-')) i++;
  while (i < n && s[i] >= '0' && s[i] <= '9') i++, digits++;
  if (i < n && s[i] == '.') {
    i++;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++, digits++;
  }
  if (digits == 0) return 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t ed = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++, ed++;
    if (ed == 0) return 0;
  }
  return i == n;
}

/* Push a plain scalar with its type; returns 0 when it is null (nothing pushed). */
static int push_plain(lua_State *L, const char *s, size_t n) {
  if (n == 0 || (n == 1 && s[0] == '~') || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
      strcmp(s, "NULL") == 0)
    return 0;
  if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0) {
    lua_pushboolean(L, 0);
    return 1;
  }
  const char *body = s;
  size_t bn = n;
  int neg = 0;
  if (bn > 0 && (body[0] == '-' || body[0] == '+')) {
    neg = body[0] == '-';
    body++, bn--;
  }
  if (bn > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'o')) {
    int base = body[1] == 'x' ? 16 : 8;
    if (all_of(body + 2, bn - 2, base == 16 ? "0123456789abcdefABCDEF" : "01234567")) {
      errno = 0;
      unsigned long long v = strtoull(body + 2, NULL, base);
      if (errno == 0 && v <= (unsigned long long)LUA_MAXINTEGER) {
        lua_pushinteger(L, neg ? -(lua_Integer)v : (lua_Integer)v);
        return 1;
      }
    }
  }
  if (all_of(body, bn, "0123456789")) {
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == 0) {
      lua_pushinteger(L, (lua_Integer)v);
      return 1;
    }
    lua_pushnumber(L, strtod(s, NULL)); /* too big for an integer: keep magnitude */
    return 1;
  }
  if (is_float_text(s, n)) {
    lua_pushnumber(L, strtod(s, NULL));
    return 1;
  }
  if (strcmp(body, ".inf") == 0 || strcmp(body, ".Inf") == 0 || strcmp(body, ".INF") == 0) {
    lua_pushnumber(L, neg ? -HUGE_VAL : HUGE_VAL);
    return 1;
  }
  if (strcmp(s, ".nan") == 0 || strcmp(s, ".NaN") == 0 || strcmp(s, ".NAN") == 0) {
    lua_pushnumber(L, nan(""));
    return 1;
  }
  lua_pushlstring(L, s, n);
  return 1;
}

static long parse_node(lua_State *L, loader *ld, yaml_event_t *ev);

/* marks[t] = {self=pos, key={}, val={}}; leaves the entry on the stack. */
static void new_mark_entry(lua_State *L, loader *ld, int t, const yaml_mark_t *m) {
  lua_createtable(L, 0, 3); /* entry */
  push_pos(L, m);
  lua_setfield(L, -2, "self");
  lua_newtable(L);
  lua_setfield(L, -2, "key");
  lua_newtable(L);
  lua_setfield(L, -2, "val");
  lua_pushvalue(L, t);
  lua_pushvalue(L, -2);     /* entry t entry */
  lua_rawset(L, ld->marks); /* entry */
}

static int enter(loader *ld, const yaml_mark_t *m) {
  if (++ld->depth > YAML_MAX_DEPTH) {
    char what[96];
    snprintf(what, sizeof what, "document nests deeper than %d levels (flatten the structure)",
             YAML_MAX_DEPTH);
    set_err(ld, m, what);
    return -1;
  }
  return 0;
}

static int count_node(loader *ld, long n, const yaml_mark_t *m) {
  ld->nodes += n;
  if (ld->nodes > YAML_MAX_NODES) {
    char what[128];
    snprintf(what, sizeof what,
             "document expands to more than %ld nodes (aliases nested too deeply?)",
             YAML_MAX_NODES);
    set_err(ld, m, what);
    return -1;
  }
  return 0;
}

/* Apply "<<" merges: value at `src` (mapping or list of mappings) fills keys
 * absent from the table at `t`. */
static int apply_merge(lua_State *L, loader *ld, int t, int src, const yaml_mark_t *m) {
  src = lua_absindex(L, src);
  if (lua_type(L, src) != LUA_TTABLE) {
    set_err(ld, m, "merge key '<<' needs a mapping or a list of mappings");
    return -1;
  }
  lua_Integer len = (lua_Integer)lua_rawlen(L, src);
  int list = len > 0;
  for (lua_Integer i = list ? len : 1; i >= 1; i--) { /* later maps lose to earlier ones */
    if (list)
      lua_rawgeti(L, src, i);
    else
      lua_pushvalue(L, src); /* map */
    if (lua_type(L, -1) != LUA_TTABLE) {
      set_err(ld, m, "merge key '<<' needs a mapping or a list of mappings");
      return -1;
    }
    lua_pushnil(L);
    while (lua_next(L, -2)) { /* map k v */
      lua_pushvalue(L, -2);
      lua_rawget(L, t); /* map k v existing */
      int absent = lua_isnil(L, -1);
      lua_pop(L, 1);
      if (absent) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2); /* map k k v */
        lua_rawset(L, t);  /* map k */
      } else {
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  return 0;
}

static long parse_mapping(lua_State *L, loader *ld, yaml_event_t *start) {
  yaml_mark_t m0 = start->start_mark;
  if (enter(ld, &m0) < 0) return -1;
  lua_newtable(L); /* t */
  int t = lua_gettop(L);
  new_mark_entry(L, ld, t, &m0); /* t entry */
  int entry = lua_gettop(L);
  lua_getfield(L, entry, "key");
  lua_getfield(L, entry, "val"); /* t entry keys vals */
  int keys = entry + 1, vals = entry + 2;
  lua_newtable(L); /* t entry keys vals merges */
  int merges = lua_gettop(L), nmerges = 0;
  long count = 1;
  for (;;) {
    yaml_event_t kev;
    if (next_event(ld, &kev) < 0) return -1;
    if (kev.type == YAML_MAPPING_END_EVENT) {
      yaml_event_delete(&kev);
      break;
    }
    if (kev.type != YAML_SCALAR_EVENT) {
      set_err(ld, &kev.start_mark, "mapping keys must be plain scalars");
      yaml_event_delete(&kev);
      return -1;
    }
    yaml_mark_t km = kev.start_mark;
    lua_pushlstring(L, (const char *)kev.data.scalar.value, kev.data.scalar.length);
    int is_merge = kev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                   strcmp((const char *)kev.data.scalar.value, "<<") == 0;
    yaml_event_delete(&kev);
    int key = lua_gettop(L); /* ... key */
    if (!is_merge) {
      lua_pushvalue(L, key);
      if (lua_rawget(L, keys) != LUA_TNIL) { /* ... key prevpos */
        char what[300];
        snprintf(what, sizeof what, "duplicate key '%s' (first defined at %s; keep one)",
                 lua_tostring(L, key), lua_tostring(L, -1));
        set_err(ld, &km, what);
        return -1;
      }
      lua_pop(L, 1);
      lua_pushvalue(L, key);
      push_pos(L, &km);
      lua_rawset(L, keys);
    }
    yaml_event_t vev;
    if (next_event(ld, &vev) < 0) return -1;
    yaml_mark_t vm = vev.start_mark;
    long n = parse_node(L, ld, &vev); /* ... key value|nothing */
    if (n < 0) return -1;
    count += n;
    int has_value = lua_gettop(L) > key;
    if (is_merge) {
      if (!has_value) {
        set_err(ld, &vm, "merge key '<<' needs a mapping or a list of mappings");
        return -1;
      }
      lua_rawseti(L, merges, ++nmerges); /* ... key */
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, key);
    push_pos(L, &vm);
    lua_rawset(L, vals);
    if (has_value)
      lua_rawset(L, t); /* ... */
    else
      lua_pop(L, 1);
  }
  for (int i = 1; i <= nmerges; i++) {
    lua_rawgeti(L, merges, i);
    if (apply_merge(L, ld, t, -1, &m0) < 0) return -1;
    lua_pop(L, 1);
  }
  lua_settop(L, t);
  ld->depth--;
  return count;
}

static long parse_sequence(lua_State *L, loader *ld, yaml_event_t *start) {
  yaml_mark_t m0 = start->start_mark;
  if (enter(ld, &m0) < 0) return -1;
  lua_newtable(L); /* t */
  int t = lua_gettop(L);
  new_mark_entry(L, ld, t, &m0);
  lua_getfield(L, -1, "val"); /* t entry vals */
  int vals = lua_gettop(L);
  long count = 1;
  lua_Integer i = 0;
  for (;;) {
    yaml_event_t ev;
    if (next_event(ld, &ev) < 0) return -1;
    if (ev.type == YAML_SEQUENCE_END_EVENT) {
      yaml_event_delete(&ev);
      break;
    }
    yaml_mark_t vm = ev.start_mark;
    long n = parse_node(L, ld, &ev);
    if (n < 0) return -1;
    count += n;
    if (lua_gettop(L) == vals) lua_pushlightuserdata(L, NULL); /* null item: core.null */
    lua_rawseti(L, t, ++i);
    push_pos(L, &vm);
    lua_rawseti(L, vals, i);
  }
  lua_settop(L, t);
  ld->depth--;
  return count;
}

/* Consumes `ev` (deletes it). Pushes the node's value, or nothing for null.
 * Returns its expanded node count, or -1 with ld->err set. */
static long parse_node(lua_State *L, loader *ld, yaml_event_t *ev) {
  long n = -1;
  int pushed = 0;
  const char *anchor = NULL;
  yaml_mark_t m = ev->start_mark;
  luaL_checkstack(L, 8, "YAML nesting");
  switch (ev->type) {
  case YAML_SCALAR_EVENT: {
    if (ev->data.scalar.anchor) anchor = (const char *)ev->data.scalar.anchor;
    const char *s = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    const char *tag = (const char *)ev->data.scalar.tag;
    if (!plain || (tag != NULL && strcmp(tag, YAML_STR_TAG) == 0)) {
      lua_pushlstring(L, s, len);
      pushed = 1;
    } else {
      pushed = push_plain(L, s, len);
    }
    n = 1;
    break;
  }
  case YAML_ALIAS_EVENT: {
    const char *name = (const char *)ev->data.alias.anchor;
    lua_getfield(L, ld->anchor_counts, name);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      char what[300];
      snprintf(what, sizeof what, "unknown alias '*%s'", name);
      set_err(ld, &m, what);
      break;
    }
    n = (long)lua_tointeger(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, ld->anchors, name);
    if (lua_isnil(L, -1)) lua_pop(L, 1); /* anchored null */
    yaml_event_delete(ev);
    if (count_node(ld, n, &m) < 0) return -1;
    return n;
  }
  case YAML_MAPPING_START_EVENT:
  case YAML_SEQUENCE_START_EVENT: {
    int mapping = ev->type == YAML_MAPPING_START_EVENT;
    yaml_char_t *a = mapping ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
    /* The anchor, whatever its length, lives on the stack below the value until
     * it is recorded (the event's copy is freed with the event). */
    if (a != NULL) lua_pushstring(L, (const char *)a); /* anchor */
    yaml_event_t copy = *ev; /* parse_* reads marks only; delete after */
    n = mapping ? parse_mapping(L, ld, &copy) : parse_sequence(L, ld, &copy);
    yaml_event_delete(ev);
    if (n < 0) return -1;
    if (a != NULL) {                           /* anchor value */
      anchor = lua_tostring(L, -2);
      lua_pushvalue(L, -1);                    /* anchor value value */
      lua_setfield(L, ld->anchors, anchor);    /* anchor value */
      lua_pushinteger(L, n);
      lua_setfield(L, ld->anchor_counts, anchor);
      lua_remove(L, -2);                       /* value */
    }
    return n;
  }
  default:
    set_err(ld, &m, "unexpected YAML event");
    break;
  }
  if (n >= 0 && anchor != NULL) {
    /* Scalars: the anchored value is on top unless it was null (nothing pushed). */
    if (pushed) {
      lua_pushvalue(L, -1);
      lua_setfield(L, ld->anchors, anchor);
    }
    lua_pushinteger(L, n);
    lua_setfield(L, ld->anchor_counts, anchor);
  }
  yaml_event_delete(ev);
  if (n >= 0 && count_node(ld, n, &m) < 0) return -1;
  return n;
}

/* Parse `len` bytes of `text` named `name`; pushes value, marks or nil, msg. */
static int decode(lua_State *L, const char *text, size_t len, const char *name) {
  if ((long)len > YAML_MAX_BYTES) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: file is larger than %d MiB", name, (int)(YAML_MAX_BYTES >> 20));
    return 2;
  }
  int base = lua_gettop(L);
  loader *ld = (loader *)lua_newuserdatauv(L, sizeof(loader), 0); /* ld */
  memset(ld, 0, sizeof *ld);
  luaL_setmetatable(L, LOADER_META);
  ld->name = name;
  ld->text = text;
  ld->len = len;
  if (!yaml_parser_initialize(&ld->parser)) return luaL_error(L, "cannot initialise libyaml");
  ld->parser_ready = 1;
  yaml_parser_set_input_string(&ld->parser, (const unsigned char *)text, len);
  lua_newtable(L); /* ld marks */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  ld->marks = lua_gettop(L);
  lua_newtable(L);
  ld->anchors = lua_gettop(L);
  lua_newtable(L);
  ld->anchor_counts = lua_gettop(L); /* ld marks anchors counts */
  int top = lua_gettop(L);
  int ok = 0, docs = 0;
  for (;;) {
    yaml_event_t ev;
    if (next_event(ld, &ev) < 0) break;
    yaml_event_type_t type = ev.type;
    if (type == YAML_STREAM_END_EVENT) {
      yaml_event_delete(&ev);
      ok = 1;
      break;
    }
    if (type == YAML_DOCUMENT_START_EVENT) {
      if (++docs > 1) {
        set_err(ld, &ev.start_mark,
                "file holds more than one YAML document (split it: one document per file)");
        yaml_event_delete(&ev);
        break;
      }
      yaml_event_delete(&ev);
      continue;
    }
    if (type == YAML_STREAM_START_EVENT || type == YAML_DOCUMENT_END_EVENT) {
      yaml_event_delete(&ev);
      continue;
    }
    if (parse_node(L, ld, &ev) < 0) break;
  }
  if (!ok) {
    lua_settop(L, base);
    lua_pushnil(L);
    lua_pushstring(L, ld->err[0] ? ld->err : "invalid YAML");
    yaml_parser_delete(&ld->parser);
    ld->parser_ready = 0;
    return 2;
  }
  yaml_parser_delete(&ld->parser);
  ld->parser_ready = 0;
  if (lua_gettop(L) == top) lua_pushnil(L); /* empty or null document */
  lua_pushvalue(L, ld->marks);              /* ... value marks */
  return 2;
}

/* (text [, name]) -> value, marks | nil, message */
static int core_yaml_decode(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  const char *name = luaL_optstring(L, 2, "<string>");
  return decode(L, text, len, name);
}

/* (path) -> value, marks | nil, message. Reads at most the size bound. */
static int core_yaml_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: cannot open file (%s)", path, strerror(errno));
    return 2;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  long total = 0;
  int too_big = 0;
  for (;;) {
    char *p = luaL_prepbuffer(&b);
    size_t n = fread(p, 1, LUAL_BUFFERSIZE, f);
    luaL_addsize(&b, n);
    total += (long)n;
    if (total > YAML_MAX_BYTES) {
      too_big = 1;
      break;
    }
    if (n < LUAL_BUFFERSIZE) break;
  }
  int read_err = ferror(f) ? errno : 0;
  fclose(f);
  luaL_pushresult(&b);
  if (too_big) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: file is larger than %d MiB", path, (int)(YAML_MAX_BYTES >> 20));
    return 2;
  }
  if (read_err) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: cannot read file (%s); expected a YAML or JSON file", path,
                    strerror(read_err));
    return 2;
  }
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  return decode(L, text, len, path);
}

static const luaL_Reg yaml_funcs[] = {
    {"yaml_decode", core_yaml_decode}, {"yaml_load", core_yaml_load}, {NULL, NULL}};

static const luaL_Reg loader_meta[] = {{"__gc", loader_gc}, {"__close", loader_gc}, {NULL, NULL}};

void lfth_open_yaml(lua_State *L) {
  luaL_newmetatable(L, LOADER_META);
  luaL_setfuncs(L, loader_meta, 0);
  lua_pop(L, 1);
  lbind_setfuncs(L, yaml_funcs);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
}
