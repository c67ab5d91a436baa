# Writes generated/qloom/build_info.h: version and build flags, recorded in reports.
string(TOUPPER "${CMAKE_BUILD_TYPE}" _qloom_bt)
set(QLOOM_BUILD_FLAGS "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_qloom_bt}}")
string(STRIP "${QLOOM_BUILD_FLAGS}" QLOOM_BUILD_FLAGS)
if(QLOOM_SANITIZE)
  string(APPEND QLOOM_BUILD_FLAGS " sanitize=address,undefined")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/build_info.h.in
               ${PROJECT_BINARY_DIR}/generated/qloom/build_info.h @ONLY)
