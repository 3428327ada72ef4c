# index_score / index_topk (the prefill indexer): the double-precision reference.
st_add_test(NAME test_reference_index_prefill LABEL cpu SOURCES test_reference_index_prefill.c LIBS st_tuner_core)
