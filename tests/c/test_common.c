#include "fth_common.h"
#include "test_macros.h"

#include <string.h>

int common_test(void) {
  fth_error err;
  fth_error_clear(&err);
  FTH_ENSURE(err.status == FTH_OK && err.path[0] == '\0');
  FTH_ENSURE(fth_fail(&err, FTH_EINVAL, "size", "must be > 0, got %d", -1) == FTH_EINVAL);
  FTH_ENSURE(strcmp(err.msg, "must be > 0, got -1") == 0);
  fth_error_prefix(&err, "dimensions[2]");
  FTH_ENSURE(strcmp(err.path, "dimensions[2].size") == 0);
  FTH_ENSURE(fth_fail(NULL, FTH_ERANGE, "x", "y") == FTH_ERANGE);
  /* ceil_div: 7/2 -> 4, 8/2 -> 4 by hand. */
  FTH_ENSURE_NEAR(4.0, fth_ceil_div(7.0, 2.0), 0.0);
  FTH_ENSURE_NEAR(4.0, fth_ceil_div(8.0, 2.0), 0.0);
  FTH_ENSURE(fth_positive(1e-9) && !fth_positive(0.0) && !fth_positive(-1.0));
  return 0;
}
