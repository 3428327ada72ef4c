/* st_db_migrations.h - the schema migrations embedded into st_db (private).
 *
 * Generated at build time from db/migrations/NNN_name.sql by embed_sql.cmake:
 * entry i holds migration number i + 1, whose SQL takes the schema from
 * version i to i + 1. db_write.c applies them; schema_check.c builds the
 * schema a version promises from them. */
#ifndef ST_DB_MIGRATIONS_H
#define ST_DB_MIGRATIONS_H

typedef struct st_db_migration {
  int version;      /* NNN of the file name                             */
  const char *name; /* the file name's part after NNN_                  */
  const char *sql;  /* the file's text, NUL-terminated                  */
} st_db_migration;

extern const st_db_migration st_db_migrations[];
extern const int st_db_migration_count;

#endif
