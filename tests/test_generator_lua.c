/* test_generator_lua.c - the generator's Lua modules on their own: the
 * template renderer (generator/render.lua), the space helpers
 * (generator/space.lua), the spaces, constraints and rules of index_decode,
 * sparse_attn_decode and sparse_attn (generator/ops/) and the suites
 * (generator/suites.lua). Each test runs Lua snippets in a fresh state whose
 * package.path is the generator directory. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_list.h"
#include "testutil.h"

#define GEN_DIR ST_SOURCE_DIR "/generator"
#define RENDER_DATA ST_SOURCE_DIR "/tests/data/render"
#define TEMPLATES_DIR ST_SOURCE_DIR "/templates"

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
  lua_pushstring(L, TEMPLATES_DIR);
  lua_setglobal(L, "TEMPLATES");
  /* OPS: the runtime's one list of op names, as the tuner passes it to
   * main.lua's new(). */
#define ST_OP_NAME(name, NAME) #name,
  static const char *const ops[] = {ST_OP_LIST(ST_OP_NAME)};
#undef ST_OP_NAME
  lua_createtable(L, (int)(sizeof ops / sizeof ops[0]), 0);
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    lua_pushstring(L, ops[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setglobal(L, "OPS");
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
  const int ok = strncmp(got, "ERROR: ", 7) == 0 && strstr(got, part);
  if (!ok) print_error("expected an error containing '%s', got: %s\n", part, got);
  free(got);
  assert_true(ok);
}

/* ---- render.lua --------------------------------------------------------- */

/* Text outside includes is copied as it is: there are no placeholders. */
static void test_render_inlines_each_include_once(void **state) {
  expect(*state, "return require('render').render(DATA, 'top.cu', {})",
         "// top: its text is copied as it is, ${braces} and all\n"
         "// ---- begin inc/one.h\n"
         "// one\n"
         "// ---- begin inc/two.h\n"
         "constexpr int B = 3;\n"
         "// ---- end inc/two.h\n"
         "// ---- already included: inc/two.h\n"
         "// ---- end inc/one.h\n"
         "#include <stdint.h>\n"
         "#include \"not_here.h\"\n"
         "// ---- already included: inc/one.h\n");
}

static void test_render_error_in_an_included_file_names_that_file(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'bad_include.cu', {n = 1, m = 2})",
                          "defaults/bad.cuh:3: a defaults file holds only");
}

/* Values with no prelude to carry them mean a template lost its include. */
static void test_render_values_without_a_prelude_are_an_error(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'top.cu', {n = 1, head_dim = 64})",
                          "template 'top.cu' includes no defaults/ file, so values head_dim, n have nowhere to go");
}

static void test_render_missing_template_is_an_error(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'nope.cu', {})",
                          "template 'nope.cu' not found under");
  expect_error_containing(*state, "return require('render').render(DATA, '../escape.cu', {})",
                          "is not a path under the templates directory");
}

/* The include of a defaults file becomes the prelude: its #define lines at
 * the variant's values, comments and guard left out; values it does not
 * name are ignored, and a later include of it is already done. */
static void test_render_writes_the_prelude_in_place_of_the_defaults(void **state) {
  expect(*state, "return require('render').render(DATA, 'prelude.cu', {n = 3, long_name_2 = -7, unused = 5})",
         "// a template that takes its constants from a prelude\n"
         "// ---- begin prelude defaults/prelude.cuh\n"
         "#define ST_P_N 3\n"
         "#define ST_P_LONG_NAME_2 -7\n"
         "// ---- end prelude defaults/prelude.cuh\n"
         "constexpr int N = ST_P_N;\n"
         "// ---- begin inc/prelude_again.h\n"
         "// a header that includes the prelude too, as headers read alone may\n"
         "// ---- already included: defaults/prelude.cuh\n"
         "// ---- end inc/prelude_again.h\n");
}

static void test_render_prelude_name_without_value_names_defaults_file_and_line(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'prelude.cu', {n = 3})",
                          "defaults/prelude.cuh:5: template parameter 'long_name_2' has no value");
}

static void test_render_prelude_values_are_integers(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'prelude.cu', {n = 3, long_name_2 = '4'})",
                          "defaults/prelude.cuh:5: template parameter 'long_name_2' is a string, not an integer");
  expect_error_containing(*state, "return require('render').render(DATA, 'prelude.cu', {n = 0.5, long_name_2 = 4})",
                          "defaults/prelude.cuh:4: template parameter 'n' is a float, not an integer");
}

static void test_render_defaults_file_holds_only_integer_defines(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'bad_prelude.cu', {n = 1, m = 2})",
                          "defaults/bad.cuh:3: a defaults file holds only '#define ST_P_<NAME> <integer>' lines");
  expect_error_containing(*state, "return require('render').render(DATA, 'twice.cu', {n = 1})",
                          "defaults/twice.cuh:2: ST_P_N is defined twice (first on line 1)");
}

static void test_render_refuses_a_second_prelude(void **state) {
  expect_error_containing(*state, "return require('render').render(DATA, 'two_preludes.cu', {n = 1, long_name_2 = 2})",
                          "two_preludes.cu:2: a second prelude, defaults/other.cuh (the first: defaults/prelude.cuh)");
}

/* Each template's defaults file (the prelude it compiles with as written)
 * holds a valid point of its op's space: the #define lines that rendering
 * the op's first default variant of that template writes, or, for a family
 * no default renders, the first kernel config of the space that renders it.
 * A mismatch prints the lines the file should hold. */
static void test_template_defaults_are_each_ops_first_default(void **state) {
  expect(*state,
         "local render = require('render')\n"
         "local gen = require('main').new(TEMPLATES, OPS)\n"
         "local out = {}\n"
         "for _, name in ipairs(gen.ops()) do\n"
         "  local op = require('ops.' .. name)\n"
         "  local function template_of(k) return op.template_of and op.template_of(k) or op.template end\n"
         "  local first, order = {}, {}\n"
         "  local function take(k)\n"
         "    local t = template_of(k)\n"
         "    if not first[t] then first[t] = k; order[#order + 1] = t end\n"
         "  end\n"
         "  for _, d in ipairs(op.defaults()) do take(d.kernel) end\n"
         "  for _, k in ipairs(op.kernel_space()) do take(k) end\n"
         "  for _, t in ipairs(order) do\n"
         "    local path = 'defaults/' .. t:gsub('%.cu$', '.cuh')\n"
         "    local text = render.render(TEMPLATES, t, op.render_values(first[t]))\n"
         "    local _, head_end = text:find('// ---- begin prelude ' .. path .. '\\n', 1, true)\n"
         "    local want = head_end and text:sub(head_end + 1, text:find('// ---- end prelude', head_end, true) - 1)\n"
         "    local f = assert(io.open(TEMPLATES .. '/' .. path))\n"
         "    local have = {}\n"
         "    for line in f:lines() do\n"
         "      if line:match('^#define ') then have[#have + 1] = line .. '\\n' end\n"
         "    end\n"
         "    f:close()\n"
         "    if want ~= table.concat(have) then\n"
         "      out[#out + 1] = string.format('%s should hold:\\n%s', path, tostring(want))\n"
         "    end\n"
         "  end\n"
         "end\n"
         "return #out == 0 and 'ok' or table.concat(out, '\\n')",
         "ok");
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

static void test_space_request_tokens_counts_repeated_items(void **state) {
  expect(*state, "return require('space').request_tokens('3:0*4;2:5;7:128*1')", "21");
  expect(*state, "return select(2, require('space').request_tokens('3:0*0'))",
         "shape field reqs=3:0*0 is not a list of q_len:prefix[*count]");
  expect(*state, "return select(2, require('space').request_tokens('3:0*'))",
         "shape field reqs=3:0* is not a list of q_len:prefix[*count]");
  expect(*state, "return select(2, require('space').request_tokens('1:0*4000;1:0*97'))",
         "shape field reqs=1:0*4000;1:0*97 lists more than 4096 requests");
}

/* ---- ops/index_decode.lua ----------------------------------------------- */

static void test_index_decode_constraints_reject_register_overflow_and_bulk_with_units(void **state) {
  /* Of the full product (11520 configs) exactly bf16 x head_dim 128 x
   * units_in_flight 8 breaks the register budget (5*3*4*2*2*3 = 720
   * configs), and bulk copies go only with units_in_flight 1 (the 5760 bulk
   * configs of units 2, 4 and 8, 480 of them also over the budget). */
  expect(*state,
         "local s, op = require('space'), require('ops.index_decode')\n"
         "local all = s.product(op.kernel_domains)\n"
         "local kept, rej = s.filter(all, op.constraint)\n"
         "for _, r in ipairs(rej) do\n"
         "  local p = r.point\n"
         "  local budget = p.dtype == 'bf16' and p.head_dim == 128 and p.units_in_flight == 8\n"
         "  local bulk = p.bulk_stages > 0 and p.units_in_flight ~= 1\n"
         "  if not (budget or bulk) then return 'wrongly rejected ' .. s.canonical(p) end\n"
         "  local why = bulk and 'must be 1' or 'budget of 128'\n"
         "  if not r.reason:find(why, 1, true) then return 'reason: ' .. r.reason end\n"
         "end\n"
         "return #all .. ' ' .. #kept .. ' ' .. #rej",
         "11520 5520 6000");
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
         "4416 32");
}

