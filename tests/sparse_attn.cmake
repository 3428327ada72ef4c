# sparse_attn: the double-precision reference and its verifier.
st_add_test(NAME test_reference_sparse_attn LABEL cpu SOURCES test_reference_sparse_attn.c kv_pool.c LIBS st_tuner_core)
st_add_test(NAME test_sparse_attn_launcher LABEL cpu SOURCES test_sparse_attn_launcher.c)
st_add_test(NAME test_sparse_attn_gpu LABEL gpu SOURCES test_sparse_attn_gpu.c variant_matrix.c LIBS st_tuner_core)
set_tests_properties(test_sparse_attn_gpu PROPERTIES TIMEOUT 900)
