/* test_disk_cache.c - the disk cache of compiled built-in variants: where
 * it lives, and that only whole, intact binaries come back. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_cache.h"
#include "testutil.h"

static char g_root[256];

static int setup(void **state) {
  (void)state;
  snprintf(g_root, sizeof g_root, "/tmp/st_disk_cache_XXXXXX");
  return mkdtemp(g_root) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
  return system(cmd) == 0 ? 0 : -1;
}

static void the_folder_follows_the_environment(void **state) {
  (void)state;
  char dir[512];
  setenv("SPARSETUNE_CACHE_DIR", "/somewhere/else", 1);
  st_disk_cache_dir(dir, sizeof dir);
  assert_string_equal(dir, "/somewhere/else");
  setenv("SPARSETUNE_CACHE_DIR", "off", 1);
  st_disk_cache_dir(dir, sizeof dir);
  assert_string_equal(dir, "");
  unsetenv("SPARSETUNE_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  st_disk_cache_dir(dir, sizeof dir);
  assert_string_equal(dir, "/xdg/sparsetune");
  setenv("XDG_CACHE_HOME", "relative", 1); /* ignored, as the XDG spec says */
  st_disk_cache_dir(dir, sizeof dir);
  assert_string_equal(dir, "/home/u/.cache/sparsetune");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  st_disk_cache_dir(dir, sizeof dir);
  assert_string_equal(dir, "");
}

static void a_file_is_named_by_source_arch_and_compiler(void **state) {
  (void)state;
  char path[512];
  st_disk_cache_path("/c", "0123abcd", "sm_90a", "nvrtc 13.0 sparsetune 0.2.0", path, sizeof path);
  assert_string_equal(path, "/c/0123abcd.sm_90a.nvrtc-13.0-sparsetune-0.2.0.cubin");
  char small[8];
  st_disk_cache_path("/c", "0123abcd", "sm_90a", "nvrtc 13.0", small, sizeof small);
  assert_string_equal(small, "");
}

/* Files in `dir` whose name contains `part`. */
static int count_files(const char *dir, const char *part) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, part) != NULL;
  closedir(d);
  return n;
}

static void write_then_read(const char *path, const unsigned char *data, size_t size) {
  assert_int_equal(st_disk_cache_write(path, data, size), 0);
  void *back = NULL;
  size_t got = 0;
  assert_int_equal(st_disk_cache_read(path, &back, &got), 1);
  assert_int_equal(got, size);
  assert_memory_equal(back, data, size);
  free(back);
}

static void a_binary_comes_back_whole(void **state) {
  (void)state;
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/a/b/sparsetune", g_root);
  snprintf(path, sizeof path, "%s/h.sm_90a.nvrtc-13.0-sparsetune-0.2.0.cubin", dir);
  unsigned char data[5000];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 131 + 7);
  write_then_read(path, data, sizeof data);
  struct stat st;
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700); /* made private */
  assert_int_equal(count_files(dir, ".cubin."), 0); /* no temporary left */
  data[0] ^= 1; /* a second write replaces the first */
  write_then_read(path, data, sizeof data);
  void *back = NULL;
  size_t got = 0;
  assert_int_equal(st_disk_cache_read("", &back, &got), 0);
  assert_int_equal(st_disk_cache_write("", data, sizeof data), -1);
  assert_int_equal(st_disk_cache_write(path, data, 0), -1);
}

/* Rewrites byte `at` of `path` (or truncates it to `at` bytes). */
static void damage(const char *path, long at, int truncate_it) {
  if (truncate_it) {
    assert_int_equal(truncate(path, at), 0);
    return;
  }
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  unsigned char b = 0;
  assert_int_equal(pread(fd, &b, 1, at), 1);
  b ^= 0x40;
  assert_int_equal(pwrite(fd, &b, 1, at), 1);
  close(fd);
}

static void a_damaged_file_is_never_returned(void **state) {
  (void)state;
  char path[600];
  snprintf(path, sizeof path, "%s/d.cubin", g_root);
  unsigned char data[300];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i ^ 0x5a);
  const long header = 8 + 8 + 32;
  const struct {
    long at;
    int truncate_it;
    const char *what;
  } cases[] = {{0, 0, "magic"},  {9, 0, "length"},          {20, 0, "hash"},  {header + 150, 0, "payload"},
               {header + 299, 0, "last byte"}, {header + 10, 1, "truncated"}, {10, 1, "header cut"}, {0, 1, "empty"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(st_disk_cache_write(path, data, sizeof data), 0);
    damage(path, cases[i].at, cases[i].truncate_it);
    void *back = (void *)1;
    size_t got = 99;
    if (st_disk_cache_read(path, &back, &got) != 0) fail_msg("a file with a damaged %s was returned", cases[i].what);
    assert_null(back);
    assert_int_equal(got, 0);
  }
  /* A file that is longer than its header says. */
  assert_int_equal(st_disk_cache_write(path, data, sizeof data), 0);
  FILE *f = fopen(path, "ab");
  assert_non_null(f);
  fputc('x', f);
  fclose(f);
  void *back = NULL;
  size_t got = 0;
  assert_int_equal(st_disk_cache_read(path, &back, &got), 0);
  /* A link is not followed. */
  char target[600], link_path[620];
  snprintf(target, sizeof target, "%s/t.cubin", g_root);
  snprintf(link_path, sizeof link_path, "%s/l.cubin", g_root);
  assert_int_equal(st_disk_cache_write(target, data, sizeof data), 0);
  assert_int_equal(symlink(target, link_path), 0);
  assert_int_equal(st_disk_cache_read(link_path, &back, &got), 0);
}

static void an_unwritable_folder_costs_nothing_but_the_cache(void **state) {
  (void)state;
  if (geteuid() == 0) skip(); /* root writes anywhere */
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/ro", g_root);
  assert_int_equal(mkdir(dir, 0500), 0);
  snprintf(path, sizeof path, "%s/x.cubin", dir);
  unsigned char data[16] = {1, 2, 3};
  assert_int_equal(st_disk_cache_write(path, data, sizeof data), -1);
  assert_int_equal(count_files(dir, "x.cubin"), 0);
  chmod(dir, 0700);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_folder_follows_the_environment),
      cmocka_unit_test(a_file_is_named_by_source_arch_and_compiler),
      cmocka_unit_test_setup_teardown(a_binary_comes_back_whole, setup, teardown),
      cmocka_unit_test_setup_teardown(a_damaged_file_is_never_returned, setup, teardown),
      cmocka_unit_test_setup_teardown(an_unwritable_folder_costs_nothing_but_the_cache, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