static void test_index_decode_defaults_cover_every_bucket(void **state) {
  expect(*state,
         "local s, op = require('space'), require('ops.index_decode')\n"
         "local out, wide = {}, 0\n"
         "for _, d in ipairs(op.defaults()) do\n"
         "  local k = d.kernel\n"
         "  assert(d.launch.splits == 0 and op.constraint(k))\n"
         "  if k.algo == 'single' then\n"
         "    assert(k.heads_per_cta == 1 and k.max_qlen == 4 and k.threads == 256 and k.units_in_flight == 2 and\n"
         "      k.bulk_stages == 0)\n"
         "    out[#out + 1] = k.dtype .. k.head_dim .. '.' .. k.topk\n"
         "  else\n"
         "    assert(k.algo == 'split' and k.bulk_stages == 2 and k.units_in_flight == 1 and\n"
         "      (k.max_qlen == 1 or k.max_qlen == 2 or k.max_qlen == 4))\n"
         "    local cols, fp8 = k.heads_per_cta * k.max_qlen, k.dtype == 'fp8'\n"
         "    local lo = k.heads_per_cta / 2\n"
         "    if k.heads_per_cta == 4 and k.max_qlen == 4 then lo = fp8 and 128 or 32 end\n"
         "    if k.threads == 128 then\n"
         "      assert(fp8 and ((k.heads_per_cta == 1 and d.load == nil) or (d.load[1] == lo and d.load[2] == 1e9)))\n"
         "    elseif fp8 then\n"
         "      -- 8 or more columns: 256 threads up to a load of 32\n"
         "      assert(k.threads == 256 and cols >= 8 and d.load[1] == lo and d.load[2] == 32)\n"
         "      wide = wide + 1\n"
         "    else\n"
         "      assert(k.threads == 256 and ((k.heads_per_cta == 1 and d.load == nil) or\n"
         "        (d.load[1] == lo and d.load[2] == 1e9)))\n"
         "    end\n"
         "  end\n"
         "end\n"
         "return #op.defaults() .. ' ' .. #out .. ' ' .. wide .. ': ' .. table.concat(out, ' ')",
         "220 20 20: bf1664.4 bf1664.8 bf1664.16 bf1664.32 bf1664.64 bf16128.4 bf16128.8 bf16128.16 bf16128.32 "
         "bf16128.64 fp864.4 fp864.8 fp864.16 fp864.32 fp864.64 fp8128.4 fp8128.8 fp8128.16 fp8128.32 "
         "fp8128.64");
}

#define SHAPE_B8                                                                                                       \
  "local s = {dtype = 'bf16', D = 128, H = 2, qlen = 1, topk = 16, init = 1, ['local'] = 2, B = 8, "                   \
  "ctx = 32768, lens = 'full'}\n"
#define KERNEL_K16                                                                                                     \
  "local k = {dtype = 'bf16', head_dim = 128, topk = 16, heads_per_cta = 1, max_qlen = 1, threads = 256, "             \
  "units_in_flight = 2, bulk_stages = 0, algo = 'single'}\n"

static void test_index_decode_shape_and_dispatch_keys(void **state) {
  expect(*state, "local op = require('ops.index_decode')\n" SHAPE_B8 "return op.shape_key(s)",
         "index_decode:B=8,D=128,H=2,ctx=32768,dtype=bf16,init=1,lens=full,local=2,qlen=1,topk=16");
  expect(*state, "local op = require('ops.index_decode')\n" SHAPE_B8 "return op.dispatch_key(s)",
         "index_decode:B=8,D=128,H=2,ctx=32768,dtype=bf16,qlen=1,topk=16");
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
  expect(*state,
         "local op = require('ops.index_decode')\n" KERNEL_K16
         "k.units_in_flight = 1; k.bulk_stages = 4\n"
         "return op.variant_name(k, {splits = 8})",
         "index_decode.bf16.d128.k16.h1.q1.t256.u1.b4.single/s8");
}

static void test_index_decode_render_values_are_the_template_names(void **state) {
  expect(*state,
         "local s, op = require('space'), require('ops.index_decode')\n" KERNEL_K16
         "k.dtype = 'fp8'; k.algo = 'split'\n"
         "return s.canonical(op.render_values(k))",
         "algo_split=1,bulk_stages=0,head_dim=128,heads_per_cta=1,is_fp8=1,max_qlen=1,threads=256,topk=16,"
         "units_in_flight=2");
}

/* ---- ops/sparse_attn_decode.lua ----------------------------------------- */

