/* test_generator_lua.c - the generator's Lua modules on their own: the
 * template renderer (generator/render.lua), the space helpers
 * (generator/space.lua) and the index_decode space, constraints and rules
 * (generator/ops/index_decode.lua). Each test runs Lua snippets in a fresh
 * state whose package.path is the generator directory. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define GEN_DIR ST_SOURCE_DIR "/generator"
#define RENDER_DATA ST_SOURCE_DIR "/tests/data/render"

static int setup(void **state) {
  lua_State *L = luaL_newstate();
  if (!L) return -1;
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_pushstring(L, GEN_DIR "/?.lua");
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  lua_pushstring(L, RENDER_DATA);
  lua_setglobal(L, "DATA");
  *state = L;
  return 0;
}

static int teardown(void **state) {
  lua_close(*state);
  return 0;
}

/* Runs the chunk `code`; returns tostring of its first result, or
 * "ERROR: <message>". The caller frees the text. */
static char *eval(lua_State *L, const char *code) {
  const int top = lua_gettop(L);
  char *out;
  if (luaL_loadstring(L, code) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    out = malloc(strlen(msg ? msg : "?") + 8);
    sprintf(out, "ERROR: %s", msg ? msg : "?");
  } else {
    out = strdup(luaL_tolstring(L, -1, NULL));
  }
  lua_settop(L, top);
  return out;
}

static void expect(lua_State *L, const char *code, const char *want) {
  char *got = eval(L, code);
  assert_string_equal(got, want);
  free(got);
}

static void expect_error_containing(lua_State *L, const char *code, const char *part) {
  char *got = eval(L, code);
  if (strncmp(got, "ERROR: ", 7) != 0 || !strstr(got, part)) {
    print_error("expected an error containing '%s', got: %s\n", part, got);
    free(got);
    fail();
  }
  free(got);
}

/* ---- render.lua --------------------------------------------------------- */

static void test_render_substitutes_inlines_once_and_unescapes(void **state) {
  expect(*state, "return require('render').render(DATA, 'top.cu', {name = 'demo', n = 3})",
         "// top demo x3\n"
         "// ---- begin inc/one.h\n"
         "// one\n"
         "// ---- begin inc/two.h\n"
         "constexpr int B = 3;\n"
         "// ---- end inc/two.h\n"
         "// ---- already included: inc/two.h\n"
         "// ---- end inc/one.h\n"
         "#include <stdint.h>\n"
         "#include \"not_here.h\"\n"
         "const char *s = \"${literal} and $x\";\n"
         "// ---- already included: inc/one.h\n");
}

static void test_render_writes_strings_and_numbers(void **state) {
  expect(*state,
         "local r = require('render')\n"
         "return r.render(DATA, 'inc/two.h', {n = 'x + 1'}) .. '|' .. r.render(DATA, 'inc/two.h', {n = -7})"
         " .. '|' .. r.render(DATA, 'inc/two.h', {n = 0.5})",
         "constexpr int B = x + 1;|constexpr int B = -7;|constexpr int B = 0.5;");
}

static void test_render_missing_name_names_template_and_line(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'missing.cu', {n = 1})",
                          "missing.cu:3: template parameter 'absent' has no value");
}

static void test_render_missing_name_in_include_names_that_file(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'bad_include.cu', {})",
                          "inc/bad.h:2: template parameter 'oops' has no value");
}

static void test_render_rejects_value_of_wrong_type(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'inc/two.h', {n = {}})",
                          "inc/two.h:1: template parameter 'n' is a table");
  expect_error_containing(*state, "return require('render').render(DATA, 'inc/two.h', {n = true})", "is a boolean");
}

static void test_render_rejects_unterminated_placeholder(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'unterminated.cu', {n = 1})",
                          "unterminated.cu:1: '${' without a closing '}'");
}

