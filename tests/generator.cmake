# The generator (generator/*.lua) and its C bridge (tuner/generator.c).
# test_generator_lua: the Lua modules alone (renderer, space helpers, the
# index_decode and sparse_attn_decode spaces, the suites); test_generator: the
# C bridge over the real generator; test_templates_compile: every template
# compiles with NVRTC as written, at its default prelude (no GPU).
st_add_test(NAME test_generator_lua LABEL cpu SOURCES test_generator_lua.c LIBS st_tuner_core)
st_add_test(NAME test_generator LABEL cpu SOURCES test_generator.c LIBS st_tuner_core)
st_add_test(NAME test_templates_compile LABEL cpu SOURCES test_templates_compile.c LIBS st_nvrtc)