static void test_sparse_attn_decode_constraints_reject_only_the_shared_memory_overflow(void **state) {
  /* k_regs 1 and 2 are refused for bf16 caches (they read raw fp8 rows),
   * tma 1 everywhere but head_dim 128 in bf16 and fp8 k_regs 2, pv_dims 1
   * everywhere but tma with one m tile, 1 or 2 stages and 4 or 8 warps. Of
   * the other configs without clusters, head_dim 256 breaks the 220 KiB
   * budget with 2 or more stages (3 or more with k_regs, whose fp8 kernels
   * widen one tile, not two) and, with fewer, where 16 warps (group 32, two q
   * tiles, warps_n 8) combine their fp32 states; bf16 head_dim 128 breaks
   * it with 4 stages (256 KiB of tiles). Threads and tokens per warp never
   * bind inside the domains. A cluster of 16 is kept only for single
   * kernels of <= 128 threads (pv_dims: 256) of which two fit an SM, the
   * push merge's receive area included; a cluster of 8 only for single kernels of <= 2
   * stages; a cluster of 4 only for single pv_dims kernels. */
  expect(*state,
         "local s, op = require('space'), require('ops.sparse_attn_decode')\n"
         "local all = s.product(op.kernel_domains)\n"
         "local kept, rej = s.filter(all, op.constraint)\n"
         "local n1, nkr, ntma, npvd, nring, k16, k8, k4 = 0, 0, 0, 0, 0, 0, 0, 0\n"
         "local function ring_fits(p) return p.pv_dims == 1 and p.stages == 1 end\n"
         "local function tma_fits(p) return p.head_dim == 128 and (p.dtype == 'bf16' or p.k_regs == 2) end\n"
         "local function pvd_fits(p)\n"
         "  return p.tma == 1 and p.group <= 16 and p.stages <= 2 and (p.warps_n == 4 or p.warps_n == 8) end\n"
         "for _, p in ipairs(kept) do\n"
         "  if p.k_regs >= 1 and p.dtype ~= 'fp8' then return 'wrongly kept ' .. s.canonical(p) end\n"
         "  if p.tma >= 1 and not tma_fits(p) then return 'wrongly kept ' .. s.canonical(p) end\n"
         "  if p.pv_dims >= 1 and not pvd_fits(p) then return 'wrongly kept ' .. s.canonical(p) end\n"
         "  if p.ring_extra >= 1 and not ring_fits(p) then return 'wrongly kept ' .. s.canonical(p) end\n"
         "  if p.cluster == 16 then\n"
         "    k16 = k16 + 1\n"
         "    if p.algo ~= 'single' or 32 * p.warps_n * ((p.group + 15) // 16) > 128 * (1 + p.pv_dims) then\n"
         "      return 'wrongly kept ' .. s.canonical(p) end\n"
         "  end\n"
         "  if p.cluster == 8 then\n"
         "    k8 = k8 + 1\n"
         "    if p.algo ~= 'single' or p.stages > 2 then return 'wrongly kept ' .. s.canonical(p) end\n"
         "  end\n"
         "  if p.cluster == 4 then\n"
         "    k4 = k4 + 1\n"
         "    if p.algo ~= 'single' or p.pv_dims ~= 1 then return 'wrongly kept ' .. s.canonical(p) end\n"
         "  end\n"
         "end\n"
         "for _, r in ipairs(rej) do\n"
         "  local p = r.point\n"
         "  if p.k_regs >= 1 and p.dtype == 'bf16' then\n"
         "    nkr = nkr + 1\n"
         "    if not r.reason:find('needs dtype fp8', 1, true) then return 'reason: ' .. r.reason end\n"
         "  elseif p.tma >= 1 and not tma_fits(p) then\n"
         "    ntma = ntma + 1\n"
         "    if not r.reason:find('tma=1 copies whole rows', 1, true) then return 'reason: ' .. r.reason end\n"
         "  elseif p.pv_dims >= 1 and not pvd_fits(p) then\n"
         "    npvd = npvd + 1\n"
         "    if not r.reason:find('pv_dims=1 needs tma 1', 1, true) then return 'reason: ' .. r.reason end\n"
         "  elseif p.ring_extra >= 1 and not ring_fits(p) then\n"
         "    nring = nring + 1\n"
         "    if not r.reason:find('ring_extra=1 needs pv_dims 1', 1, true) then return 'reason: ' .. r.reason end\n"
         "  elseif p.cluster == 1 then\n"
         "    n1 = n1 + 1\n"
         "    local full = p.k_regs >= 1 and 3 or 2\n"
         "    if not ((p.head_dim == 256 and (p.stages >= full or (p.group == 32 and p.warps_n == 8))) or\n"
         "            (p.head_dim == 128 and p.dtype == 'bf16' and p.stages == 4)) then\n"
         "      return 'wrongly rejected ' .. s.canonical(p) end\n"
         "    if not r.reason:find('bytes exceeds 225280', 1, true) then return 'reason: ' .. r.reason end\n"
         "  elseif p.cluster == 4 then\n"
         "    if not r.reason:find('cluster 4 needs algo single and pv_dims 1', 1, true) then\n"
         "      return 'reason: ' .. r.reason end\n"
         "  elseif p.cluster == 8 then\n"
         "    if not r.reason:find('cluster 8 needs algo single and <= 2 stages', 1, true) and\n"
         "        not r.reason:find('bytes exceeds 225280', 1, true) then return 'reason: ' .. r.reason end\n"
         "  elseif not r.reason:find('cluster 16 needs algo single', 1, true) and\n"
         "      not r.reason:find('bytes exceeds 225280', 1, true) then\n"
         "    return 'reason: ' .. r.reason\n"
         "  end\n"
         "end\n"
         "return #all .. ' ' .. (#kept - k16 - k8 - k4) .. ' ' .. n1 .. ' ' .. nkr .. ' ' .. ntma .. ' ' .. npvd ..\n"
         "  ' ' .. nring .. ' ' .. k16 .. ' ' .. k8 .. ' ' .. k4",
         "82944 1692 444 27648 23040 15488 8224 303 516 60");
#define CONSTRAINT(kernel)                                                                                             \
  "local op = require('ops.sparse_attn_decode')\n"                                                                     \
  "local ok, why = op.constraint(" kernel ")\n"                                                                        \
  "return tostring(ok) .. ': ' .. tostring(why)"
  expect(
      *state,
      CONSTRAINT("{dtype = 'fp8', head_dim = 256, group = 32, warps_n = 8, stages = 1, algo = 'single', cluster = 1}"),
      "false: shared memory of stages=1 (fp8, head_dim 256, 2 m tiles) = 281088 bytes exceeds 225280");
  expect(
      *state,
      CONSTRAINT("{dtype = 'bf16', head_dim = 256, group = 1, warps_n = 2, stages = 2, algo = 'split', cluster = 1}"),
      "false: shared memory of stages=2 (bf16, head_dim 256, 1 m tiles) = 270848 bytes exceeds 225280");
  /* Within the budget: fp8 rows, scales and widened tiles of one 256-wide
   * block (206336 bytes), two 128-wide stages with 16 warps (141824). */
  expect(
      *state,
      CONSTRAINT("{dtype = 'fp8', head_dim = 256, group = 16, warps_n = 8, stages = 1, algo = 'single', cluster = 1}"),
      "true: nil");
  expect(
      *state,
      CONSTRAINT("{dtype = 'fp8', head_dim = 256, group = 32, warps_n = 4, stages = 1, algo = 'single', cluster = 1}"),
      "true: nil");
  expect(
      *state,
      CONSTRAINT("{dtype = 'fp8', head_dim = 128, group = 32, warps_n = 8, stages = 2, algo = 'split', cluster = 1}"),
      "true: nil");
  /* Outside the domains, the other two limits. */
  expect(
      *state,
      CONSTRAINT("{dtype = 'bf16', head_dim = 64, group = 32, warps_n = 16, stages = 1, algo = 'single', cluster = 1}"),
      "false: 32*warps_n*m_tiles = 32*16*2 = 1024 threads exceed 512");
  expect(
      *state,
      CONSTRAINT("{dtype = 'bf16', head_dim = 64, group = 16, warps_n = 16, stages = 1, algo = 'single', cluster = 1}"),
      "false: warps_n=16 leaves 8 tokens per warp, fewer than 16");
#undef CONSTRAINT
}

static void test_sparse_attn_decode_kernel_space_is_the_constrained_product(void **state) {
  expect(*state,
         "local s, op = require('space'), require('ops.sparse_attn_decode')\n"
         "local n, seen = 0, {}\n"
         "for _, k in ipairs(op.kernel_space()) do\n"
         "  local id = s.canonical(k)\n"
         "  assert(op.check_kernel(k), id)\n"
         "  assert(not seen[id], id); seen[id] = true; n = n + 1\n"
         "end\n"
         "return n",
         "2571");
}

#define SAD_KERNEL                                                                                                     \
  "local k = {dtype = 'bf16', head_dim = 128, group = 16, warps_n = 4, stages = 2, algo = 'single', cluster = 1, "     \
  "k_regs = 0, tma = 0, pv_dims = 0, ring_extra = 0, scale_ptr = 1}\n"
#define SAD_SHAPE                                                                                                      \
  "local s = {dtype = 'bf16', B = 8, ctx = 32768, D = 128, Hq = 32, Hkv = 2, qlen = 1, topk = 16, scale = 'none', "    \
  "layout = 'pages2', lens = 'full', sel = 'random', lse = 0}\n"
/* Runs `pre`, then `change`, then returns "ok: why" of `call`. */
#define OK_WHY(pre, change, call)                                                                                      \
  snprintf(code, sizeof code, "%s%s\nlocal ok, why = %s\nreturn tostring(ok) .. ': ' .. tostring(why)", pre, change,   \
           call)