static void test_render_missing_template_is_an_error(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'nope.cu', {})",
                          "template 'nope.cu' not found under");
  expect_error_containing(*state, "return require('render').render(DATA, '../escape.cu', {})",
                          "is not a path under the templates directory");
}

/* ---- space.lua ---------------------------------------------------------- */

static void test_space_product_is_complete_and_ordered(void **state) {
  expect(*state,
         "local s = require('space')\n"
         "local pts = s.product({b = {1, 2}, a = {'x', 'y', 'z'}})\n"
         "local out = {}\n"
         "for _, p in ipairs(pts) do out[#out + 1] = p.a .. p.b end\n"
         "return table.concat(out, ' ')",
         "x1 x2 y1 y2 z1 z2");
}

static void test_space_filter_keeps_and_gives_reasons(void **state) {
  expect(*state,
         "local s = require('space')\n"
         "local kept, rej = s.filter(s.product({n = {1, 2, 3, 4}}), function(p)\n"
         "  if p.n % 2 == 1 then return false, 'odd ' .. p.n end return true end)\n"
         "return #kept .. ':' .. kept[1].n .. kept[2].n .. ':' .. rej[1].reason .. ',' .. rej[2].reason",
         "2:24:odd 1,odd 3");
}

static void test_space_canonical_sorts_keys_bytewise(void **state) {
  expect(*state, "return require('space').canonical({ctx = 5, D = 1, a = 'x', B = 2})", "B=2,D=1,a=x,ctx=5");
  expect_error_containing(*state, "return require('space').canonical({x = 1.5})", "only integers and strings");
}

/* ---- ops/index_decode.lua ----------------------------------------------- */

static void test_index_decode_constraints_reject_only_the_register_overflow(void **state) {
  /* Of the full product (3840 configs) exactly bf16 x head_dim 128 x
   * units_in_flight 8 breaks the register budget (5*3*4*2*2 = 240 configs). */
  expect(*state,
         "local s, op = require('space'), require('ops.index_decode')\n"
         "local all = s.product(op.kernel_domains)\n"
         "local kept, rej = s.filter(all, op.constraint)\n"
         "for _, r in ipairs(rej) do\n"
         "  local p = r.point\n"
         "  if not (p.dtype == 'bf16' and p.head_dim == 128 and p.units_in_flight == 8) then\n"
         "    return 'wrongly rejected ' .. s.canonical(p) end\n"
         "  if not r.reason:find('budget of 128', 1, true) then return 'reason: ' .. r.reason end\n"
         "end\n"
         "return #all .. ' ' .. #kept .. ' ' .. #rej",
         "3840 3600 240");
  expect(*state,
         "local op = require('ops.index_decode')\n"
         "local ok, why = op.constraint({dtype = 'bf16', head_dim = 128, topk = 16, heads_per_cta = 1,\n"
         "  max_qlen = 1, threads = 256, units_in_flight = 8, algo = 'single'})\n"
         "return tostring(ok) .. ': ' .. why",
         "false: units_in_flight=8 x 32 registers (bf16, head_dim 128) = 256 exceed the budget of 128");
  expect(*state,
         "local op = require('ops.index_decode')\n"
         "local ok, why = op.constraint({dtype = 'fp8', head_dim = 128, topk = 16, heads_per_cta = 8,\n"
         "  max_qlen = 4, threads = 256, units_in_flight = 1, algo = 'single'})\n"
         "return tostring(ok) .. ': ' .. why",
         "false: heads_per_cta*max_qlen = 8*4 = 32 columns exceed 16");
  expect(*state,
         "local op = require('ops.index_decode')\n"
         "return tostring(op.constraint({dtype = 'fp8', head_dim = 128, topk = 16, heads_per_cta = 4,\n"
         "  max_qlen = 4, threads = 128, units_in_flight = 4, algo = 'split'}))",
         "true");
}

static void test_index_decode_tuned_space_stops_at_topk_32(void **state) {
  expect(*state,
         "local op = require('ops.index_decode')\n"
         "local n, max = 0, 0\n"
         "for _, k in ipairs(op.kernel_space()) do n = n + 1; max = math.max(max, k.topk) end\n"
         "return n .. ' ' .. max",
         "2880 32");
}

