/* fth_unit_text: readable quantities (fathom.units), by hand.
 *
 * Four significant digits (%.4g) of x over the largest prefix not above |x|:
 *   time: 5.531e-4 s is below 1e-3 and at least 1e-6: 553.1 us; 0.0125 s: 12.5 ms;
 *     0 is "0 s" (a == 0 takes seconds); 59.99 s stays seconds, 60 s is "1 min";
 *     172,799 s (just under two days) is 48 h to four digits; 172,800 s is "2 days";
 *     8.674e-19 s is below 1e-6: x 1e9 = 8.674e-10 ns (no smaller prefix);
 *   bytes (binary): 1.5 x 2^30 = "1.5 GiB"; 1023 B stays bytes; 1024 B is "1 KiB";
 *     -1.5 GiB keeps its sign (|x| picks the prefix);
 *   flops (SI): 3.2e15 is "3.2 PFLOP"; 0.5 is below every prefix: the last, "0.5 FLOP";
 *     27.2e12 FLOP/s is "27.2 TFLOP/s"; 4.5e11 B/s is "450 GB/s"; 1234 is "1.234 k";
 *   percent: 0.4793 is "47.93%" (%.2f of 100 x); 1 is "100.00%";
 *   NaN is "nan" and +inf "inf" in every unit but percent (%.2f writes them); -inf takes
 *     the first prefix: "-inf days", "-inf PiB". */
#include <math.h>
#include <string.h>

#include "fth_numtext.h"
#include "test_macros.h"

static int is(fth_unit u, double x, const char *want) {
  char buf[FTH_UNIT_TEXT_CAP];
  int n = fth_unit_text(buf, u, x);
  if (n != (int)strlen(want) || strcmp(buf, want) != 0) {
    fprintf(stderr, "fth_unit_text(%d, %.17g): \"%s\", expected \"%s\"\n", (int)u, x, buf, want);
    return 0;
  }
  return 1;
}

int unittext_test(void) {
  FTH_ENSURE(is(FTH_UNIT_TIME, 5.531e-4, "553.1 us"));
  FTH_ENSURE(is(FTH_UNIT_TIME, 0.0125, "12.5 ms"));
  FTH_ENSURE(is(FTH_UNIT_TIME, 0, "0 s"));
  FTH_ENSURE(is(FTH_UNIT_TIME, 59.99, "59.99 s"));
  FTH_ENSURE(is(FTH_UNIT_TIME, 60, "1 min"));
  FTH_ENSURE(is(FTH_UNIT_TIME, 172799, "48 h"));
  FTH_ENSURE(is(FTH_UNIT_TIME, 172800, "2 days"));
  FTH_ENSURE(is(FTH_UNIT_TIME, 8.674e-19, "8.674e-10 ns"));
  FTH_ENSURE(is(FTH_UNIT_BYTES, 1.5 * 1073741824.0, "1.5 GiB"));
  FTH_ENSURE(is(FTH_UNIT_BYTES, 1023, "1023 B"));
  FTH_ENSURE(is(FTH_UNIT_BYTES, 1024, "1 KiB"));
  FTH_ENSURE(is(FTH_UNIT_BYTES, -1.5 * 1073741824.0, "-1.5 GiB"));
  FTH_ENSURE(is(FTH_UNIT_FLOPS, 3.2e15, "3.2 PFLOP"));
  FTH_ENSURE(is(FTH_UNIT_FLOPS, 0.5, "0.5 FLOP"));
  FTH_ENSURE(is(FTH_UNIT_FLOPS_RATE, 27.2e12, "27.2 TFLOP/s"));
  FTH_ENSURE(is(FTH_UNIT_BANDWIDTH, 4.5e11, "450 GB/s"));
  FTH_ENSURE(is(FTH_UNIT_SI, 1234, "1.234 k"));
  FTH_ENSURE(is(FTH_UNIT_PERCENT, 0.4793, "47.93%"));
  FTH_ENSURE(is(FTH_UNIT_PERCENT, 1, "100.00%"));
  FTH_ENSURE(is(FTH_UNIT_TIME, NAN, "nan"));
  FTH_ENSURE(is(FTH_UNIT_BYTES, NAN, "nan"));
  FTH_ENSURE(is(FTH_UNIT_FLOPS, INFINITY, "inf"));
  FTH_ENSURE(is(FTH_UNIT_TIME, -INFINITY, "-inf days"));
  FTH_ENSURE(is(FTH_UNIT_BYTES, -INFINITY, "-inf PiB"));
  return 0;
}
