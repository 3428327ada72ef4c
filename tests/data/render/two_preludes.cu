#include "defaults/prelude.cuh"
#include "defaults/other.cuh"