static void test_sparse_attn_decode_check_kernel_refuses_bad_parameters(void **state) {
  lua_State *L = *state;
  const char *pre = "local op = require('ops.sparse_attn_decode')\n" SAD_KERNEL;
  char code[2048];
#define CHECK(change, want)                                                                                            \
  OK_WHY(pre, change, "op.check_kernel(k)");                                                                           \
  expect(L, code, want)
  CHECK("", "true: nil");
  CHECK("k.group = nil", "false: kernel parameter 'group' is missing");
  CHECK("k.algo = nil", "false: kernel parameter 'algo' is missing");
  CHECK("k.threads = 256", "false: 'threads' is not a kernel parameter of sparse_attn_decode");
  CHECK("k.m_tiles = 1", "false: 'm_tiles' is not a kernel parameter of sparse_attn_decode"); /* rendered only */
  CHECK("k.group = 3", "false: kernel parameter group=3 is not one of its values");
  CHECK("k.warps_n = 16", "false: kernel parameter warps_n=16 is not one of its values");
  CHECK("k.stages = '2'", "false: kernel parameter stages=2 is not one of its values");
  CHECK("k.dtype = 'fp16'", "false: kernel parameter dtype=fp16 is not one of its values");
  CHECK("k.algo = 'merge'", "false: kernel parameter algo=merge is not one of its values");
  CHECK("k.head_dim = 256",
        "false: shared memory of stages=2 (bf16, head_dim 256, 1 m tiles) = 270848 bytes exceeds 225280");
  CHECK("k.k_regs = 1", "false: k_regs=1 reads raw fp8 rows: it needs dtype fp8");
  CHECK("k.k_regs = 2", "false: k_regs=2 reads raw fp8 rows: it needs dtype fp8");
  CHECK("k.k_regs = 3", "false: kernel parameter k_regs=3 is not one of its values");
  CHECK("k.k_regs = nil", "false: kernel parameter 'k_regs' is missing");
  CHECK("k.tma = 1", "true: nil");
  CHECK("k.dtype = 'fp8'; k.k_regs = 1; k.tma = 1",
        "false: tma=1 copies whole rows of head_dim 128, bf16 or raw fp8: it needs head_dim 128 and with fp8 k_regs 2 "
        "(fp8, k_regs 1, head_dim 128)");
  CHECK("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1", "true: nil");
  CHECK("k.dtype = 'fp8'; k.k_regs = 2; k.head_dim = 64; k.tma = 1",
        "false: tma=1 copies whole rows of head_dim 128, bf16 or raw fp8: it needs head_dim 128 and with fp8 k_regs 2 "
        "(fp8, k_regs 2, head_dim 64)");
  CHECK("k.tma = 2", "false: kernel parameter tma=2 is not one of its values");
  CHECK("k.pv_dims = nil", "false: kernel parameter 'pv_dims' is missing");
  CHECK("k.ring_extra = nil", "false: kernel parameter 'ring_extra' is missing");
  CHECK("k.ring_extra = 2", "false: kernel parameter ring_extra=2 is not one of its values");
  CHECK("k.scale_ptr = nil", "false: kernel parameter 'scale_ptr' is missing");
  CHECK("k.scale_ptr = 0", "false: kernel parameter scale_ptr=0 is not one of its values");
  CHECK("k.tma = 1; k.pv_dims = 1; k.stages = 1; k.ring_extra = 1", "true: nil");
  CHECK("k.tma = 1; k.pv_dims = 1; k.ring_extra = 1", "false: ring_extra=1 needs pv_dims 1 and 1 stage (pv_dims 1, 2 stages)");
  CHECK("k.tma = 1; k.stages = 1; k.ring_extra = 1", "false: ring_extra=1 needs pv_dims 1 and 1 stage (pv_dims 0, 1 stages)");
  CHECK("k.pv_dims = 2", "false: kernel parameter pv_dims=2 is not one of its values");
  CHECK("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; k.pv_dims = 1", "true: nil");
  CHECK("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; k.pv_dims = 1; k.warps_n = 8", "true: nil");
  CHECK("k.pv_dims = 1", "false: pv_dims=1 needs tma 1, group <= 16, 1 or 2 stages and 4 or 8 warps (tma 0, group 16, "
                         "2 stages, 4 warps)");
  CHECK("k.tma = 1; k.pv_dims = 1", "true: nil"); /* bf16 */
  CHECK("k.tma = 1; k.pv_dims = 1; k.stages = 1", "true: nil");
  CHECK("k.tma = 1; k.pv_dims = 1; k.stages = 3",
        "false: pv_dims=1 needs tma 1, group <= 16, 1 or 2 stages and 4 or 8 warps (tma 1, group 16, 3 stages, 4 warps)");
  CHECK("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; k.pv_dims = 1; k.group = 32",
        "false: pv_dims=1 needs tma 1, group <= 16, 1 or 2 stages and 4 or 8 warps (tma 1, group 32, 2 stages, 4 warps)");
  CHECK("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; k.pv_dims = 1; k.warps_n = 2",
        "false: pv_dims=1 needs tma 1, group <= 16, 1 or 2 stages and 4 or 8 warps (tma 1, group 16, 2 stages, 2 warps)");
#undef CHECK
#define LAUNCH(launch, want)                                                                                           \
  OK_WHY(pre, "", "op.check_launch(" launch ")");                                                                      \
  expect(L, code, want)
  LAUNCH("{splits = 0}", "true: nil");
  LAUNCH("{splits = 64}", "true: nil");
  LAUNCH("{splits = 65}", "false: launch parameter splits=65 is outside 0..64");
  LAUNCH("{splits = -1}", "false: launch parameter splits=-1 is outside 0..64");
  LAUNCH("{}", "false: launch parameter splits=nil is outside 0..64");
  LAUNCH("{splits = 2, chunks = 4}", "false: 'chunks' is not a launch parameter of sparse_attn_decode");
#undef LAUNCH
}

static void test_sparse_attn_decode_defaults_satisfy_the_constraints(void **state) {
  /* The fallback of every dtype x head_dim x group (one stage, no cluster,
   * no bulk copies, for any load): every shape of the contract has one. */
  expect(*state,
         "local s, op = require('space'), require('ops.sparse_attn_decode')\n"
         "local have = {}\n"
         "for _, d in ipairs(op.defaults()) do\n"
         "  local k = d.kernel\n"
         "  assert(op.check_kernel(k) and op.check_launch(d.launch), s.canonical(k))\n"
         "  assert(k.algo == 'single' and (d.load == nil or d.load[1] < d.load[2]))\n"
         "  if d.load == nil and k.warps_n == 4 and k.stages == 1 and k.cluster == 1 and k.tma == 0 and\n"
         "      d.launch.splits == 0 then\n"
         "    have[k.dtype .. '.d' .. k.head_dim .. '.g' .. k.group] = true\n"
         "  end\n"
         "end\n"
         "local n, missing = 0, {}\n"
         "for _, p in ipairs(s.product({dtype = op.kernel_domains.dtype, head_dim = op.kernel_domains.head_dim,\n"
         "    group = op.kernel_domains.group})) do\n"
         "  local id = p.dtype .. '.d' .. p.head_dim .. '.g' .. p.group\n"
         "  if have[id] then n = n + 1 else missing[#missing + 1] = id end\n"
         "end\n"
         "return #op.defaults() .. ' ' .. n .. ' missing: ' .. table.concat(missing, ' ')",
         "90 36 missing: ");
}

static void test_sparse_attn_decode_shape_and_dispatch_keys(void **state) {
  /* The peer's facts are about the shape, in neither key. */
  expect(*state,
         "local op = require('ops.sparse_attn_decode')\n" SAD_SHAPE
         "s.peer_us = 10.5; s.peer_device = 'GPU X'\nreturn op.shape_key(s)",
         "sparse_attn_decode:B=8,D=128,Hkv=2,Hq=32,ctx=32768,dtype=bf16,layout=pages2,lens=full,lse=0,qlen=1,"
         "scale=none,sel=random,topk=16");
  expect(*state,
         "local op = require('ops.sparse_attn_decode')\n" SAD_SHAPE
         "s.peer_us = 10.5; s.peer_device = 'GPU X'\nreturn op.dispatch_key(s)",
         "sparse_attn_decode:B=8,D=128,Hkv=2,Hq=32,dtype=bf16,qlen=1,topk=16");
}

