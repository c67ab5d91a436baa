#include "qloom/perf/report_json.h"

#include "qloom/core/error.h"

namespace qloom::perf {
namespace {

const Field::Json& null_json() {
  static const Field::Json kNull;
  return kNull;
}

const char* type_name(const Field::Json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

}  // namespace

Field::Field(const Json& value, std::string path, const std::string& source)
    : value_(&value), path_(std::move(path)), source_(&source) {}

void Field::fail(const std::string& message) const {
  throw Error(ErrorKind::kInvalidInput, *source_, path_.empty() ? "/" : path_, message,
              "the session state is malformed; resume the session with the same `qloom perf` command "
              "(it rewrites state.json), or restore the file from the session's history");
}

Field Field::operator[](std::string_view key) const {
  const std::string child = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (!present()) return Field(null_json(), child, *source_);
  if (!value_->is_object()) fail(std::string("must be an object, found ") + type_name(*value_));
  const auto it = value_->find(key);
  return Field(it == value_->end() ? null_json() : *it, child, *source_);
}

Field Field::operator[](size_t index) const {
  const std::string child = path_ + "[" + std::to_string(index) + "]";
  const Json& a = array();
  return Field(index < a.size() ? a[index] : null_json(), child, *source_);
}

size_t Field::size() const {
  if (!present()) return 0;
  return array().size();
}

const Field::Json& Field::object() const {
  if (!present()) fail("required field is missing (or null)");
  if (!value_->is_object()) fail(std::string("must be an object, found ") + type_name(*value_));
  return *value_;
}

const Field::Json& Field::array() const {
  if (!present()) fail("required field is missing (or null)");
  if (!value_->is_array()) fail(std::string("must be an array, found ") + type_name(*value_));
  return *value_;
}

std::string Field::string() const {
  if (!present()) fail("required field is missing (or null)");
  if (!value_->is_string()) fail(std::string("must be a string, found ") + type_name(*value_));
  return value_->get<std::string>();
}

double Field::number() const {
  if (!present()) fail("required field is missing (or null)");
  if (!value_->is_number()) fail(std::string("must be a number, found ") + type_name(*value_));
  return value_->get<double>();
}

int64_t Field::integer() const {
  if (!present()) fail("required field is missing (or null)");
  if (!value_->is_number_integer()) fail(std::string("must be an integer, found ") + type_name(*value_));
  return value_->get<int64_t>();
}

bool Field::boolean() const {
  if (!present()) fail("required field is missing (or null)");
  if (!value_->is_boolean()) fail(std::string("must be a boolean, found ") + type_name(*value_));
  return value_->get<bool>();
}

std::string Field::one_of(std::initializer_list<std::string_view> allowed) const {
  const std::string s = string();
  std::string list;
  for (auto a : allowed) {
    if (s == a) return s;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  fail("'" + s + "' is not one of: " + list);
}

// Each optional accessor type-checks through its required twin, then
// returns the value as stored (an integer stays an integer).
Field::Json Field::opt_number() const { return present() ? (void(number()), *value_) : Json(); }
Field::Json Field::opt_integer() const { return present() ? (void(integer()), *value_) : Json(); }
Field::Json Field::opt_string() const { return present() ? (void(string()), *value_) : Json(); }
Field::Json Field::opt_bool() const { return present() ? (void(boolean()), *value_) : Json(); }
Field::Json Field::opt_object() const { return present() ? object() : Json(); }

}  // namespace qloom::perf
