constexpr int E = ${n;