static void test_sparse_attn_decode_check_shape_names_what_is_wrong(void **state) {
  lua_State *L = *state;
  const char *pre = "local op = require('ops.sparse_attn_decode')\n" SAD_SHAPE;
  char code[2048];
#define SHAPE(change, want)                                                                                            \
  OK_WHY(pre, change, "op.check_shape(s)");                                                                            \
  expect(L, code, want)
  SHAPE("", "true: nil");
  SHAPE("s.dtype = 'fp8'; s.scale = 'tensor'; s.layout = 'interleaved'; s.lens = '0;1;127;128;129;4133;32768;9'",
        "true: nil");
  SHAPE("s.sel = 'holes'; s.lse = 1; s.qlen = 4; s.topk = 64; s.peer_us = '7.6'; s.peer_device = 'NVIDIA H100'",
        "true: nil");
  SHAPE("s.dtype = 'fp8'; s.sel = 'local'", "true: nil"); /* fp8 may come unscaled */
  SHAPE("s.Hq = 64", "true: nil");                        /* a group of 32 */
  SHAPE("s.Hq = 66", "false: Hq/Hkv = 66/2 = 33 q heads per kv head exceed 32");
  SHAPE("s.Hq = 30; s.Hkv = 4", "false: Hq=30 is not a multiple of Hkv=4");
  SHAPE("s.Hkv = 0", "false: shape field Hkv=0 is outside 1..65535");
  SHAPE("s.lse = 2", "false: shape field lse=2 is outside 0..1");
  SHAPE("s.qlen = 5", "false: shape field qlen=5 is outside 1..4");
  SHAPE("s.topk = 65", "false: shape field topk=65 is outside 1..64");
  SHAPE("s.D = 8", "false: shape field D=8 is outside 16..512");
  SHAPE("s.scale = 'scalar'", "false: shape field scale=scalar needs an fp8 cache (bf16 takes none)");
  SHAPE("s.dtype = 'fp8'; s.scale = 'block'", "false: shape field scale=block is not none, scalar, tensor or one");
  SHAPE("s.dtype = 'fp16'", "false: shape field dtype=fp16 is not bf16 or fp8");
  SHAPE("s.layout = 'pages'", "false: shape field layout=pages is not pages2 or interleaved");
  SHAPE("s.sel = 'top'", "false: shape field sel=top is not random, holes or local");
  SHAPE("s.lens = '1;2;3'", "false: shape field lens=1;2;3 lists 3 lengths for B=8");
  SHAPE("s.lens = 'short'", "false: shape field lens=short is not full, mixed or a list of lengths in 0..ctx");
  SHAPE("s.sel = nil", "false: shape field 'sel' is missing");
  SHAPE("s.H = 2", "false: 'H' is not a shape field of sparse_attn_decode");
  SHAPE("s.peer_us = 0", "false: shape field peer_us=0 is not a positive time");
  SHAPE("s.peer_us = 7.6", "false: shape fields peer_us and peer_device go together (the peer's time and the device "
                           "it was measured on)");
  SHAPE("s.peer_device = 'NVIDIA H100'", "false: shape fields peer_us and peer_device go together (the peer's time "
                                         "and the device it was measured on)");
  SHAPE("s.peer_us = 7.6; s.peer_device = ''", "false: shape field peer_device= is not a device name");
#undef SHAPE
}

static void test_sparse_attn_decode_fit_rules(void **state) {
  lua_State *L = *state;
  const char *pre = "local op = require('ops.sparse_attn_decode')\n" SAD_SHAPE SAD_KERNEL;
  char code[2048];
#define FITS(change, is_default, want)                                                                                 \
  OK_WHY(pre, change, "op.fits(k, s, " is_default ")");                                                                \
  expect(L, code, want)
  FITS("", "false", "true: nil");
  FITS("", "true", "true: nil");
  FITS("k.dtype = 'fp8'", "false", "false: dtype differs");
  FITS("s.dtype = 'fp8'; s.scale = 'scalar'", "true", "false: dtype differs");
  FITS("k.head_dim = 64", "false", "false: head_dim differs");
  FITS("k.group = 8", "true", "false: group 8 is not Hq/Hkv = 32/2");
  FITS("s.Hkv = 4", "false", "false: group 16 is not Hq/Hkv = 32/4");
  FITS("s.Hkv = 4; k.group = 8", "false", "true: nil");
  FITS("s.Hq = 16; s.Hkv = 1", "false", "true: nil"); /* the group must match, not the head counts */
  FITS("s.qlen = 4; s.topk = 64; s.B = 128", "false", "true: nil");
  /* pv_dims: not with per-token scales */
  FITS("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; k.pv_dims = 1; s.dtype = 'fp8'; s.scale = 'scalar'", "false",
       "true: nil");
  FITS("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; k.pv_dims = 1; s.dtype = 'fp8'; s.scale = 'tensor'", "false",
       "false: pv_dims=1 takes no per-token scales (scale tensor): another variant runs them");
  FITS("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; s.dtype = 'fp8'; s.scale = 'tensor'", "false", "true: nil");
  /* One scale each in device memory: pv_dims runs them, unless recorded
   * before it read the scales there (no scale_ptr). */
  FITS("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; k.pv_dims = 1; s.dtype = 'fp8'; s.scale = 'one'", "false",
       "true: nil");
  FITS("k.dtype = 'fp8'; k.k_regs = 2; k.tma = 1; k.pv_dims = 1; k.scale_ptr = nil; s.dtype = 'fp8'; s.scale = 'one'",
       "false", "false: pv_dims=1 takes no per-token scales (scale one): another variant runs them");
#undef FITS
}

