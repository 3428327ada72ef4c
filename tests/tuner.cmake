# tuner/ suites. NVRTC compiles run without a GPU, so they are `cpu` tests.
st_add_test(NAME test_compile LABEL cpu SOURCES test_compile.c LIBS st_tuner_core)
st_add_test(NAME test_decode_step LABEL cpu SOURCES test_decode_step.c LIBS st_tuner_core)
st_add_test(NAME test_eta LABEL cpu SOURCES test_eta.c LIBS st_tuner_core)
st_add_test(NAME test_cold LABEL cpu SOURCES test_cold.c LIBS st_tuner_core)
st_add_test(NAME test_timing_retry LABEL cpu SOURCES test_timing_retry.c LIBS st_tuner_core)
st_add_test(NAME test_verify_twice LABEL cpu SOURCES test_verify_twice.c LIBS st_tuner_core)
st_add_test(NAME test_case_requests LABEL cpu SOURCES test_case_requests.c LIBS st_tuner_core)
st_add_test(NAME test_attn_selection LABEL cpu SOURCES test_attn_selection.c LIBS st_tuner_core)
st_add_test(NAME test_show_winners LABEL cpu SOURCES test_show_winners.c LIBS st_tuner_core)
add_test(NAME test_cli_refuses_bad_input
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_cli_refuses_bad_input.sh $<TARGET_FILE:sparsetune_cli>)
set_tests_properties(test_cli_refuses_bad_input PROPERTIES LABELS cpu ENVIRONMENT "ST_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
