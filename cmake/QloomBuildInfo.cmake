# Writes generated/qloom/build_info.h: version and build flags, recorded in reports.
string(TOUPPER "${CMAKE_BUILD_TYPE}" _qloom_bt)
set(QLOOM_BUILD_FLAGS "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_qloom_bt}}")
string(STRIP "${QLOOM_BUILD_FLAGS}" QLOOM_BUILD_FLAGS)
if(QLOOM_SANITIZE)
  string(APPEND QLOOM_BUILD_FLAGS " sanitize=address,undefined")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/build_info.h.in
               ${PROJECT_BINARY_DIR}/generated/qloom/build_info.h @ONLY)
# generated/qloom/git_commit.h: the commit being built, refreshed on every
# build (rewritten only when it changes); libqloom depends on this target.
add_custom_target(qloom_git_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DOUT=${PROJECT_BINARY_DIR}/generated/qloom/git_commit.h -P ${PROJECT_SOURCE_DIR}/cmake/git_commit.cmake
  BYPRODUCTS ${PROJECT_BINARY_DIR}/generated/qloom/git_commit.h
  VERBATIM)