static void test_sparse_attn_decode_launch_choices(void **state) {
  lua_State *L = *state;
  const char *pre = "local op = require('ops.sparse_attn_decode')\n" SAD_SHAPE SAD_KERNEL;
  char code[2048];
#define WORTH(change, splits, want)                                                                                    \
  OK_WHY(pre, change, "op.worth(k, {splits = " #splits "}, s, false)");                                                \
  expect(L, code, want)
  WORTH("", 0, "true: nil");
  WORTH("", 1, "true: nil");
  WORTH("", 16, "true: nil"); /* one block per split */
  WORTH("", 32, "false: splits=32 exceed topk=16");
  WORTH("", 3, "false: splits=3 is not a timed choice");
  WORTH("k.algo = 'split'", 0, "false: algo split needs explicit splits >= 2");
  WORTH("k.algo = 'split'", 1, "false: algo split needs splits >= 2");
  WORTH("k.algo = 'split'", 2, "true: nil");
  WORTH("s.topk = 64", 64, "true: nil"); /* 8 * 1 * 2 * 64 = 1024 CTAs <= 8 waves of 132 */
  WORTH("s.topk = 64; s.qlen = 2", 64, "false: 2048 CTAs exceed 8 waves of 132 SMs");
  WORTH("s.topk = 64; s.qlen = 2", 32, "true: nil");
  WORTH("s.B = 128", 4, "true: nil");
  WORTH("s.B = 128", 8, "false: 2048 CTAs exceed 8 waves of 132 SMs");
  WORTH("s.B = 128; s.topk = 4", 8, "false: splits=8 exceed topk=4");
  WORTH("s.B = 65535; s.Hq = 32; s.Hkv = 32; k.group = 1", 0, "true: nil"); /* auto: the launcher's grid */
  /* clusters of 4 and 8: for their merge, of splits that divide them */
  WORTH("k.cluster = 4", 0, "false: cluster 4 merges explicit splits 2 .. 4");
  WORTH("k.cluster = 4", 4, "true: nil");
  WORTH("k.cluster = 4", 8, "false: cluster 4 merges 2 .. 4 splits, not 8");
  WORTH("k.cluster = 8", 8, "true: nil");
  WORTH("k.cluster = 8", 1, "false: cluster 8 merges 2 .. 8 splits, not 1");
#undef WORTH
}

#undef OK_WHY

static void test_sparse_attn_decode_names_are_readable(void **state) {
  expect(*state,
         "local op = require('ops.sparse_attn_decode')\n" SAD_KERNEL
         "return op.variant_name(k, {splits = 8}) .. ' ' .. op.variant_name(k, {splits = 0})",
         "sparse_attn_decode.bf16.d128.g16.w4.s2.single/s8 sparse_attn_decode.bf16.d128.g16.w4.s2.single/auto");
}

static void test_sparse_attn_decode_render_values_are_the_template_names(void **state) {
  expect(*state,
         "local s, op = require('space'), require('ops.sparse_attn_decode')\n" SAD_KERNEL
         "local a = s.canonical(op.render_values(k))\n"
         "k.dtype = 'fp8'; k.algo = 'split'; k.group = 32; k.warps_n = 8; k.head_dim = 64\n"
         "return a .. ' | ' .. s.canonical(op.render_values(k))",
         "algo_split=0,cluster=1,group=16,head_dim=128,is_fp8=0,k_regs=0,m_tiles=1,pv_dims=0,ring_extra=0,stages=2,tma=0,warps_n=4 | "
         "algo_split=1,cluster=1,group=32,head_dim=64,is_fp8=1,k_regs=0,m_tiles=2,pv_dims=0,ring_extra=0,stages=2,tma=0,warps_n=8");
}

/* ---- ops/sparse_attn.lua ------------------------------------------------ */

#define SA_TILE                                                                                                        \
  "local k = {algo = 'tile', dtype = 'bf16', head_dim = 128, group = 16, tokens = 4, topk = 16, stages = 1,\n"          \
  "           part = 'bf16', ctas = 1, mtiles = 1, mma = 'sync'}\n"
#define SA_BLOCK                                                                                                       \
  "local b = {algo = 'block', dtype = 'bf16', head_dim = 128, group = 16, tokens = 8, topk = 16, stages = 1,\n"         \
  "           part = 'bf16', ctas = 2, mtiles = 2, mma = 'sync'}\n"

/* The token-tile variants keep the names (so the identities) they had
 * before the block family; block variants name every parameter and their
 * chunk; each family renders its own template. */
static void test_sparse_attn_names_and_templates_of_the_two_families(void **state) {
  expect(*state,
         "local op = require('ops.sparse_attn')\n" SA_TILE SA_BLOCK
         "local m2 = {}; for key, v in pairs(k) do m2[key] = v end; m2.mtiles = 2\n"
         "local wg = {}; for key, v in pairs(b) do wg[key] = v end; wg.mtiles = 1; wg.ctas = 1; wg.mma = 'wgmma'\n"
         "local wg2 = {}; for key, v in pairs(wg) do wg2[key] = v end; wg2.mtiles = 2; wg2.ctas = 2\n"
         "return table.concat({op.variant_name(k, {}), op.variant_name(m2, {}), op.variant_name(b, {chunk = 0}),\n"
         "  op.variant_name(b, {chunk = 256}), op.variant_name(wg, {chunk = 0}), op.variant_name(wg2, {chunk = 0}),\n"
         "  op.template_of(k), op.template_of(b),\n"
         "  op.render_values(wg).wgmma .. op.render_values(b).wgmma, op.render_values(wg).warps,\n"
         "  op.render_values(wg2).warps}, ' ')",
         "sparse_attn.bf16.d128.g16.t4.k16.s1 sparse_attn.bf16.d128.g16.t4.k16.s1.m2 "
         "sparse_attn.bf16.d128.g16.block.t8.s1.m2.pbf16.c2/auto sparse_attn.bf16.d128.g16.block.t8.s1.m2.pbf16.c2/q256 "
         "sparse_attn.bf16.d128.g16.block.t8.s1.wg.pbf16.c1/auto sparse_attn.bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/auto "
         "sparse_attn.cu sparse_attn_block.cu 10 8 4");
}

/* Each family's fixed values, and the block family's limits: 4 tokens at
 * least, two CTAs only where their shared memory fits, two m-tiles only
 * with a whole warp's 32 rows and head_dim <= 128. */
static void test_sparse_attn_constraints_of_the_two_families(void **state) {
  expect(*state,
         "local op = require('ops.sparse_attn')\n" SA_TILE SA_BLOCK
         "local function why(base, key, v)\n"
         "  local c = {}; for kk, vv in pairs(base) do c[kk] = vv end; c[key] = v\n"
         "  local ok, reason = op.constraint(c); return ok and 'ok' or reason\n"
         "end\n"
         "return table.concat({why(k, 'ctas', 2), why(b, 'topk', 32), why(b, 'tokens', 2),\n"
         "  why(b, 'stages', 2), why(b, 'head_dim', 256), why(k, 'tokens', 1), why(b, 'dtype', 'fp8')}, ' | ')",
         "tile variants have no partials and budget one CTA an SM (part bf16, ctas 1) | "
         "block variants hold no selection lists (topk 16) | "
         "block variants take at least 4 tokens a block (fewer read each block nearly once a token) | "
         "two CTAs of 196608 bytes of shared memory do not fit an SM | "
         "two m-tiles a warp hold 2 x 128 output registers a lane | "
         "ok | "
         "two CTAs of 132096 bytes of shared memory do not fit an SM");
  expect(*state,
         "local op = require('ops.sparse_attn')\n" SA_TILE
         "k.mtiles = 2; k.tokens = 1; local ok, why = op.constraint(k); return why",
         "tokens*group = 16 q rows fill less than one warp's two m-tiles");
  /* wgmma: block-major only, head_dim 128, whole warpgroups of 64 rows a
   * pass, at most 256 threads an SM; two passes (mtiles 2) with one stage
   * (fp8 too: widened in place), 128 threads for 128 rows. */
  expect(*state,
         "local op = require('ops.sparse_attn')\n" SA_TILE SA_BLOCK
         "b.mma = 'wgmma'; b.mtiles = 1; b.ctas = 1\n"
         "local function why(base, key, v)\n"
         "  local c = {}; for kk, vv in pairs(base) do c[kk] = vv end; c[key] = v\n"
         "  local ok, reason = op.constraint(c); return ok and 'ok' or reason\n"
         "end\n"
         "local b2 = {}; for kk, vv in pairs(b) do b2[kk] = vv end; b2.mtiles = 2\n"
         "return table.concat({why(b, 'stages', 2), why(k, 'mma', 'wgmma'), why(b, 'head_dim', 64),\n"
         "  why(b, 'mtiles', 2), why(b, 'group', 2), why(b, 'ctas', 2), why(b2, 'ctas', 2), why(b2, 'stages', 2),\n"
         "  why(b2, 'dtype', 'fp8'), why(b2, 'tokens', 4)}, ' | ')",
         "ok | wgmma is a block-major kernel (tile variants: mma sync) | "
         "wgmma variants: head_dim 128 (one m64n128 product for O) | "
         "ok | "
         "tokens*group = 16 q rows are not whole warpgroups of 64 in 1 passes | "
         "2 CTAs of 256 wgmma threads: a thread holds S and O (128 floats), at most 256 threads an SM | "
         "ok | "
         "wgmma passes (mtiles 2): one stage (their q halves are the double buffer) | "
         "ok | "
         "tokens*group = 64 q rows are not whole warpgroups of 64 in 2 passes");
}

/* Block variants fit any topk (their lists are in the workspace) and take
 * a chunk launch parameter; a chunk that holds the whole batch is not
 * timed again (chunk 0 does the same). Tile variants have no launch
 * parameter and keep their topk buckets. */
static void test_sparse_attn_fit_and_launch_rules(void **state) {
  expect(*state,
         "local op = require('ops.sparse_attn')\n" SA_TILE SA_BLOCK
         "local s = {B = 1000, D = 128, Hkv = 2, Hq = 32, dtype = 'bf16', topk = 40}\n"
         "local fk, fkwhy = op.fits(k, s, false)\n"
         "local n = #op.launch_space(b) .. '/' .. #op.launch_space(k) .. '/' .. tostring(next(op.launch_space(k)[1]))\n"
         "local w1, w1why = op.worth(b, {chunk = 1024}, s, false)\n"
         "local w2 = op.worth(b, {chunk = 256}, s, false)\n"
         "local big = {B = 4096, D = 128, Hkv = 2, Hq = 32, dtype = 'bf16', topk = 16}\n"
         "local w3, w3why = op.worth(b, {chunk = 256, overlap = 1, bulk = 8}, big, false)\n"
         "local c1, c1why = op.check_launch({chunk = 100})\n"
         "local c2, c2why = op.check_launch({splits = 2})\n"
         "local c3, c3why = op.check_launch({chunk = 0, overlap = 2})\n"
         "local c5, c5why = op.check_launch({chunk = 2048, overlap = 1, bulk = 17})\n"
         "local c6, c6why = op.check_launch({chunk = 3072, overlap = 1, bulk = 8, first = 100})\n"
         "local o1 = op.worth(b, {chunk = 0, overlap = 1}, s, false)\n"
         "local small = {B = 100, D = 128, Hkv = 2, Hq = 32, dtype = 'bf16', topk = 40}\n"
         "local o2, o2why = op.worth(b, {chunk = 0, overlap = 1}, small, false)\n"
         "return table.concat({tostring(op.fits(b, s, false)), tostring(fk), fkwhy, n, tostring(w1), w1why,\n"
         "  tostring(w2), tostring(op.check_launch({chunk = 256})), c1why, c2why, c3why,\n"
         "  tostring(op.check_launch({chunk = 256, overlap = 1})), tostring(o1), o2why,\n"
         "  op.variant_name(b, {chunk = 256, overlap = 1}), op.variant_name(b, {chunk = 0}), c5why,\n"
         "  op.variant_name(b, {chunk = 2048, overlap = 1, bulk = 8}), c6why,\n"
         "  op.variant_name(b, {chunk = 3072, overlap = 1, bulk = 8, first = 1024}), tostring(w3), w3why}, ' | ')",
         "true | false | topk 40 is not in the bucket of capacity 16 | 12/1/nil | false | "
         "chunk 1024 holds the whole batch of 1000 tokens (chunk 0 does the same) | true | true | "
         "launch parameter chunk=100 is not a multiple of 64 in 0..1048576 | "
         "'splits' is not a launch parameter of sparse_attn | launch parameter overlap=2 is not 0 or 1 | true | "
         "true | the batch of 100 tokens is one chunk: nothing to overlap | "
         "sparse_attn.bf16.d128.g16.block.t8.s1.m2.pbf16.c2/q256.ov | sparse_attn.bf16.d128.g16.block.t8.s1.m2.pbf16.c2/auto | "
         "launch parameter bulk=17 is not an integer in 0..16 | "
         "sparse_attn.bf16.d128.g16.block.t8.s1.m2.pbf16.c2/q2048.ov.b8 | "
         "launch parameter first=100 is not a multiple of 64 in 0..1048576 | "
         "sparse_attn.bf16.d128.g16.block.t8.s1.m2.pbf16.c2/q3072.ov.b8.f1024 | false | "
         "chunk 256 of a batch of 4096 tokens: 16 chunks' fixed costs");
}

/* dense: on two-pass wgmma kernels alone (7 launches more, three of them
 * dense 2: the sum counts them twice), named ".dn" and ".dn2", and not timed
 * where no request starts below topk x 128. */
static void test_sparse_attn_dense_launches(void **state) {
  expect(*state,
         "local op = require('ops.sparse_attn')\n" SA_BLOCK
         "local w = {algo = 'block', dtype = 'bf16', head_dim = 128, group = 16, tokens = 8, topk = 16, stages = 1,\n"
         "           part = 'bf16', ctas = 2, mtiles = 2, mma = 'wgmma'}\n"
         "local f = {}\n"
         "for key, v in pairs(w) do f[key] = v end\n"
         "f.dtype = 'fp8'\n"
         "local function dense(k)\n"
         "  local n = 0\n"
         "  for _, l in ipairs(op.launch_space(k)) do n = n + (l.dense or 0) end\n"
         "  return n\n"
         "end\n"
         "local early = {B = 4096, D = 128, Hkv = 2, Hq = 32, dtype = 'bf16', topk = 16, reqs = '4096:0'}\n"
         "local late = {B = 8192, D = 128, Hkv = 2, Hq = 32, dtype = 'bf16', topk = 16, reqs = '8192:57344'}\n"
         "local mixed = {B = 300, D = 128, Hkv = 2, Hq = 32, dtype = 'bf16', topk = 16, reqs = '200:4133;100:2000'}\n"
         "local l = {chunk = 3072, overlap = 1, bulk = 8, first = 1024, dense = 1}\n"
         "local w2, w2why = op.worth(w, l, late, false)\n"
         "local c1, c1why = op.check_launch({chunk = 0, dense = 3})\n"
         "return table.concat({dense(w), dense(b), dense(f), op.variant_name(w, l), tostring(op.worth(w, l, early, false)),\n"
         "  tostring(w2), w2why, tostring(op.worth(w, {chunk = 0, dense = 1}, mixed, false)), c1why}, ' | ')",
         "10 | 0 | 10 | sparse_attn.bf16.d128.g16.block.t8.s1.wg2.pbf16.c2/q3072.ov.b8.f1024.dn | true | false | "
         "no request of 8192:57344 starts below position 2048: no dense tile | true | "
         "launch parameter dense=3 is not 0, 1 or 2");
}

#undef SA_TILE
#undef SA_BLOCK

/* ---- suites.lua --------------------------------------------------------- */

static void test_every_suite_row_passes_its_ops_check_shape(void **state) {
  expect(*state,
         "local suites = require('suites')\n"
         "local out = {}\n"
         "for _, name in ipairs(suites.names()) do\n"
         "  local count = {}\n"
         "  for i, row in ipairs(suites.get(name)) do\n"
         "    local ok, why = require('ops.' .. row.op).check_shape(row.shape)\n"
         "    if not ok then return name .. ' row ' .. i .. ': ' .. why end\n"
         "    count[row.op] = (count[row.op] or 0) + 1\n"
         "  end\n"
         "  out[#out + 1] = string.format('%s %d+%d+%d+%d+%d+%d+%d+%d+%d', name, count.index_decode or 0,\n"
         "    count.sparse_attn_decode or 0, count.sparse_attn or 0, count.index_topk or 0,\n"
         "    count.mla_sparse_decode or 0, count.dsa_index_decode or 0, count.mla_sparse_prefill or 0,\n"
         "    count.dsa_index_logits or 0, count.dsa_index_topk or 0)\n"
         "end\n"
         "return table.concat(out, ', ')",
         "anchors 9+9+3+3+0+0+0+0+0, dsv32-decode 0+0+0+0+15+18+0+0+0, dsv32-prefill 0+0+0+0+0+0+12+6+10, "
         "engine-decode 32+32+0+0+0+0+0+0+0, engine-prefill 0+0+12+0+0+0+0+0+0, m3-decode 30+13+0+0+0+0+0+0+0, "
         "m3-prefill 0+0+7+4+0+0+0+0+0, smoke 3+1+1+1+2+1+0+0+0");
}

/* Random engine-like shapes: the same for a seed, other for another, within
 * their stated ranges, paired (indexer and attention of one step or batch
 * share batch, dtype, heads and topk), and none a named suite's. */
static void test_random_shapes_are_reproducible_and_within_their_ranges(void **state) {
  expect(*state,
         "local suites = require('suites')\n"
         "local function key(row) return require('ops.' .. row.op).shape_key(row.shape) end\n"
         "local named = {}\n"
         "for _, name in ipairs({'anchors', 'm3-decode', 'm3-prefill', 'smoke'}) do\n"
         "  for _, row in ipairs(suites.get(name)) do named[key(row)] = true end\n"
         "end\n"
         "local function same(a, b)\n"
         "  if #a ~= #b then return false end\n"
         "  for i = 1, #a do if key(a[i]) ~= key(b[i]) then return false end end\n"
         "  return true\n"
         "end\n"
         "local d1, d2, d3 = suites.get('random-decode:11:200'), suites.get('random-decode:11:200'),\n"
         "  suites.get('random-decode:12:200')\n"
         "if not same(d1, d2) then return 'decode: one seed, two lists' end\n"
         "if same(d1, d3) then return 'decode: two seeds, one list' end\n"
         "local seen = {qlen = {}, H = {}, dtype = {}, lens = {}}\n"
         "local minB, maxB, minT, maxT, minC, maxC = 1e9, 0, 1e9, 0, 1e9, 0\n"
         "for i = 1, #d1, 2 do\n"
         "  local a, b = d1[i].shape, d1[i + 1].shape\n"
         "  if d1[i].op ~= 'index_decode' or d1[i + 1].op ~= 'sparse_attn_decode' then return 'decode: not paired' end\n"
         "  if a.B ~= b.B or a.ctx ~= b.ctx or a.topk ~= b.topk or a.H ~= b.Hkv or a.qlen ~= b.qlen or a.dtype ~= b.dtype\n"
         "    or a.lens ~= b.lens or b.Hq ~= 16 * b.Hkv then return 'decode step ' .. i .. ' differs' end\n"
         "  if a.B * a.ctx > 4 * 1024 * 1024 or a.ctx % 128 ~= 0 then return 'decode: too large ' .. key(d1[i]) end\n"
         "  if named[key(d1[i])] or named[key(d1[i + 1])] then return 'decode: a named suite holds ' .. key(d1[i]) end\n"
         "  minB, maxB = math.min(minB, a.B), math.max(maxB, a.B)\n"
         "  minT, maxT = math.min(minT, a.topk), math.max(maxT, a.topk)\n"
         "  minC, maxC = math.min(minC, a.ctx), math.max(maxC, a.ctx)\n"
         "  seen.qlen[a.qlen], seen.H[a.H], seen.dtype[a.dtype], seen.lens[a.lens] = true, true, true, true\n"
         "end\n"
         "if minB ~= 1 or maxB < 128 or maxB > 256 then return 'decode batches ' .. minB .. '..' .. maxB end\n"
         "if minT ~= 4 or maxT ~= 32 then return 'decode topk ' .. minT .. '..' .. maxT end\n"
         "if minC > 2048 or maxC < 131072 or maxC > 262144 then return 'decode contexts ' .. minC .. '..' .. maxC end\n"
         "for _, f in ipairs({{'qlen', 4}, {'H', 4}, {'dtype', 2}, {'lens', 2}}) do\n"
         "  local n = 0\n"
         "  for _ in pairs(seen[f[1]]) do n = n + 1 end\n"
         "  if n ~= f[2] then return 'decode ' .. f[1] .. ': ' .. n .. ' values' end\n"
         "end\n"
         "local p = suites.get('random-prefill:11:100')\n"
         "local maxQ, prefixes = 0, 0\n"
         "for i = 1, #p, 2 do\n"
         "  local a, b = p[i].shape, p[i + 1].shape\n"
         "  if p[i].op ~= 'index_prefill' or p[i + 1].op ~= 'sparse_attn' or a.reqs ~= b.reqs then return 'prefill: not paired' end\n"
         "  if a.B < 1 or a.B > 32768 then return 'prefill tokens ' .. a.B end\n"
         "  local n = 0\n"
         "  for q, pre in a.reqs:gmatch('(%d+):(%d+)') do n = n + 1; if tonumber(pre) > 0 then prefixes = prefixes + 1 end end\n"
         "  if n < 1 or n > 4 then return 'prefill requests ' .. n end\n"
         "  if named[key(p[i])] or named[key(p[i + 1])] then return 'prefill: a named suite holds ' .. key(p[i]) end\n"
         "  maxQ = math.max(maxQ, a.B)\n"
         "end\n"
         "if maxQ < 8192 or prefixes == 0 then return 'prefill: largest ' .. maxQ .. ', ' .. prefixes .. ' prefixes' end\n"
         "return 'ok'",
         "ok");
  expect_error_containing(*state, "return require('suites').get('random-decode:1:0')", "count 0 is not an integer in 1..1000");
  expect_error_containing(*state, "return require('suites').get('random-prefill:1:1001')", "1..1000");
  expect(*state, "return tostring(require('suites').get('random-other:1:3'))", "nil");
}

static void test_suites_hold_the_sparse_attn_decode_anchor_rows(void **state) {
  /* The peer's attention rows hold at any context: here ctx 32768, peer_us
   * the lower end of its range;
   * m3-decode holds every decode anchor row, m3-prefill every prefill one. */
  expect(*state,
         "local suites = require('suites')\n"
         "local function key(row) return require('ops.' .. row.op).shape_key(row.shape) end\n"
         "local out, m3 = {}, {}\n"
         "for _, row in ipairs(suites.get('m3-decode')) do m3[key(row)] = true end\n"
         "for _, row in ipairs(suites.get('m3-prefill')) do m3[key(row)] = true end\n"
         "for _, row in ipairs(suites.get('anchors')) do\n"
         "  local sh = row.shape\n"
         "  if row.op == 'sparse_attn_decode' then\n"
         "    assert(sh.ctx == 32768 and sh.D == 128 and sh.Hq == 32 and sh.Hkv == 2 and sh.qlen == 1)\n"
         "    assert(sh.layout == 'pages2' and sh.lens == 'full' and sh.sel == 'random' and sh.lse == 0)\n"
         "    assert(sh.scale == (sh.dtype == 'fp8' and 'scalar' or 'none'))\n"
         "    out[#out + 1] = string.format('%s:%d:k%d:%.1f', sh.dtype, sh.B, sh.topk, sh.peer_us)\n"
         "  end\n"
         "  assert(m3[key(row)], 'anchor missing from the m3 suites: ' .. key(row))\n"
         "end\n"
         "return table.concat(out, ' ')",
         "bf16:1:k16:7.1 bf16:8:k16:10.2 bf16:32:k16:25.8 bf16:128:k16:73.7 fp8:1:k16:9.2 fp8:32:k16:25.2 "
         "fp8:128:k16:80.7 bf16:32:k4:11.5 bf16:32:k32:41.8");
}

static void test_every_sparse_attn_decode_suite_shape_has_tuned_variants_and_a_default(void **state) {
  /* The variant lists without rendering: what each shape would be timed with. */
  expect(*state,
         "local suites, variants = require('suites'), require('variants')\n"
         "local op = require('ops.sparse_attn_decode')\n"
         "local out = {}\n"
         "for _, name in ipairs(suites.names()) do\n"
         "  local shapes = {}\n"
         "  for _, row in ipairs(suites.get(name)) do\n"
         "    if row.op == op.name then shapes[#shapes + 1] = row.shape end\n"
         "  end\n"
         "  local list = variants.list(op, shapes)\n"
         "  for _, sh in ipairs(shapes) do\n"
         "    local tuned, defaults = 0, 0\n"
         "    for _, v in ipairs(list) do\n"
         "      if op.applies(v.kernel, v.launch, sh, v.is_default) then\n"
         "        if v.is_default then defaults = defaults + 1 else tuned = tuned + 1 end\n"
         "      end\n"
         "    end\n"
         "    if tuned < 1 or defaults < 1 then\n"
         "      return string.format('%s %s: %d tuned, %d defaults', name, op.shape_key(sh), tuned, defaults) end\n"
         "  end\n"
         "  out[#out + 1] = name .. ' ' .. #list\n"
         "end\n"
         "return table.concat(out, ', ')",
         "anchors 1173, dsv32-decode 90, dsv32-prefill 90, engine-decode 1353, engine-prefill 90, m3-decode 1173, m3-prefill 90, "
         "smoke 300");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_render_inlines_each_include_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_error_in_an_included_file_names_that_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_values_without_a_prelude_are_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_missing_template_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_writes_the_prelude_in_place_of_the_defaults, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_prelude_name_without_value_names_defaults_file_and_line, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_render_prelude_values_are_integers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_defaults_file_holds_only_integer_defines, setup, teardown),
      cmocka_unit_test_setup_teardown(test_render_refuses_a_second_prelude, setup, teardown),
      cmocka_unit_test_setup_teardown(test_template_defaults_are_each_ops_first_default, setup, teardown),
      cmocka_unit_test_setup_teardown(test_space_product_is_complete_and_ordered, setup, teardown),
      cmocka_unit_test_setup_teardown(test_space_filter_keeps_and_gives_reasons, setup, teardown),
      cmocka_unit_test_setup_teardown(test_space_canonical_sorts_keys_bytewise, setup, teardown),
      cmocka_unit_test_setup_teardown(test_space_request_tokens_counts_repeated_items, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_constraints_reject_register_overflow_and_bulk_with_units, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_tuned_space_stops_at_topk_32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_defaults_cover_every_bucket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_shape_and_dispatch_keys, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_topk_buckets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_fit_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_launch_choices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_names_are_readable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_decode_render_values_are_the_template_names, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_constraints_reject_only_the_shared_memory_overflow, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_kernel_space_is_the_constrained_product, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_check_kernel_refuses_bad_parameters, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_defaults_satisfy_the_constraints, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_shape_and_dispatch_keys, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_check_shape_names_what_is_wrong, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_fit_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_launch_choices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_names_are_readable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_names_and_templates_of_the_two_families, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_constraints_of_the_two_families, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_fit_and_launch_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_dense_launches, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sparse_attn_decode_render_values_are_the_template_names, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_suite_row_passes_its_ops_check_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_random_shapes_are_reproducible_and_within_their_ranges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_suites_hold_the_sparse_attn_decode_anchor_rows, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_sparse_attn_decode_suite_shape_has_tuned_variants_and_a_default,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
