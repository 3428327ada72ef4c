/* path.h - file-name arithmetic shared by the database, the tuner and the
 * runtime. */
#ifndef ST_PATH_H
#define ST_PATH_H

#include <stddef.h>

/* The folder holding `path` into dir[cap]: "." for a bare name, "/" for a
 * file at the root, else everything before the last '/'. 0, or -1 (dir
 * then empty) when it does not fit. */
int st_path_folder(const char *path, char *dir, size_t cap);

#endif
