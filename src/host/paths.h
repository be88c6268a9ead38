/* paths.h: where the host finds its Lua library and data. */
#ifndef FTH_PATHS_H
#define FTH_PATHS_H

#include <stddef.h>

/// Directory holding the running executable (from /proc/self/exe on Linux,
/// falling back to argv0's directory). Writes at most `size` bytes; returns 0
/// on success, -1 when neither source works.
int fth_exe_dir(const char *argv0, char *out, size_t size);

/// Is `path` an existing directory?
int fth_is_dir(const char *path);

#endif
