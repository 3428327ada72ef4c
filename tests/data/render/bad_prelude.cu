#include "defaults/bad.cuh"
