/* schema_check.h - a file's schema against the one its version promises.
 *
 * user_version says which migrations a file has had; this checks that the
 * schema objects those migrations create are all there, as they created
 * them (tables, columns, constraints, indexes), so that a file whose tables
 * were dropped or altered by hand is refused instead of failing, or worse
 * answering, later. The reference is built in memory from the embedded
 * migrations, so a new migration needs nothing here.
 */
#ifndef ST_DB_SCHEMA_CHECK_H
#define ST_DB_SCHEMA_CHECK_H

#include <sqlite3.h>

#include "error.h"

/* ST_OK when every object of schema `version` is in `conn`'s main database
 * with the same definition (whitespace and comments aside) and no trigger
 * was added; else ST_ERR_DB naming the first difference. */
st_status st_db_check_schema(sqlite3 *conn, const char *path, int version, st_err *err);

#endif
