# tuner/ suites. NVRTC compiles run without a GPU, so they are `cpu` tests.
st_add_test(NAME test_compile LABEL cpu SOURCES test_compile.c LIBS st_tuner_core)
