# qloom_discover_tests(<target> <label> [PROPERTIES ...]): registers the
# GoogleTest cases of <target> with CTest under <label>, and the `full` ones
# under <label> and `full`. A case is in `full` when its suite, its test or
# its parameter instantiation is named Full... (FullFirstWave/RealScheme.X,
# RealAlgorithms.FullX, FullSuite.X): the sweeps that add coverage but no new
# code path. `make test` leaves the `full` label out; `make test-full` runs it.
include(GoogleTest)
set(QLOOM_FULL_FILTER "Full*:*.Full*:*/Full*")
function(qloom_discover_tests target label)
  cmake_parse_arguments(_q "" "" "PROPERTIES" ${ARGN})
  gtest_discover_tests(${target}
    TEST_FILTER "*-${QLOOM_FULL_FILTER}"
    PROPERTIES LABELS "${label}" ${_q_PROPERTIES}
    DISCOVERY_TIMEOUT 60)
  gtest_discover_tests(${target}
    TEST_FILTER "${QLOOM_FULL_FILTER}"
    TEST_LIST ${target}_FULL_TESTS
    PROPERTIES LABELS "${label}" ${_q_PROPERTIES}
    DISCOVERY_TIMEOUT 60)
  # gtest_discover_tests flattens a list-valued property, so the second label
  # is added by a file CTest includes after the discovered tests.
  set(_labels ${CMAKE_CURRENT_BINARY_DIR}/${target}_full_labels.cmake)
  file(WRITE ${_labels}
       "if(${target}_FULL_TESTS)\n"
       "  set_tests_properties(\${${target}_FULL_TESTS} PROPERTIES LABELS \"${label};full\")\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_labels})
endfunction()
