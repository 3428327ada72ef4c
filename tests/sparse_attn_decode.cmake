# sparse_attn_decode: the double-precision reference and its verifier.
st_add_test(NAME test_reference_sparse_attn_decode LABEL cpu SOURCES test_reference_sparse_attn_decode.c kv_pool.c LIBS st_tuner_core)
st_add_test(NAME test_sparse_attn_decode_launcher LABEL cpu SOURCES test_sparse_attn_decode_launcher.c)
st_add_test(NAME test_sparse_attn_decode_gpu LABEL gpu SOURCES test_sparse_attn_decode_gpu.c variant_matrix.c LIBS st_tuner_core)
set_tests_properties(test_sparse_attn_decode_gpu PROPERTIES TIMEOUT 900)
st_add_test(NAME test_runtime_gpu_sparse_attn_decode LABEL gpu SOURCES test_runtime_gpu_sparse_attn_decode.c gpu_db.c LIBS st_tuner_core)
