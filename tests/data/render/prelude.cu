// a template that takes its constants from a prelude
#include "defaults/prelude.cuh"
constexpr int N = ST_P_N;
#include "inc/prelude_again.h"
