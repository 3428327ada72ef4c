# index_decode: reference, launcher, and (on a GPU) every variant end to end.
st_add_test(NAME test_reference_index_decode LABEL cpu SOURCES test_reference_index_decode.c LIBS st_tuner_core)
st_add_test(NAME test_index_decode_launcher LABEL cpu SOURCES test_index_decode_launcher.c LIBS st_tuner_core)
st_add_test(NAME test_winners LABEL cpu SOURCES test_winners.c LIBS st_tuner_core)
st_add_test(NAME test_index_decode_gpu LABEL gpu SOURCES test_index_decode_gpu.c variant_matrix.c LIBS st_tuner_core)
st_add_test(NAME test_runtime_gpu_e2e LABEL gpu SOURCES test_runtime_gpu_e2e.c gpu_db.c LIBS st_tuner_core)
set_tests_properties(test_index_decode_gpu test_runtime_gpu_e2e PROPERTIES TIMEOUT 900)
