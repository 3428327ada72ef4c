// A stand-in index_decode template for the generator tests: it uses every
// value the generator passes, and includes a header (whose text changes in a
// test to show that ids follow included files too).
#include "common.h"
constexpr int IS_FP8 = ${is_fp8};
constexpr int HEAD_DIM = ${head_dim};
constexpr int TOPK_CAP = ${topk};
constexpr int HEADS_PER_CTA = ${heads_per_cta};
constexpr int MAX_QLEN = ${max_qlen};
constexpr int THREADS = ${threads};
constexpr int UNITS = ${units_in_flight};
constexpr int ALGO_SPLIT = ${algo_split};
