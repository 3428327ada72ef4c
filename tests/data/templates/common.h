// common.h - shared by the stand-in template.
constexpr int BLOCK_TOKENS = 128;
