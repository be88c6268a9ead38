#include "fth_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void fth_error_clear(fth_error *err) {
  if (err == NULL) return;
  err->status = FTH_OK;
  err->path[0] = '\0';
  err->msg[0] = '\0';
}

fth_status fth_fail(fth_error *err, fth_status status, const char *path, const char *fmt, ...) {
  if (err == NULL) return status;
  err->status = status;
  snprintf(err->path, sizeof err->path, "%s", path ? path : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return status;
}

fth_status fth_error_prefix(fth_error *err, const char *prefix) {
  if (err == NULL) return FTH_EINVAL;
  /* Built in a larger buffer, then truncated into the record: paths are short in practice. */
  char tmp[2 * FTH_ERROR_PATH_MAX + 2];
  if (err->path[0] != '\0')
    snprintf(tmp, sizeof tmp, "%s.%s", prefix, err->path);
  else
    snprintf(tmp, sizeof tmp, "%s", prefix);
  size_t n = strlen(tmp);
  if (n >= sizeof err->path) n = sizeof err->path - 1;
  memcpy(err->path, tmp, n);
  err->path[n] = '\0';
  return err->status;
}

int fth_positive(double x) {
  return isfinite(x) && x > 0.0;
}

const char *fth_bit_name(const char *const *names, int n, unsigned bit) {
  for (int i = 0; i < n; i++)
    if (bit == (1u << i)) return names[i];
  return NULL;
}

unsigned fth_bit_parse(const char *const *names, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(name, names[i]) == 0) return 1u << i;
  return 0u;
}
