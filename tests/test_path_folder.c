/* test_path_folder.c - the folder of a file name (common/path.h): a bare
 * name, the root, nested folders, and a name too long for the buffer. */
#include <string.h>

#include "path.h"
#include "testutil.h"

static void folders_of_names(void **state) {
  (void)state;
  static const struct {
    const char *path, *dir;
  } cases[] = {{"a.db", "."}, {"/a.db", "/"}, {"x/a.db", "x"}, {"/x/y/a.db", "/x/y"}, {"x/", "x"}, {"./a.db", "."}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char dir[64];
    assert_int_equal(st_path_folder(cases[i].path, dir, sizeof dir), 0);
    assert_string_equal(dir, cases[i].dir);
  }
}

static void a_name_too_long_is_refused(void **state) {
  (void)state;
  char dir[8];
  assert_int_equal(st_path_folder("/abc/defgh.db", dir, sizeof dir), -1);
  assert_string_equal(dir, "");
  assert_int_equal(st_path_folder("a.db", dir, 1), -1);
  assert_string_equal(dir, "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(folders_of_names),
      cmocka_unit_test(a_name_too_long_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
