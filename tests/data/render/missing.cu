// a template that uses a name nobody gives
constexpr int A = ${n};
constexpr int C = ${absent};
