// A stand-in index_decode template for the generator tests: its defaults
// file names every value the generator passes, and it includes a header
// (whose text changes in a test to show that ids follow included files too).
#include "common.h"
#include "defaults/index_decode.cuh"
constexpr int IS_FP8 = ST_P_IS_FP8;
constexpr int HEAD_DIM = ST_P_HEAD_DIM;
constexpr int TOPK_CAP = ST_P_TOPK;
constexpr int HEADS_PER_CTA = ST_P_HEADS_PER_CTA;
constexpr int MAX_QLEN = ST_P_MAX_QLEN;
constexpr int THREADS = ST_P_THREADS;
constexpr int UNITS = ST_P_UNITS_IN_FLIGHT;
constexpr int ALGO_SPLIT = ST_P_ALGO_SPLIT;
constexpr int BULK_STAGES = ST_P_BULK_STAGES;
