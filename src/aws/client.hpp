// A client of AWS JSON-protocol services (DynamoDB): SigV4-signed POSTs over a pool of
// keep-alive connections (SignedPost), with retries. Thread-safe.
#pragma once

#include "aws/sigv4.hpp"
#include "deviceshadow/json.hpp"

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace deviceshadow::aws {

struct ClientOptions {
  std::string endpoint;  // "https://dynamodb.eu-north-1.amazonaws.com", "http://127.0.0.1:8000"
  std::string region = "us-east-1";
  std::string service = "dynamodb";
  std::string target_prefix = "DynamoDB_20120810.";
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds request_timeout{5000};
  int max_attempts = 6;  // for throttling, 5xx and connection failures
  std::chrono::milliseconds backoff_base{25};  // the first retry waits between half of it and it (backoff.hpp)
  std::chrono::milliseconds backoff_max{2000};
};

// A failed call. `type` is the error's __type without its namespace (e.g.
// "ConditionalCheckFailedException"); transport failures have status 0.
class AwsError : public std::runtime_error {
 public:
  AwsError(std::string type, std::string message, long status, std::string request_id, json::value body,
           bool outcome_unknown);
  const std::string& type() const { return type_; }
  long status() const { return status_; }
  const std::string& request_id() const { return request_id_; }
  const json::value& body() const { return body_; }
  // The request may have been applied (it was sent, no answer came): re-read to find out.
  bool outcome_unknown() const { return outcome_unknown_; }
  bool throttled() const;
  bool retryable() const;  // throttling, 5xx, connection failures

 private:
  std::string type_;
  long status_;
  std::string request_id_;
  json::value body_;
  bool outcome_unknown_;
};

class JsonClient {
 public:
  JsonClient(ClientOptions options, Credentials credentials);
  ~JsonClient();
  JsonClient(const JsonClient&) = delete;
  JsonClient& operator=(const JsonClient&) = delete;

  // Calls `operation` (e.g. "PutItem") with a JSON body and returns the parsed response.
  // Retries throttling, 5xx and connection failures with jittered exponential backoff; an
  // `idempotent` call is also retried when its outcome is unknown (a 5xx answer, or a connection
  // that failed once the request may have been sent), any other call then throws an AwsError
  // with outcome_unknown(). `attempts`: at most this many (0: ClientOptions::max_attempts).
  // Throws AwsError.
  json::value call(std::string_view operation, const std::string& body, bool idempotent, int attempts = 0);

  const ClientOptions& options() const { return options_; }

 private:
  struct Impl;
  ClientOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deviceshadow::aws
