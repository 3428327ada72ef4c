#define ST_P_N 1
#define ST_P_N 2
