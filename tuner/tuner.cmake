# tuner/ sources owned outside the first cut of CMakeLists.txt.
list(APPEND ST_TUNER_SOURCES compile.c compile_cache.c)
