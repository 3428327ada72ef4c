/* test_templates_compile.c - every kernel template is valid CUDA C++ as
 * written: templates/<name>.cu compiles with NVRTC for sm_90a at the default
 * prelude it includes (templates/defaults/<name>.cuh), found by the include
 * path as a compiler, a linter or an editor finds it, and no file under
 * templates/ holds a `${` placeholder. No GPU is needed. That the defaults
 * are the op's default variant is test_generator_lua's check. */
#include <dirent.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

#define TEMPLATES_DIR ST_SOURCE_DIR "/templates"
/* The architecture the tuner's CI compiles for (the *_compiles tests). */
#define ARCH "sm_90a"
#define PATH_CAP 1024

/* The whole file, NUL-terminated (malloc'ed), or NULL. */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = NULL;
  if (fseek(f, 0, SEEK_END) != 0) goto cleanup;
  const long size = ftell(f);
  if (size < 0 || fseek(f, 0, SEEK_SET) != 0) goto cleanup;
  text = malloc((size_t)size + 1);
  if (!text) goto cleanup;
  if (fread(text, 1, (size_t)size, f) != (size_t)size) {
    free(text);
    text = NULL;
    goto cleanup;
  }
  text[size] = '\0';
cleanup:
  fclose(f);
  return text;
}

static int ends_with(const char *s, const char *tail) {
  const size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

/* ---- no placeholders ---------------------------------------------------- */

/* Prints each `${` in the files under `dir` (recursively) with its file and
 * line; returns how many there are. */
static int count_placeholders(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int found = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if (S_ISDIR(st.st_mode)) {
      found += count_placeholders(path);
      continue;
    }
    char *text = read_text(path);
    assert_non_null(text);
    int line = 1;
    for (const char *p = text; *p; p++) {
      if (*p == '\n') line++;
      if (p[0] == '$' && p[1] == '{') {
        print_error("%s:%d: a ${ placeholder: constants come from the prelude (ST_P_*)\n", path, line);
        found++;
      }
    }
    free(text);
  }
  closedir(d);
  return found;
}

static void test_no_placeholder_is_left_under_templates(void **state) {
  (void)state;
  assert_int_equal(count_placeholders(TEMPLATES_DIR), 0);
}

/* ---- each template compiles at its defaults ----------------------------- */

/* Compiles templates/<file> as written; prints the log when it fails. The
 * options are those the tuner compiles rendered sources with
 * (tuner/compile.c), plus the include path that rendering inlines. */
static int template_compiles(const char *file) {
  char path[PATH_CAP];
  snprintf(path, sizeof path, "%s/%s", TEMPLATES_DIR, file);
  char *source = read_text(path);
  assert_non_null(source);
  nvrtcProgram prog = NULL;
  assert_int_equal(nvrtcCreateProgram(&prog, source, file, 0, NULL, NULL), NVRTC_SUCCESS);
  const char *const opts[] = {"--gpu-architecture=" ARCH, "-std=c++17", "-default-device",
                              "--include-path=" TEMPLATES_DIR};
  const nvrtcResult rc = nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
  if (rc != NVRTC_SUCCESS) {
    size_t size = 0;
    assert_int_equal(nvrtcGetProgramLogSize(prog, &size), NVRTC_SUCCESS);
    char *log = malloc(size + 1);
    assert_non_null(log);
    log[0] = log[size] = '\0';
    if (size) assert_int_equal(nvrtcGetProgramLog(prog, log), NVRTC_SUCCESS);
    print_error("%s does not compile for %s at its defaults (%s):\n%s\n", file, ARCH, nvrtcGetErrorString(rc), log);
    free(log);
  }
  assert_int_equal(nvrtcDestroyProgram(&prog), NVRTC_SUCCESS);
  free(source);
  return rc == NVRTC_SUCCESS;
}

/* Whether templates/<stem>.cu includes its own defaults file,
 * defaults/<stem>.cuh (printed when not). */
static int includes_its_defaults(const char *file) {
  char path[PATH_CAP], line[PATH_CAP];
  snprintf(path, sizeof path, "%s/%s", TEMPLATES_DIR, file);
  const int stem = (int)(strlen(file) - strlen(".cu"));
  snprintf(line, sizeof line, "\n#include \"defaults/%.*s.cuh\"\n", stem, file);
  char *text = read_text(path);
  assert_non_null(text);
  const int found = strstr(text, line) != NULL;
  if (!found) print_error("%s lacks the line %s", file, line + 1);
  free(text);
  return found;
}

static void test_every_template_compiles_at_its_defaults(void **state) {
  (void)state;
  DIR *d = opendir(TEMPLATES_DIR);
  assert_non_null(d);
  int templates = 0, failed = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (!ends_with(e->d_name, ".cu")) continue;
    templates++;
    if (!includes_its_defaults(e->d_name) || !template_compiles(e->d_name)) failed++;
  }
  closedir(d);
  printf("%d templates, %d failed\n", templates, failed);
  assert_true(templates > 0);
  assert_int_equal(failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_placeholder_is_left_under_templates),
      cmocka_unit_test(test_every_template_compiles_at_its_defaults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
