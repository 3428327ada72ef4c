// defaults of prelude.cu: comments and the guard stay out of the prelude
#pragma once

#define ST_P_N 1
#define ST_P_LONG_NAME_2 -2
