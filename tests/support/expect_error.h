// catch_error(f): runs f, which must throw qloom::Error, and returns the error
// so a test can check its kind, file, item and message. Records a test failure
// (and returns a placeholder kInternal error) when f throws nothing.
#pragma once

#include <gtest/gtest.h>

#include "qloom/core/error.h"

namespace qloom::test {

template <class F>
Error catch_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a qloom::Error";
  return Error(ErrorKind::kInternal, "", "", "no error thrown");
}

}  // namespace qloom::test
