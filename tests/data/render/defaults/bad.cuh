// a defaults file with an expression where an integer belongs
#define ST_P_N 1
#define ST_P_M (ST_P_N + 1)
