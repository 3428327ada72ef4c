# index_score / index_topk (the prefill indexer): the double-precision reference.
st_add_test(NAME test_reference_index_prefill LABEL cpu SOURCES test_reference_index_prefill.c LIBS st_tuner_core)
st_add_test(NAME test_index_topk_launcher LABEL cpu SOURCES test_index_topk_launcher.c)
st_add_test(NAME test_index_topk_gpu LABEL gpu SOURCES test_index_topk_gpu.c variant_matrix.c LIBS st_tuner_core)
set_tests_properties(test_index_topk_gpu PROPERTIES TIMEOUT 900)
st_add_test(NAME test_index_score_launcher LABEL cpu SOURCES test_index_score_launcher.c)
st_add_test(NAME test_index_score_gpu LABEL gpu SOURCES test_index_score_gpu.c variant_matrix.c LIBS st_tuner_core)
set_tests_properties(test_index_score_gpu PROPERTIES TIMEOUT 900)
