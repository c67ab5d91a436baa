// Progress callbacks into Python from library code that runs with the GIL
// released. Every event takes the GIL, checks for pending signals (Ctrl-C
// raises KeyboardInterrupt there), then calls the Python callable, if any.
// An exception on the Python side is kept, the library call is stopped by a
// CallbackAbort thrown back into it, and the binding re-raises the kept
// Python exception once the call has unwound: never a crash, never an
// exception lost inside the library.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include <pybind11/pybind11.h>

namespace qloom::python {

namespace py = pybind11;

// Thrown into the library to stop it after the Python side raised.
struct CallbackAbort : std::exception {
  const char* what() const noexcept override { return "stopped: the Python progress callback raised"; }
};

class PyProgress {
 public:
  // `fn`: a callable taking one dict, or None (signals are still checked).
  explicit PyProgress(py::object fn) : fn_(std::move(fn)) {}
  PyProgress(const PyProgress&) = delete;
  PyProgress& operator=(const PyProgress&) = delete;
  ~PyProgress() {
    py::gil_scoped_acquire gil;
    error_.reset();
    fn_ = py::object();
  }

  // Called without the GIL. `make` builds the event dict (with the GIL held).
  template <typename MakeEvent>
  void emit(MakeEvent&& make) {
    py::gil_scoped_acquire gil;
    if (error_) throw CallbackAbort();
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!fn_.is_none()) fn_(make());
    } catch (py::error_already_set& e) {
      error_ = std::make_unique<py::error_already_set>(std::move(e));
      throw CallbackAbort();
    }
  }

  bool failed() const { return error_ != nullptr; }

  // With the GIL held: raises the kept Python exception, if any.
  void rethrow_if_failed() {
    if (!error_) return;
    py::error_already_set e = std::move(*error_);
    error_.reset();
    throw e;
  }

 private:
  py::object fn_;
  std::unique_ptr<py::error_already_set> error_;
};

// Runs `work` without the GIL and returns its result; a Python exception kept
// by `progress` wins over whatever the library made of the abort (a
// CallbackAbort, an error it wrapped it in, or a result it returned anyway).
template <typename Work>
auto run_released(PyProgress& progress, Work&& work) {
  std::optional<decltype(work())> result;
  try {
    py::gil_scoped_release release;
    result.emplace(work());
  } catch (...) {
    progress.rethrow_if_failed();
    throw;
  }
  progress.rethrow_if_failed();
  return std::move(*result);
}

}  // namespace qloom::python
