// serve::ApiError — an HTTP error answered with an OpenAI-style body:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// Statuses (as OpenAI answers them): 400 invalid_request_error for malformed
// JSON, bad or missing parameters, and a prompt + max_tokens longer than the
// model's context (code "context_length_exceeded", param "prompt" or
// "messages"); 401 authentication_error (code "invalid_api_key"); 404
// not_found_error for an unknown route or model (code "model_not_found");
// 405 for a known route with the wrong method; 413 for a body over the
// server's payload limit; 429 rate_limit_error (code "rate_limit_exceeded")
// over --max-concurrency; 500 server_error for a bug (never expected).
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace qloom::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string param = {},
           std::string code = {});

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // The OpenAI body; "param" and "code" are null when empty.
  nlohmann::ordered_json body() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// Shorthands for the common cases.
[[noreturn]] void throw_bad_request(const std::string& message, const std::string& param = {},
                                    const std::string& code = {});
ApiError not_found_error(const std::string& message, const std::string& code = {});
ApiError unauthorized_error(const std::string& message);
ApiError overloaded_error(const std::string& message);
ApiError internal_error(const std::string& message);

}  // namespace qloom::serve
