// defaults/index_decode.cuh - the stand-in template's constants.
#pragma once
#define ST_P_IS_FP8 0
#define ST_P_HEAD_DIM 64
#define ST_P_TOPK 4
#define ST_P_HEADS_PER_CTA 1
#define ST_P_MAX_QLEN 4
#define ST_P_THREADS 256
#define ST_P_UNITS_IN_FLIGHT 2
#define ST_P_ALGO_SPLIT 0
#define ST_P_BULK_STAGES 0
