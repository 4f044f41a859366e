#pragma once
// An error answered to an HTTP client as OpenAI's JSON:
// {"error": {"message", "type", "param", "code"}}.
#include <stdexcept>
#include <string>

namespace vkmoe::serve {

struct ApiError : std::runtime_error {
  int status;         // HTTP status
  std::string code;   // e.g. "invalid_type", "context_length_exceeded"
  std::string param;  // the request field at fault; empty: none
  ApiError(int status, const std::string& message, std::string code, std::string param = "")
      : std::runtime_error(message), status(status), code(std::move(code)), param(std::move(param)) {}
  // "invalid_request_error" below 500, "server_error" from 500.
  const char* type() const { return status >= 500 ? "server_error" : "invalid_request_error"; }
};

}  // namespace vkmoe::serve
