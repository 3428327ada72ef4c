// included, and broken on line 2
constexpr int D = ${oops};
