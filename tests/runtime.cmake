# The dispatch layer of libsparsetune (runtime/dispatch.c, handle.c, the
# api_<op>.c entry points). CPU suites drive dispatch with stand-in fit
# checks and loaders; the GPU suite needs a driver and a device.
st_add_test(NAME test_runtime_dispatch LABEL cpu SOURCES test_runtime_dispatch.c)
st_add_test(NAME test_runtime_api LABEL cpu SOURCES test_runtime_api.c)
st_add_test(NAME test_runtime_gpu_open LABEL gpu SOURCES test_runtime_gpu_open.c)
st_add_test(NAME test_runtime_api_attention LABEL cpu SOURCES test_runtime_api_attention.c api_fixture.c)
st_add_test(NAME test_runtime_api_indexer LABEL cpu SOURCES test_runtime_api_indexer.c api_fixture.c)
