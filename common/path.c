/* path.c - file-name arithmetic (path.h). */
#include "path.h"

#include <stdio.h>
#include <string.h>

int st_path_folder(const char *path, char *dir, size_t cap) {
  if (cap < 2) { /* not even "." fits */
    if (cap == 1) dir[0] = '\0';
    return -1;
  }
  const int n = snprintf(dir, cap, "%s", path);
  if (n < 0 || (size_t)n >= cap) {
    dir[0] = '\0';
    return -1;
  }
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, cap, ".");
  else if (slash == dir)
    slash[1] = '\0';
  else
    *slash = '\0';
  return 0;
}
