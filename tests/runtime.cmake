# The dispatch layer of libsparsetune (runtime/dispatch.c, handle.c, the
# api_<op>.c entry points). CPU suites drive dispatch with stand-in fit
# checks and loaders; the GPU suite needs a driver and a device.
st_add_test(NAME test_runtime_dispatch LABEL cpu SOURCES test_runtime_dispatch.c)
st_add_test(NAME test_runtime_api LABEL cpu SOURCES test_runtime_api.c)
st_add_test(NAME test_runtime_gpu_open LABEL gpu SOURCES test_runtime_gpu_open.c LIBS st_db_writer)
st_add_test(NAME test_runtime_api_attention LABEL cpu SOURCES test_runtime_api_attention.c api_fixture.c)
st_add_test(NAME test_runtime_api_indexer LABEL cpu SOURCES test_runtime_api_indexer.c api_fixture.c)
# Every entry point of every op fed hostile arguments (a printed seed,
# thousands of cases): refused cleanly or accepted within the header's
# contract; meant for the sanitized build, where UBSan halts on overflow.
st_add_test(NAME test_api_rejects_hostile_args LABEL cpu SOURCES test_api_rejects_hostile_args.c api_fixture.c)
# The built-in variants the library holds are the generator's defaults
# (sources byte for byte); the disk cache of their binaries.
st_add_test(NAME test_builtin_variants LABEL cpu SOURCES test_builtin_variants.c LIBS st_tuner_core)
# Which built-in variant each decode and prefill call runs, by the rules of the
# generator's defaults and the launchers' split counts.
st_add_test(NAME test_builtin_choice LABEL cpu SOURCES test_builtin_choice.c LIBS st_tuner_core)
st_add_test(NAME test_disk_cache LABEL cpu SOURCES test_disk_cache.c)
# Every op's module names the size of the argument block the host fills.
st_add_test(NAME test_params_gate LABEL cpu SOURCES test_params_gate.c)
# With no database: every op's built-in variants, the disk cache, no compile
# inside a graph capture.
st_add_test(NAME test_runtime_gpu_builtin LABEL gpu SOURCES test_runtime_gpu_builtin.c LIBS st_tuner_core)
