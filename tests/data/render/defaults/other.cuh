#define ST_P_N 1
