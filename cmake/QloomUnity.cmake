# Build-time levers for a from-scratch build (make demo, CI): most of a
# translation unit's cost here is parsing the same heavy headers
# (nlohmann/json, CLI11, the standard library) and instantiating the same
# json templates, not compiling qloom's own code. Two levers cut it:
#
# - unity batches: the sources of one area (the folder under the target's root,
#   e.g. src/qloom/agent) are compiled a few at a time as one translation unit.
#   Batches never mix areas, so a name clash can only come from neighbours in
#   one room, and each area's files stay together in error messages.
# - a precompiled header of the heavy, stable headers every area includes.
#
# QLOOM_UNITY=OFF gives one translation unit per file (what an editor or
# clang-tidy sees; every file must compile alone either way — the unity build
# only concatenates them).
option(QLOOM_UNITY "Compile each area's sources in unity batches (faster fresh builds)" ON)
set(QLOOM_UNITY_BATCH 8 CACHE STRING "Source files per unity translation unit")
option(QLOOM_PCH "Precompile the heavy third-party and standard headers" ON)

# qloom_unity_batches(<target> <root> [batch]): group the target's sources under
# <root> by their first folder below it, [batch] (default QLOOM_UNITY_BATCH)
# files per group. Sources
# with their own compile options or definitions are left out of the batches
# (they must not lend those options to their neighbours).
function(qloom_unity_batches target root)
  if(NOT QLOOM_UNITY)
    return()
  endif()
  set(_size ${QLOOM_UNITY_BATCH})
  if(ARGC GREATER 2)
    set(_size ${ARGV2})
  endif()
  get_target_property(_srcs ${target} SOURCES)
  foreach(_src IN LISTS _srcs)
    get_filename_component(_abs "${_src}" ABSOLUTE)
    if(NOT _abs MATCHES "\\.cpp$")
      continue()
    endif()
    get_source_file_property(_opts "${_abs}" COMPILE_OPTIONS)
    get_source_file_property(_defs "${_abs}" COMPILE_DEFINITIONS)
    if(_opts OR _defs OR _abs MATCHES "/engine/native/" OR
       _abs MATCHES "_(avx2|avx512|scalar|ref|kernels)\\.cpp$")
      set_source_files_properties("${_abs}" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      continue()
    endif()
    file(RELATIVE_PATH _rel "${root}" "${_abs}")
    if(_rel MATCHES "^\\.\\.")
      set(_area "other")
    else()
      string(REGEX REPLACE "/.*" "" _area "${_rel}")
      if(_area STREQUAL _rel)
        set(_area "top")
      endif()
    endif()
    string(MAKE_C_IDENTIFIER "${_area}" _area)
    if(NOT DEFINED _n_${_area})
      set(_n_${_area} 0)
    endif()
    math(EXPR _batch "${_n_${_area}} / ${_size}")
    math(EXPR _n_${_area} "${_n_${_area}} + 1")
    set_source_files_properties("${_abs}" TARGET_DIRECTORY ${target} PROPERTIES
                                UNITY_GROUP "${target}_${_area}_${_batch}")
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
endfunction()

# qloom_heavy_pch(<target> [header...]): precompile nlohmann/json and the
# standard headers that nearly every qloom file includes, plus [header...].
function(qloom_heavy_pch target)
  if(NOT QLOOM_PCH)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE
    <algorithm> <array> <cmath> <cstdint> <cstring> <filesystem> <functional> <map>
    <memory> <optional> <set> <sstream> <string> <string_view> <unordered_map>
    <utility> <variant> <vector>
    <nlohmann/json.hpp> ${ARGN})
endfunction()
