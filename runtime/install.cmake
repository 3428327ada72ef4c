# `cmake --install`: libsparsetune (with its SONAME links), sparsetune.h, a
# CMake package (find_package(sparsetune 0.2 CONFIG) -> sparsetune::sparsetune)
# and a pkg-config file (sparsetune.pc). Both describe the tree relative to
# where they lie, so an installed prefix can be moved.
set(ST_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sparsetune)

install(TARGETS sparsetune EXPORT sparsetune-targets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/include/sparsetune.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT sparsetune-targets NAMESPACE sparsetune:: DESTINATION ${ST_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/sparsetune-config.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/sparsetune-config.cmake INSTALL_DESTINATION ${ST_CMAKE_DIR})
# 0.x: a new minor version may change the ABI, so only 0.2.* satisfies 0.2.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sparsetune-config-version.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sparsetune-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/sparsetune-config-version.cmake DESTINATION ${ST_CMAKE_DIR})

# The .pc file finds the prefix from its own folder (${pcfiledir}).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "sparsetune.pc needs CMAKE_INSTALL_LIBDIR relative to the prefix, not ${CMAKE_INSTALL_LIBDIR}")
endif()
file(RELATIVE_PATH ST_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" ST_PC_TO_PREFIX "${ST_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/sparsetune.pc.in ${CMAKE_CURRENT_BINARY_DIR}/sparsetune.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sparsetune.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
