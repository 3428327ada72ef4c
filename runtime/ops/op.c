/* ops/op.c - the op descriptors, by id (ops/op_list.h). */
#include "ops/op.h"

#define ST_OP_ENTRY(name, NAME) [ST_OP_##NAME] = &st_##name##_op,
static const st_op_desc *const ops[ST_OP_COUNT] = {ST_OP_LIST(ST_OP_ENTRY)};
#undef ST_OP_ENTRY

const st_op_desc *st_op_desc_of(st_op_id op) { return op >= 0 && op < ST_OP_COUNT ? ops[op] : NULL; }

const char *st_op_name(st_op_id op) {
  const st_op_desc *d = st_op_desc_of(op);
  return d ? d->name : "?";
}
