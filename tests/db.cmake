# db/ (schema, migrations, safety of opening, round trips, concurrency) and
# the reports built on it (tuner/report.c, in the tuner's library).
foreach(t test_db_refuses_foreign_files test_db_round_trips test_db_migrations test_db_concurrent_readers
          test_db_one_writer test_db_read_only_folder)
  st_add_test(NAME ${t} LABEL cpu SOURCES ${t}.c LIBS st_db_writer)
endforeach()

foreach(t test_report_regress test_report_show test_report_history test_report_html)
  st_add_test(NAME ${t} LABEL cpu SOURCES ${t}.c LIBS st_tuner_core)
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/tuner)
endforeach()
