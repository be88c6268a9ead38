/* test_main.c: runs every `int <name>_test(void)` listed in the generated
 * test_list.h (one per tests/c/test_<name>.c). An argument filters by
 * substring of the name, as box2d's test runner does. */
#include <stdio.h>
#include <string.h>

#define FTH_TEST(name) int name##_test(void);
#include "test_list.h"
#undef FTH_TEST

typedef struct test_entry {
  const char *name;
  int (*fn)(void);
} test_entry;

static const test_entry tests[] = {
#define FTH_TEST(name) {#name, name##_test},
#include "test_list.h"
#undef FTH_TEST
};

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int failed = 0, ran = 0;
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    if (filter != NULL && strstr(tests[i].name, filter) == NULL) continue;
    ran++;
    int rc = tests[i].fn();
    printf("%-24s %s\n", tests[i].name, rc == 0 ? "ok" : "FAILED");
    if (rc != 0) failed++;
  }
  printf("%d tests, %d failed\n", ran, failed);
  return failed == 0 && ran > 0 ? 0 : 1;
}
