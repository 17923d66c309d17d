#include "awsiot/sigv4_verifier.hpp"

#include "aws/sigv4.hpp"
#include "deviceshadow/ascii.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/uri.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

namespace deviceshadow::awsiot {
namespace {

using Clock = std::chrono::system_clock;
using HeaderList = std::vector<std::pair<std::string, std::string>>;

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

// The parts of an Authorization header of SigV4.
struct Authorization {
  std::string_view access_key_id, date, region, service;  // from Credential=
  std::vector<std::string_view> signed_headers;           // lowercase names
  std::string_view signature;                             // 64 lowercase hex digits
};

Verification refuse(Refusal refusal, std::string detail) { return {nullptr, refusal, std::move(detail)}; }

std::vector<std::string_view> split(std::string_view s, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = s.find(separator, start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

bool is_lower_hex(std::string_view s) { return s.find_first_not_of("0123456789abcdef") == std::string_view::npos; }

// The first value of a header (names compared ignoring case), or nullopt.
std::optional<std::string_view> header(const http::HttpRequest& request, std::string_view name) {
  for (const auto& [n, v] : request.headers) {
    if (equals_ignoring_case(n, name)) return trim_spaces_and_tabs(v);
  }
  return std::nullopt;
}

// Parses "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…" (components in any
// order, each once); nullopt when it is anything else.
std::optional<Authorization> parse_authorization(std::string_view value) {
  if (value.substr(0, kAlgorithm.size()) != kAlgorithm) return std::nullopt;
  value.remove_prefix(kAlgorithm.size());
  if (value.empty() || (value.front() != ' ' && value.front() != '\t')) return std::nullopt;
  std::optional<std::string_view> credential, signed_headers, signature;
  for (std::string_view component : split(value, ',')) {
    component = trim_spaces_and_tabs(component);
    const std::size_t eq = component.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view name = component.substr(0, eq);
    std::optional<std::string_view>* slot = name == "Credential"      ? &credential
                                            : name == "SignedHeaders" ? &signed_headers
                                            : name == "Signature"     ? &signature
                                                                      : nullptr;
    if (!slot || *slot) return std::nullopt;
    *slot = component.substr(eq + 1);
  }
  if (!credential || !signed_headers || !signature) return std::nullopt;
  const std::vector<std::string_view> scope = split(*credential, '/');
  if (scope.size() != 5 || scope[4] != "aws4_request") return std::nullopt;
  if (std::any_of(scope.begin(), scope.end(), [](std::string_view s) { return s.empty(); })) return std::nullopt;
  Authorization auth{scope[0], scope[1], scope[2], scope[3], split(*signed_headers, ';'), *signature};
  for (std::string_view name : auth.signed_headers) {
    if (name.empty() || std::any_of(name.begin(), name.end(), [](unsigned char c) { return std::isupper(c); })) {
      return std::nullopt;
    }
  }
  if (auth.signature.size() != 64 || !is_lower_hex(auth.signature)) return std::nullopt;
  return auth;
}

// YYYYMMDDTHHMMSSZ as a time, or nullopt.
std::optional<Clock::time_point> parse_amz_date(std::string_view s) {
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z') return std::nullopt;
  auto number = [&](std::size_t at, std::size_t n) -> std::optional<int> {
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  const auto year = number(0, 4), month = number(4, 2), day = number(6, 2);
  const auto hour = number(9, 2), minute = number(11, 2), second = number(13, 2);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  const std::chrono::year_month_day ymd{std::chrono::year{*year}, std::chrono::month(static_cast<unsigned>(*month)),
                                        std::chrono::day(static_cast<unsigned>(*day))};
  if (!ymd.ok() || *hour > 23 || *minute > 59 || *second > 60) return std::nullopt;
  return std::chrono::sys_days(ymd) + std::chrono::hours(*hour) + std::chrono::minutes(*minute) +
         std::chrono::seconds(*second);
}

// The canonical query of the raw query string: pairs split at '&' and the first '=', decoded
// ('+' is a literal plus, as in RFC 3986), then encoded and sorted as SigV4 requires. Throws
// Error for a malformed escape.
std::string canonical_query_of(std::string_view raw_query) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (std::string_view pair : split(raw_query, '&')) {
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    pairs.emplace_back(percent_decode(name, false), percent_decode(value, false));
  }
  return aws::canonical_query(std::move(pairs));
}

// The signed headers with their canonical values (repeated headers joined by ','), in the
// order of SignedHeaders; or, second, the name of the first one that was not sent.
std::pair<HeaderList, std::string_view> canonical_headers(const http::HttpRequest& request,
                                                         const std::vector<std::string_view>& names) {
  HeaderList headers;
  for (std::string_view name : names) {
    std::string value;
    bool sent = false;
    for (const auto& [n, v] : request.headers) {
      if (!equals_ignoring_case(n, name)) continue;
      if (sent) value += ',';
      value += aws::canonical_header_value(v);
      sent = true;
    }
    if (!sent) return {{}, name};
    headers.emplace_back(std::string(name), std::move(value));
  }
  return {std::move(headers), {}};
}

bool is_presigned(std::string_view raw_query) {
  for (std::string_view pair : split(raw_query, '&')) {
    const std::string_view name = pair.substr(0, pair.find('='));
    if (equals_ignoring_case(name, "X-Amz-Signature") || equals_ignoring_case(name, "X-Amz-Algorithm")) return true;
  }
  return false;
}

}  // namespace

SigV4Verifier::SigV4Verifier(CredentialsTable credentials, VerifierOptions options)
    : credentials_(std::move(credentials)), options_(std::move(options)) {}

Verification SigV4Verifier::verify(const http::HttpRequest& request, Clock::time_point now) const {
  const std::string_view target = request.target;
  const std::size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view raw_query = question == std::string_view::npos ? std::string_view{} : target.substr(question + 1);

  const std::optional<std::string_view> authorization_value = header(request, "authorization");
  if (!authorization_value) {
    return refuse(Refusal::missing_authorization, is_presigned(raw_query)
                                                      ? "presigned URLs are not supported: sign the Authorization header"
                                                      : "no Authorization header");
  }
  const std::optional<Authorization> auth = parse_authorization(*authorization_value);
  if (!auth) {
    return refuse(Refusal::malformed_authorization,
                  "expected AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/SERVICE/aws4_request, "
                  "SignedHeaders=…, Signature=<64 hex digits>");
  }
  // Each signed header once: listing one many times would make the canonical request grow with
  // the square of the request's size. (Their order is the client's: AWS's Java SDK v1 sorts
  // ignoring case, which puts '_' elsewhere than a byte-wise sort.)
  {
    std::vector<std::string_view> names = auth->signed_headers;
    std::sort(names.begin(), names.end());
    if (std::adjacent_find(names.begin(), names.end()) != names.end()) {
      return refuse(Refusal::malformed_authorization, "SignedHeaders must list each header once");
    }
  }
  if (std::find(options_.services.begin(), options_.services.end(), auth->service) == options_.services.end()) {
    return refuse(Refusal::wrong_service, "signed for service '" + std::string(auth->service) + "'");
  }

  const std::optional<std::string_view> amz_date = header(request, "x-amz-date");
  const std::optional<Clock::time_point> signed_at = amz_date ? parse_amz_date(*amz_date) : std::nullopt;
  if (!signed_at) return refuse(Refusal::missing_date, "X-Amz-Date (YYYYMMDDTHHMMSSZ) is required");
  if (amz_date->substr(0, 8) != auth->date) {
    return refuse(Refusal::date_scope_mismatch, "credential scope date " + std::string(auth->date) +
                                                    " is not the day of X-Amz-Date " + std::string(*amz_date));
  }
  const auto skew = now > *signed_at ? now - *signed_at : *signed_at - now;
  if (skew > options_.max_clock_skew) {
    return refuse(Refusal::clock_skew, "X-Amz-Date " + std::string(*amz_date) + " is more than " +
                                           std::to_string(options_.max_clock_skew.count()) + " s from the server's time");
  }
  if (std::find(auth->signed_headers.begin(), auth->signed_headers.end(), "host") == auth->signed_headers.end()) {
    return refuse(Refusal::host_not_signed, "the host header must be signed");
  }

  const AccessKey* key = credentials_.find(auth->access_key_id);
  if (!key) return refuse(Refusal::unknown_access_key, "unknown access key id " + std::string(auth->access_key_id));

  auto [headers, unsent] = canonical_headers(request, auth->signed_headers);
  if (!unsent.empty()) {
    return refuse(Refusal::signed_header_missing, "signed header " + std::string(unsent) + " was not sent");
  }
  const std::string payload_hash = aws::hex_sha256(request.body);
  if (const auto claimed = header(request, "x-amz-content-sha256"); claimed && *claimed != payload_hash) {
    return refuse(Refusal::payload_hash_mismatch, "X-Amz-Content-SHA256 is not the SHA-256 of the body "
                                                  "(unsigned and streaming payloads are not accepted)");
  }
  std::string canonical_query;
  try {
    canonical_query = canonical_query_of(raw_query);
  } catch (const Error&) {
    return refuse(Refusal::signature_mismatch, "malformed percent-encoding in the query");
  }

  const std::string canonical = aws::canonical_request(request.method, aws::canonical_uri(path), canonical_query,
                                                       headers, payload_hash);
  const aws::SigningScope scope{std::string(auth->region), std::string(auth->service), std::string(*amz_date)};
  const std::string expected = aws::signature(key->secret_access_key, scope, aws::string_to_sign(scope, canonical));
  if (CRYPTO_memcmp(expected.data(), auth->signature.data(), expected.size()) != 0) {
    // The canonical request helps a client find what it signed differently; only its start is
    // told, so that a refusal stays small whatever the request.
    std::size_t shown = std::min<std::size_t>(canonical.size(), 1024);
    while (shown < canonical.size() && (static_cast<unsigned char>(canonical[shown]) & 0xC0) == 0x80) --shown;  // whole characters
    std::string detail = "signature does not match; canonical request:\n" + canonical.substr(0, shown);
    if (canonical.size() > shown) detail += "… (" + std::to_string(canonical.size()) + " bytes in all)";
    return refuse(Refusal::signature_mismatch, std::move(detail));
  }
  return {&key->principal, Refusal::none, {}};
}

}  // namespace deviceshadow::awsiot
