/* ops/harness_list.c - the tuner's harnesses, one per op of the runtime's
 * list (runtime/ops/op_list.h). */
#include <string.h>

#include "op_harness.h"
#include "ops/op_list.h"

#define ST_HARNESS_ENTRY(name, NAME) &st_##name##_harness,
static const st_op_harness *const all[] = {ST_OP_LIST(ST_HARNESS_ENTRY)};
#undef ST_HARNESS_ENTRY

const st_op_harness *st_harness_find(const char *op) {
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i]->op, op) == 0) return all[i];
  return NULL;
}
