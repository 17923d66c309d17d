// One SigV4-signed HTTP POST at a time to an AWS endpoint, over a kept-alive libcurl handle: the
// one place the project's AWS clients (DynamoDB's JSON client, the SQS and SNS targets) talk
// HTTP. No retries: the caller decides what a failure means. Not thread-safe (one user at a
// time).
#pragma once

#include "aws/sigv4.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace deviceshadow::aws {

struct SignedPostOptions {
  std::string endpoint;  // "https://sqs.eu-north-1.amazonaws.com", "http://127.0.0.1:5000"
  std::string region;
  std::string service;   // the signing name: "sqs", "sns"
  std::chrono::milliseconds timeout{10000};          // the whole exchange
  std::chrono::milliseconds connect_timeout{10000};  // connecting, within `timeout`
  // When set and it becomes true, a post gives up: at once if it has not begun ("aborted",
  // not sent), else within about a second (libcurl's progress callback; its error, maybe sent).
  const std::atomic<bool>* abort = nullptr;
};

struct PostAnswer {
  std::string transport_error;  // set when no HTTP answer came (status 0)
  bool maybe_sent = false;      // with a transport error: the request may have reached the service
  long status = 0;
  std::string body;
  std::string query_error;      // the x-amzn-query-error header ("Code;Sender"), if any
  std::string request_id;       // the x-amzn-requestid header, if any
};

class SignedPost {
 public:
  explicit SignedPost(SignedPostOptions options);
  ~SignedPost();
  SignedPost(const SignedPost&) = delete;
  SignedPost& operator=(const SignedPost&) = delete;

  // POSTs `body` to the endpoint's root with `headers` (Host and the signature are added).
  PostAnswer post(const std::vector<std::pair<std::string, std::string>>& headers, std::string body,
                  const Credentials& credentials);

  const SignedPostOptions& options() const { return options_; }

 private:
  SignedPostOptions options_;
  std::string host_;
  void* handle_ = nullptr;  // CURL*, kept out of this header
};

// "scheme://host[:port]" of a URL (no path).
std::string origin_of(const std::string& url);

}  // namespace deviceshadow::aws
