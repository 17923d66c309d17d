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

// Building blocks of the canonical request, shared by the signer and by the verifier of received
// requests (src/awsiot/sigv4_verifier).

// The canonical URI of a path as sent on the wire: "." and ".." segments and empty segments
// removed, then every byte but '/' and the unreserved characters percent-encoded, so that a
// "%20" already on the wire becomes "%2520" (the rule of every service but S3).
std::string canonical_uri(std::string_view wire_path);
// The canonical query string of decoded names and values: each percent-encoded, the pairs
// sorted by encoded name, then by encoded value, joined by '&'.
std::string canonical_query(std::vector<std::pair<std::string, std::string>> decoded);
// A header value as signed: trimmed, inner runs of white space folded into one space.
std::string canonical_header_value(std::string_view value);
// Assembles a canonical request. `headers` are lowercase names with canonical values, in the
// order they are signed (sorted by name); `payload_hash` is the lowercase hex SHA-256 of the body.
std::string canonical_request(std::string_view method, std::string_view canonical_uri, std::string_view canonical_query,
                              const std::vector<std::pair<std::string, std::string>>& headers,
                              std::string_view payload_hash);
// DATE/REGION/SERVICE/aws4_request, DATE being the first 8 characters of the scope's amz_date.
std::string credential_scope(const SigningScope& scope);
std::string string_to_sign(const SigningScope& scope, std::string_view canonical_request);
// The lowercase hex signature of string_to_sign under the key derived from the secret and scope.
std::string signature(std::string_view secret_access_key, const SigningScope& scope, std::string_view string_to_sign);

std::string canonical_request(const SignableRequest& request);
std::string string_to_sign(const SignableRequest& request, const SigningScope& scope);
// The value of the Authorization header.
std::string authorization(const SignableRequest& request, const SigningScope& scope, const Credentials& credentials);

// Adds X-Amz-Date, X-Amz-Security-Token (temporary credentials) and Authorization.
void sign(SignableRequest& request, const SigningScope& scope, const Credentials& credentials);

}  // namespace deviceshadow::aws
