# tuner/ suites. NVRTC compiles run without a GPU, so they are `cpu` tests.
st_add_test(NAME test_compile LABEL cpu SOURCES test_compile.c LIBS st_tuner_core)
st_add_test(NAME test_compile_cache LABEL cpu SOURCES test_compile_cache.c LIBS st_tuner_core)
st_add_test(NAME test_decode_step LABEL cpu SOURCES test_decode_step.c LIBS st_tuner_core)
st_add_test(NAME test_eta LABEL cpu SOURCES test_eta.c LIBS st_tuner_core)
st_add_test(NAME test_search_model LABEL cpu SOURCES test_search_model.c LIBS st_tuner_core)
st_add_test(NAME test_show_search LABEL cpu SOURCES test_show_search.c LIBS st_tuner_core)
st_add_test(NAME test_cold LABEL cpu SOURCES test_cold.c LIBS st_tuner_core)
st_add_test(NAME test_timing_retry LABEL cpu SOURCES test_timing_retry.c LIBS st_tuner_core)
st_add_test(NAME test_verify_twice LABEL cpu SOURCES test_verify_twice.c LIBS st_tuner_core)
st_add_test(NAME test_case_requests LABEL cpu SOURCES test_case_requests.c LIBS st_tuner_core)
st_add_test(NAME test_attn_selection LABEL cpu SOURCES test_attn_selection.c LIBS st_tuner_core)
st_add_test(NAME test_show_winners LABEL cpu SOURCES test_show_winners.c LIBS st_tuner_core)
st_add_test(NAME test_run_env LABEL cpu SOURCES test_run_env.c LIBS st_tuner_core)
target_compile_definitions(test_run_env PRIVATE ST_VERSION="${PROJECT_VERSION}")
add_test(NAME test_cli_refuses_bad_input
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_refuses_bad_input.sh $<TARGET_FILE:sparsetune_cli>)
set_tests_properties(test_cli_refuses_bad_input PROPERTIES LABELS cpu ENVIRONMENT "ST_SOURCE_DIR=${PROJECT_SOURCE_DIR}")

# kill -9 of `sparsetune` (its pid, or its process group) at random moments,
# then integrity_check and a resume that must end with an uninterrupted
# run's rows: generate and compile here, tune (timing) where there is a GPU.
add_executable(test_crash_consistency test_crash_consistency.c)
target_link_libraries(test_crash_consistency PRIVATE st_testutil st_sqlite)
target_compile_definitions(test_crash_consistency PRIVATE ST_CLI_PATH="$<TARGET_FILE:sparsetune_cli>")
set_target_properties(test_crash_consistency PROPERTIES BUILD_RPATH "${CMAKE_BINARY_DIR}/lib;${ST_CUDA_ROOT}/lib64")
add_dependencies(test_crash_consistency sparsetune_cli)
foreach(w generate compile tune)
  set(label cpu)
  if(w STREQUAL tune)
    set(label gpu)
  endif()
  add_test(NAME test_crash_consistency_${w} COMMAND test_crash_consistency ${w})
  set_tests_properties(test_crash_consistency_${w} PROPERTIES LABELS ${label} SKIP_RETURN_CODE 77
                       ENVIRONMENT "ST_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endforeach()

# The runtime's dispatch key of every suite shape (the harnesses'
# dispatch_args, no GPU) against the generator's.
st_add_test(NAME test_dispatch_keys LABEL cpu SOURCES test_dispatch_keys.c LIBS st_tuner_core)
st_add_test(NAME test_eval_stats LABEL cpu SOURCES test_eval_stats.c LIBS st_tuner_core)
st_add_test(NAME test_eval_oracle LABEL cpu SOURCES test_eval_oracle.c LIBS st_tuner_core)
st_add_test(NAME test_eval_report LABEL cpu SOURCES test_eval_report.c LIBS st_tuner_core)
# The statistics of regression tracking: the two-run rank test and verdict,
# change points in a history of runs.
st_add_test(NAME test_perf_stats LABEL cpu SOURCES test_perf_stats.c LIBS st_tuner_core)

# `sparsetune export` run as a process over a tuned database built in the
# test: what the runtime reads back, what is left out, filters, bad input,
# the commands that write refusing an export; then the export killed or
# stopped on the way; then its compressed cubins, whole and damaged.
foreach(t test_export test_export_killed test_export_cubins)
  st_add_test(NAME ${t} LABEL cpu SOURCES ${t}.c export_fixture.c LIBS st_tuner_core st_xxhash)
  target_compile_definitions(${t} PRIVATE ST_CLI_PATH="$<TARGET_FILE:sparsetune_cli>")
  add_dependencies(${t} sparsetune_cli)
endforeach()
# merge: shards of one history into one database, in either order, twice;
# bad sources refused before anything is written.
st_add_test(NAME test_merge LABEL cpu SOURCES test_merge.c LIBS st_tuner_core)
