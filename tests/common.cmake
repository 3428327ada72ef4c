# common/: what every part shares.
st_add_test(NAME test_path_folder LABEL cpu SOURCES test_path_folder.c LIBS st_common)
