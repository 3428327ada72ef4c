-- luacheck's settings for the generator and scripts/*.lua (scripts/lint): Lua 5.4, as the
-- tuner embeds it; lines as long as clang-format's.
std = "lua54"
max_line_length = 120
