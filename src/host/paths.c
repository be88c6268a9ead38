/* paths.c: executable directory and directory checks (POSIX). As in rxi/lite,
 * the binary locates its Lua files relative to itself. */
#define _POSIX_C_SOURCE 200809L
#include "paths.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dirname_into(const char *path, char *out, size_t size) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) {
    if (size < 2) return -1;
    strcpy(out, ".");
    return 0;
  }
  size_t n = (size_t)(slash - path);
  if (n == 0) n = 1; /* "/fathom" -> "/" */
  if (n + 1 > size) return -1;
  memcpy(out, path, n);
  out[n] = '\0';
  return 0;
}

int fth_exe_dir(const char *argv0, char *out, size_t size) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    return dirname_into(buf, out, size);
  }
  if (argv0 != NULL && strchr(argv0, '/') != NULL) return dirname_into(argv0, out, size);
  return -1;
}

int fth_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
