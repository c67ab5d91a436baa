#include "qloom/serve/api_error.h"

#include <utility>

namespace qloom::serve {

ApiError::ApiError(int status, std::string message, std::string type, std::string param,
                   std::string code)
    : std::runtime_error(std::move(message)),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::ordered_json ApiError::body() const {
  nlohmann::ordered_json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) e["param"] = param_;
  if (!code_.empty()) e["code"] = code_;
  return nlohmann::ordered_json{{"error", e}};
}

void throw_bad_request(const std::string& message, const std::string& param, const std::string& code) {
  throw ApiError(400, message, "invalid_request_error", param, code);
}

ApiError not_found_error(const std::string& message, const std::string& code) {
  return ApiError(404, message, "not_found_error", {}, code);
}

ApiError unauthorized_error(const std::string& message) {
  return ApiError(401, message, "authentication_error", {}, "invalid_api_key");
}

ApiError overloaded_error(const std::string& message) {
  return ApiError(429, message, "rate_limit_error", {}, "rate_limit_exceeded");
}

ApiError internal_error(const std::string& message) {
  return ApiError(500, message, "server_error", {}, "internal_error");
}

}  // namespace qloom::serve
