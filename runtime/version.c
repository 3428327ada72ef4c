/* version.c - st_version: the version this library was built as, for a
 * program to compare with the header it was compiled against. */
#include "sparsetune.h"

const char *st_version(void) { return SPARSETUNE_VERSION_STRING; }
