#include "defaults/twice.cuh"
