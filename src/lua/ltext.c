/* ltext.c: the text of values, one owner for Lua and C writers alike.
 *   core.unit_text(unit, x) -> x readable in `unit` (fth_unit_text; fathom.units)
 *   core.yaml_string(s) -> s as a YAML scalar: plain, or double-quoted where a reader
 *       would take it for something else (fathom.format.yaml writes every string so;
 *       the C sweep writer uses ltext_yaml_string for its names, readable numbers and
 *       error texts)
 * A string is quoted when it is empty, a YAML 1.1 boolean or null word, a number
 * (Lua's tonumber), starts like a number without a leading digit (".5", "-.5", "0x",
 * "0o"), starts with an indicator or white space, ends with white space, holds ": ",
 * " #" or ends in ":", or holds a control character or a byte >= 0x80. Quoted text
 * escapes ", \ and ASCII controls (\n \t \r, else \xNN); in valid UTF-8 the C1 controls
 * (U+0080..U+009F as \xNN), U+2028 (\L), U+2029 (\P) and the BOM (\uFEFF); text that is
 * not UTF-8 (Lua's utf8.len: no overlong forms, surrogates or code points above
 * U+10FFFF) has every byte >= 0x80 as \xNN. A YAML reader takes each back unchanged. */
#include <string.h>

#include "fth_numtext.h"
#include "lfathom.h"

const char *const ltext_unit_names[] = {"time", "bytes", "flops", "flops_rate", "bandwidth", "count", "percent",
                                        NULL};

static int core_unit_text(lua_State *L) {
  int u = luaL_checkoption(L, 1, NULL, ltext_unit_names);
  double x = luaL_checknumber(L, 2);
  char buf[FTH_UNIT_TEXT_CAP];
  int n = fth_unit_text(buf, (fth_unit)u, x);
  lua_pushlstring(L, buf, (size_t)n);
  return 1;
}

static const char *const PLAIN_BAD[] = {"true", "false", "True", "False", "TRUE", "FALSE", "null", "Null", "NULL",
                                        "~",    "yes",   "no",   "on",    "off",   "y",     "n",    NULL};

static int is_space(unsigned char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

static int is_control(unsigned char c) {
  return c < 32 || c == 127;
}

/* Lua's tonumber(s) is not nil: only strings of number characters are asked */
static int is_number(lua_State *L, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (!strchr("0123456789abcdefABCDEFxXpP+-. \t\n\v\f\r", s[i]) || s[i] == '\0') return 0;
  /* s is NUL-terminated (every caller's text is), no NUL inside: the whole string is read */
  if (lua_stringtonumber(L, s) != len + 1) return 0;
  lua_pop(L, 1);
  return 1;
}

int ltext_yaml_plain(lua_State *L, const char *s, size_t len) {
  if (len == 0) return 0;
  for (int i = 0; PLAIN_BAD[i]; i++)
    if (strlen(PLAIN_BAD[i]) == len && memcmp(PLAIN_BAD[i], s, len) == 0) return 0;
  const unsigned char *u = (const unsigned char *)s;
  /* [-+]?%. and 0x, 0o */
  size_t sign = (u[0] == '-' || u[0] == '+') ? 1 : 0;
  if (len > sign && u[sign] == '.') return 0;
  if (len >= 2 && u[0] == '0' && (u[1] == 'x' || u[1] == 'o')) return 0;
  if (is_space(u[0]) || strchr("-?:,[]{}#&*!|>'\"%@`", u[0]) || is_space(u[len - 1])) return 0;
  if (u[len - 1] == ':') return 0;
  for (size_t i = 0; i < len; i++) {
    if (is_control(u[i]) || u[i] >= 0x80) return 0;
    if (i + 1 < len && ((u[i] == ':' && u[i + 1] == ' ') || (u[i] == ' ' && u[i + 1] == '#'))) return 0;
  }
  return !is_number(L, s, len);
}

/* Length of the strict UTF-8 sequence at s[0..left) (1..4), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t left) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (n == 0 || n > left || c >= 0xF8) return 0;
  unsigned long cp = c & (0x7Fu >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3Fu);
  }
  static const unsigned long least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

size_t ltext_yaml_quote(const char *s, size_t len, char *out) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)s;
  int utf8 = 1;
  for (size_t i = 0; i < len && utf8;) {
    size_t n = utf8_seq(u + i, len - i);
    if (n == 0) utf8 = 0;
    i += n;
  }
  size_t o = 0;
  out[o++] = '"';
  for (size_t i = 0; i < len; i++) {
    unsigned char c = u[i];
    const char *esc = NULL;
    int byte = -1; /* written as \xNN */
    if (c == '"')
      esc = "\\\"";
    else if (c == '\\')
      esc = "\\\\";
    else if (c == '\n')
      esc = "\\n";
    else if (c == '\t')
      esc = "\\t";
    else if (c == '\r')
      esc = "\\r";
    else if (is_control(c))
      byte = c;
    else if (c >= 0x80 && !utf8)
      byte = c;
    else if (c == 0xC2 && i + 1 < len && u[i + 1] >= 0x80 && u[i + 1] <= 0x9F)
      byte = u[++i];
    else if (c == 0xE2 && i + 2 < len && u[i + 1] == 0x80 && (u[i + 2] == 0xA8 || u[i + 2] == 0xA9)) {
      esc = u[i + 2] == 0xA8 ? "\\L" : "\\P";
      i += 2;
    } else if (c == 0xEF && i + 2 < len && u[i + 1] == 0xBB && u[i + 2] == 0xBF) {
      esc = "\\uFEFF";
      i += 2;
    }
    if (esc) {
      size_t n = strlen(esc);
      memcpy(out + o, esc, n);
      o += n;
    } else if (byte >= 0) {
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hex[byte >> 4];
      out[o++] = hex[byte & 15];
    } else {
      out[o++] = (char)c;
    }
  }
  out[o++] = '"';
  return o;
}

static int core_yaml_string(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  if (ltext_yaml_plain(L, s, len)) {
    lua_settop(L, 1);
    return 1;
  }
  luaL_Buffer b;
  char *out = luaL_buffinitsize(L, &b, LTEXT_YAML_QUOTED_CAP(len));
  luaL_pushresultsize(&b, ltext_yaml_quote(s, len, out));
  return 1;
}

static const luaL_Reg text_funcs[] = {{"unit_text", core_unit_text}, {"yaml_string", core_yaml_string}, {NULL, NULL}};

void lfth_open_text(lua_State *L) {
  lbind_setfuncs(L, text_funcs);
}
