// included, and including a broken defaults file
#include "../defaults/bad.cuh"