static void test_index_decode_defaults_cover_every_bucket(void **state) {
  expect(*state,
         "local s, op = require('space'), require('ops.index_decode')\n"
         "local out = {}\n"
         "for _, d in ipairs(op.defaults()) do\n"
         "  local k = d.kernel\n"
         "  assert(k.heads_per_cta == 1 and k.max_qlen == 4 and k.threads == 256 and k.algo == 'single')\n"
         "  assert(k.units_in_flight == 2 and d.launch.splits == 0 and op.constraint(k))\n"
         "  out[#out + 1] = k.dtype .. k.head_dim .. '.' .. k.topk\n"
         "end\n"
         "return #out .. ': ' .. table.concat(out, ' ')",
         "20: bf1664.4 bf1664.8 bf1664.16 bf1664.32 bf1664.64 bf16128.4 bf16128.8 bf16128.16 bf16128.32 "
         "bf16128.64 fp864.4 fp864.8 fp864.16 fp864.32 fp864.64 fp8128.4 fp8128.8 fp8128.16 fp8128.32 "
         "fp8128.64");
}

#define SHAPE_B8                                                                                                       \
  "local s = {dtype = 'bf16', D = 128, H = 2, qlen = 1, topk = 16, init = 1, ['local'] = 2, B = 8, "                   \
  "ctx = 32768, lens = 'full'}\n"
#define KERNEL_K16                                                                                                     \
  "local k = {dtype = 'bf16', head_dim = 128, topk = 16, heads_per_cta = 1, max_qlen = 1, threads = 256, "             \
  "units_in_flight = 2, algo = 'single'}\n"

static void test_index_decode_shape_and_dispatch_keys(void **state) {
  expect(*state, "local op = require('ops.index_decode')\n" SHAPE_B8 "return op.shape_key(s)",
         "index_decode:B=8,D=128,H=2,ctx=32768,dtype=bf16,init=1,lens=full,local=2,qlen=1,topk=16");
  expect(*state, "local op = require('ops.index_decode')\n" SHAPE_B8 "return op.dispatch_key(s)",
         "index_decode:B=8,D=128,H=2,dtype=bf16,qlen=1,topk=16");
  expect(*state,
         "local op = require('ops.index_decode')\n" SHAPE_B8
         "s.init = 15\nlocal ok, why = op.check_shape(s)\nreturn tostring(ok) .. ': ' .. why",
         "false: init + local = 15 + 2 exceed topk=16");
}

static void test_index_decode_topk_buckets(void **state) {
  /* shape topk -> the capacities that fit it */
  expect(*state,
         "local op = require('ops.index_decode')\n" SHAPE_B8 KERNEL_K16 "local out = {}\n"
         "for _, t in ipairs({1, 4, 5, 8, 9, 16, 17, 32, 33, 64}) do\n"
         "  s.topk = t; s.init = 0; s['local'] = 0\n"
         "  local caps = {}\n"
         "  for _, c in ipairs({4, 8, 16, 32, 64}) do\n"
         "    k.topk = c\n"
         "    if op.fits(k, s, true) then caps[#caps + 1] = c end\n"
         "  end\n"
         "  out[#out + 1] = t .. '->' .. table.concat(caps, '/')\n"
         "end\n"
         "return table.concat(out, ' ')",
         "1->4 4->4 5->8 8->8 9->16 16->16 17->32 32->32 33->64 64->64");
}

