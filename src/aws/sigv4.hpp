// AWS Signature Version 4 (header authorization), as documented in the AWS General Reference
// ("Create a signed AWS API request"). Verified against AWS's published worked example and
// against botocore's signer (tests/aws/).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deviceshadow::aws {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless temporary credentials

  bool empty() const { return access_key_id.empty() || secret_access_key.empty(); }
};

// The parts of an HTTP request that are signed.
struct SignableRequest {
  std::string method = "POST";
  std::string path = "/";  // as sent on the wire (already percent-encoded)
  std::vector<std::pair<std::string, std::string>> query;    // decoded names and values
  std::vector<std::pair<std::string, std::string>> headers;  // must include Host
  std::string body;
};

struct SigningScope {
  std::string region;
  std::string service;
  std::string amz_date;  // YYYYMMDDTHHMMSSZ
};

std::string hex_sha256(std::string_view data);
// HMAC-SHA256 (RFC 2104) of data under key, as lowercase hex.
std::string hex_hmac_sha256(std::string_view key, std::string_view data);
// The current time as YYYYMMDDTHHMMSSZ.
std::string amz_date_now();

std::string canonical_request(const SignableRequest& request);
std::string string_to_sign(const SignableRequest& request, const SigningScope& scope);
// The value of the Authorization header.
std::string authorization(const SignableRequest& request, const SigningScope& scope, const Credentials& credentials);

// Adds X-Amz-Date, X-Amz-Security-Token (temporary credentials) and Authorization.
void sign(SignableRequest& request, const SigningScope& scope, const Credentials& credentials);

}  // namespace deviceshadow::aws
