/* consumer.c - a program outside the project that uses an installed
 * libsparsetune as an inference engine would: <sparsetune.h> only, linked
 * through the CMake package or pkg-config (tests/test_install.sh builds it
 * both ways).
 *
 *   consumer DB EXPECTED_STATUS
 *
 * Checks that the library is the header's version, that status names come
 * through, and that st_open on DB returns the status named EXPECTED_STATUS:
 * a failure leaves the handle NULL and a message; ST_OK gives a handle,
 * closed again. Exits 0 when every check holds, 1 after naming each that
 * did not, 2 on bad usage. */
#include <sparsetune.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what, const char *got, const char *want) {
  if (ok) return;
  fprintf(stderr, "consumer: %s is '%s', expected '%s'\n", what, got, want);
  failures++;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: consumer DB EXPECTED_STATUS\n");
    return 2;
  }
  check(!strcmp(st_version(), SPARSETUNE_VERSION_STRING), "st_version()", st_version(), SPARSETUNE_VERSION_STRING);
  check(!strcmp(st_status_name(ST_ERR_DB), "ST_ERR_DB"), "st_status_name(ST_ERR_DB)", st_status_name(ST_ERR_DB),
        "ST_ERR_DB");

  static char stale;
  st_handle *h = (st_handle *)&stale; /* a failed st_open must set it to NULL */
  const st_status s = st_open(argv[1], 0, &h);
  const char *message = st_last_error(NULL);
  check(!strcmp(st_status_name(s), argv[2]), "st_open's status", st_status_name(s), argv[2]);
  check(s == ST_OK || h == NULL, "the handle of a failed st_open", h ? "set" : "NULL", "NULL");
  check(s != ST_OK || (h != NULL && h != (st_handle *)&stale), "the handle of st_open", "not set", "a new handle");
  check(s == ST_OK || message[0], "st_last_error(NULL) after it", message, "a message");
  if (s == ST_OK && h != (st_handle *)&stale) st_close(h);
  printf("consumer: libsparsetune %s; st_open(%s): %s: %s\n", st_version(), argv[1], st_status_name(s), message);
  return failures ? 1 : 0;
}
