# qloom_discover_tests(<target> <label> [PROPERTIES ...]): registers the
# GoogleTest cases of <target> with CTest under <label>, and the `full` ones
# under <label> and `full` as well. A case is in `full` when its suite, its
# test or its parameter instantiation is named Full... (FullSweep/RealScheme.X,
# RealScheme.FullX, FullRealScheme.X): the sweeps that add coverage but no
# new code path. `make test` leaves the `full` label out; `make test-full`
# runs it.
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
    PROPERTIES LABELS "${label};full" ${_q_PROPERTIES}
    DISCOVERY_TIMEOUT 60)
endfunction()
