/* version.c - st_version, st_version_number: the version this library was
 * built as, for a program to compare with the header it was compiled
 * against. */
#include "sparsetune.h"

const char *st_version(void) { return SPARSETUNE_VERSION_STRING; }

unsigned st_version_number(void) { return SPARSETUNE_VERSION_NUMBER; }
