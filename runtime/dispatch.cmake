# The dispatch layer of libsparsetune: handles, variant choice, module cache
# and the public entry points (runtime/CMakeLists.txt builds the shared
# library once this list is set).
set(ST_DISPATCH_SOURCES
  handle.c
  last_error.c
  dispatch.c
  module_cache.c
  builtin.c
  nvrtc_loader.c
  disk_cache.c
  api.c
)
