# The dispatch layer of libsparsetune: handles, variant choice, module cache
# and the public entry points (runtime/CMakeLists.txt builds the shared
# library once this list is set).
set(ST_DISPATCH_SOURCES
  handle.c
  last_error.c
  dispatch.c
  module_cache.c
  api_common.c
  api_index_decode.c
  api_index_prefill.c
  api_index_score.c
  api_index_topk.c
  api_sparse_attn.c
  api_sparse_attn_decode.c
)
