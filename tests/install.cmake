# `cmake --install` into a temporary prefix, consumed as a team outside the
# project would: the library exports exactly the header's functions, a
# consumer builds through find_package and through pkg-config and runs, and
# the installed `sparsetune` finds its generator and templates.
if(TARGET sparsetune AND TARGET sparsetune_cli)
  add_test(NAME test_install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh ${CMAKE_BINARY_DIR}
                                     ${PROJECT_SOURCE_DIR})
  set(ST_INSTALL_TEST_ENV
    CMAKE_COMMAND=${CMAKE_COMMAND}
    CC=${CMAKE_C_COMPILER}
    ST_SANITIZE_FLAGS=${ST_SANITIZE_FLAGS} # empty unless ST_SANITIZE
    ST_INSTALL_BINDIR=${CMAKE_INSTALL_BINDIR}
    ST_INSTALL_LIBDIR=${CMAKE_INSTALL_LIBDIR}
    ST_INSTALL_INCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR}
    ST_INSTALL_DATADIR=${CMAKE_INSTALL_DATADIR})
  set_tests_properties(test_install PROPERTIES LABELS cpu ENVIRONMENT "${ST_INSTALL_TEST_ENV}")
endif()