static void test_index_decode_fit_rules(void **state) {
  lua_State *L = *state;
  const char *pre = "local op = require('ops.index_decode')\n" SHAPE_B8 KERNEL_K16;
  char code[2048];
#define FITS(change, is_default, want)                                                                                 \
  snprintf(code, sizeof code, "%s%s\nreturn tostring((op.fits(k, s, %s)))", pre, change, is_default);                  \
  expect(L, code, want)
  FITS("", "false", "true");
  FITS("k.dtype = 'fp8'", "false", "false");
  FITS("k.head_dim = 64", "false", "false");
  FITS("k.heads_per_cta = 4", "false", "false"); /* does not divide H = 2 */
  FITS("k.heads_per_cta = 2", "false", "true");
  FITS("s.qlen = 2", "false", "false");                 /* max_qlen 1 < qlen 2 */
  FITS("s.qlen = 2; k.max_qlen = 3", "false", "false"); /* tuned: max_qlen is qlen or 4 */
  FITS("s.qlen = 2; k.max_qlen = 3", "true", "true");
  FITS("s.qlen = 2; k.max_qlen = 4", "false", "true");
#undef FITS
}

static void test_index_decode_launch_choices(void **state) {
  lua_State *L = *state;
  const char *pre = "local op = require('ops.index_decode')\n" SHAPE_B8 KERNEL_K16;
  char code[2048];
#define WORTH(change, splits, want)                                                                                    \
  snprintf(code, sizeof code, "%s%s\nreturn tostring((op.worth(k, {splits = %d}, s, false)))", pre, change, splits);   \
  expect(L, code, want)
  WORTH("", 0, "true");
  WORTH("", 1, "true");
  WORTH("", 64, "true");   /* 8 * 64 * 2 = 1024 CTAs <= 8 waves of 132 */
  WORTH("", 128, "false"); /* 2048 CTAs */
  WORTH("k.heads_per_cta = 2", 128, "true");
  WORTH("", 3, "false");            /* not a power of two */
  WORTH("s.ctx = 1000", 8, "true"); /* 8 blocks */
  WORTH("s.ctx = 1000", 16, "false");
  WORTH("k.algo = 'split'", 0, "false");
  WORTH("k.algo = 'split'", 1, "false");
  WORTH("k.algo = 'split'", 2, "true");
  WORTH("s.B = 128", 4, "true");
  WORTH("s.B = 128", 8, "false");
  /* The merge reads one key per block whatever the split count. */
  WORTH("s.B = 1; s.ctx = 131072; k.heads_per_cta = 2; k.max_qlen = 4", 256, "true");
#undef WORTH
}

static void test_index_decode_names_are_readable(void **state) {
  expect(*state,
         "local op = require('ops.index_decode')\n" KERNEL_K16
         "return op.variant_name(k, {splits = 8}) .. ' ' .. op.variant_name(k, {splits = 0})",
         "index_decode.bf16.d128.k16.h1.q1.t256.u2.single/s8 index_decode.bf16.d128.k16.h1.q1.t256.u2.single/auto");
}

static void test_index_decode_render_values_are_the_template_names(void **state) {
  expect(*state,
         "local s, op = require('space'), require('ops.index_decode')\n" KERNEL_K16
         "k.dtype = 'fp8'; k.algo = 'split'\n"
         "return s.canonical(op.render_values(k))",
         "algo_split=1,head_dim=128,heads_per_cta=1,is_fp8=1,max_qlen=1,threads=256,topk=16,units_in_flight=2");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_render_substitutes_inlines_once_and_unescapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_writes_strings_and_numbers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_missing_name_names_template_and_line, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_missing_name_in_include_names_that_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_rejects_value_of_wrong_type, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_rejects_unterminated_placeholder, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_missing_template_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_space_product_is_complete_and_ordered, setup, teardown),
      cmocka_unit_test_setup_teardown(test_space_filter_keeps_and_gives_reasons, setup, teardown),
      cmocka_unit_test_setup_teardown(test_space_canonical_sorts_keys_bytewise, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_constraints_reject_only_the_register_overflow, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_tuned_space_stops_at_topk_32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_defaults_cover_every_bucket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_shape_and_dispatch_keys, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_topk_buckets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_fit_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_launch_choices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_names_are_readable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_render_values_are_the_template_names, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
