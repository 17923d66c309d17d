// Verification of AWS Signature Version 4 on received requests, for the AWS IoT compatible API:
// the canonical request is rebuilt from the request as received (method, raw path and query,
// the headers named in SignedHeaders, the body) and signed again with the secret of the access
// key named in the credential scope; the two signatures are compared in constant time.
//
// Accepted: `Authorization: AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/aws4_request,
// SignedHeaders=a;b;c, Signature=<64 hex>` with any REGION, a SERVICE among the options' (AWS IoT
// clients sign `iotdata`; `iotdevicegateway` too), `host` among the signed headers, an
// `X-Amz-Date` (YYYYMMDDTHHMMSSZ) within the allowed clock skew whose day is the scope's DATE,
// and, when `X-Amz-Content-SHA256` is sent, the hex SHA-256 of the body there. Everything else is
// refused with a reason: presigned URLs (`X-Amz-Signature` in the query), the `Date` header in
// place of `X-Amz-Date`, unsigned or streaming payloads. `X-Amz-Security-Token` is signed like
// any header but not checked: the keys of the credentials file are long-term keys.
#pragma once

#include "awsiot/credentials.hpp"
#include "http/server.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace deviceshadow::awsiot {

enum class Refusal {
  none,
  missing_authorization,    // no Authorization header (or a presigned URL, not supported)
  malformed_authorization,  // not AWS4-HMAC-SHA256 with Credential, SignedHeaders and Signature
  missing_date,             // no X-Amz-Date, or not YYYYMMDDTHHMMSSZ
  date_scope_mismatch,      // the scope's date is not X-Amz-Date's day
  clock_skew,               // X-Amz-Date too far from now
  wrong_service,            // the scope's service is not accepted
  host_not_signed,          // `host` missing from SignedHeaders
  signed_header_missing,    // a header named in SignedHeaders was not sent
  payload_hash_mismatch,    // X-Amz-Content-SHA256 is not the hash of the body
  unknown_access_key,
  signature_mismatch,
};

struct Verification {
  const Principal* principal = nullptr;  // set exactly when the signature is valid
  Refusal refusal = Refusal::none;
  std::string detail;  // for logs: what was refused, never a secret

  bool ok() const { return principal != nullptr; }
};

struct VerifierOptions {
  std::vector<std::string> services = {"iotdata", "iotdevicegateway"};
  std::chrono::seconds max_clock_skew{15 * 60};  // either way; exactly this much is accepted
};

// Immutable; safe to share between threads. The principals returned live as long as the verifier.
class SigV4Verifier {
 public:
  explicit SigV4Verifier(CredentialsTable credentials, VerifierOptions options = {});

  Verification verify(const http::HttpRequest& request, std::chrono::system_clock::time_point now) const;

  const CredentialsTable& credentials() const { return credentials_; }

 private:
  CredentialsTable credentials_;
  VerifierOptions options_;
};

}  // namespace deviceshadow::awsiot
