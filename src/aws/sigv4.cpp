#include "aws/sigv4.hpp"

#include "deviceshadow/uri.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <initializer_list>
#include <memory>

namespace deviceshadow::aws {
namespace {

std::string to_hex(const unsigned char* data, std::size_t n) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += hex[data[i] >> 4];
    out += hex[data[i] & 0xF];
  }
  return out;
}

// SHA-256 through one EVP_MD fetched once: OpenSSL 3's one-shot helpers (SHA256(), HMAC())
// look the algorithm up again on every call, which costs more than hashing a request.
const EVP_MD* sha256_md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

using Digest = std::array<unsigned char, 32>;

Digest sha256(std::initializer_list<std::string_view> parts) {
  thread_local std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  Digest out{};
  EVP_DigestInit_ex(ctx.get(), sha256_md(), nullptr);
  for (std::string_view p : parts) EVP_DigestUpdate(ctx.get(), p.data(), p.size());
  EVP_DigestFinal_ex(ctx.get(), out.data(), nullptr);
  return out;
}

std::string_view view(const Digest& d) { return {reinterpret_cast<const char*>(d.data()), d.size()}; }

// HMAC-SHA256 (RFC 2104).
Digest hmac(std::string_view key, std::string_view data) {
  constexpr std::size_t kBlock = 64;
  Digest hashed_key;
  if (key.size() > kBlock) {
    hashed_key = sha256({key});
    key = view(hashed_key);
  }
  std::array<char, kBlock> inner{}, outer{};
  for (std::size_t i = 0; i < kBlock; ++i) {
    const char k = i < key.size() ? key[i] : 0;
    inner[i] = static_cast<char>(k ^ 0x36);
    outer[i] = static_cast<char>(k ^ 0x5c);
  }
  const Digest inner_hash = sha256({{inner.data(), kBlock}, data});
  return sha256({{outer.data(), kBlock}, view(inner_hash)});
}

}  // namespace

std::string hex_hmac_sha256(std::string_view key, std::string_view data) {
  const Digest d = hmac(key, data);
  return to_hex(d.data(), d.size());
}

namespace {

// The signing key of a day, region and service; derived once and kept per thread, since the
// derivation takes four HMACs and changes once a day.
Digest signing_key(std::string_view secret, const SigningScope& scope) {
  struct Cached {
    std::string secret, date, region, service;
    Digest key{};
  };
  thread_local Cached cached;
  const std::string_view date = std::string_view(scope.amz_date).substr(0, 8);
  if (cached.secret != secret || cached.date != date || cached.region != scope.region ||
      cached.service != scope.service) {
    Digest key = hmac("AWS4" + std::string(secret), date);
    key = hmac(view(key), scope.region);
    key = hmac(view(key), scope.service);
    key = hmac(view(key), "aws4_request");
    cached = {std::string(secret), std::string(date), scope.region, scope.service, key};
  }
  return cached.key;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Removes "." and ".." segments (RFC 3986 §5.2.4) and keeps a trailing slash.
std::string normalize_path(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    std::string_view seg = path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg == "..") {
      if (!out.empty()) out.pop_back();
    } else if (seg != "." && !seg.empty()) {
      out.push_back(seg);
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  std::string result;
  for (std::string_view seg : out) {
    result += '/';
    result += seg;
  }
  if (!out.empty() && path.back() == '/') result += '/';
  if (result.empty()) result = "/";
  return result;
}

// Sorted lowercase header names with their trimmed values ("name:value" joined by ',').
std::vector<std::pair<std::string, std::string>> signed_header_list(const SignableRequest& request) {
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& [name, value] : request.headers) {
    std::string n = lower(name);
    auto it = std::find_if(headers.begin(), headers.end(), [&](const auto& h) { return h.first == n; });
    if (it != headers.end()) {
      it->second += "," + canonical_header_value(value);
    } else {
      headers.emplace_back(std::move(n), canonical_header_value(value));
    }
  }
  std::sort(headers.begin(), headers.end());
  return headers;
}

std::string signed_header_names(const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out;
  for (const auto& h : headers) {
    if (!out.empty()) out += ';';
    out += h.first;
  }
  return out;
}

}  // namespace

std::string hex_sha256(std::string_view data) {
  const Digest digest = sha256({data});
  return to_hex(digest.data(), digest.size());
}

std::string amz_date_now() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[17];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string canonical_header_value(std::string_view value) {
  std::string out;
  bool space = false;
  for (char c : value) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
    } else {
      if (space) out += ' ';
      space = false;
      out += c;
    }
  }
  return out;
}

std::string canonical_uri(std::string_view wire_path) { return percent_encode(normalize_path(wire_path), "/"); }

std::string canonical_query(std::vector<std::pair<std::string, std::string>> decoded) {
  for (auto& [name, value] : decoded) {
    name = percent_encode(name);
    value = percent_encode(value);
  }
  std::sort(decoded.begin(), decoded.end());
  std::string out;
  for (const auto& [name, value] : decoded) {
    if (!out.empty()) out += '&';
    out += name + "=" + value;
  }
  return out;
}

std::string canonical_request(std::string_view method, std::string_view canonical_uri, std::string_view canonical_query,
                              const std::vector<std::pair<std::string, std::string>>& headers,
                              std::string_view payload_hash) {
  std::string out;
  out.append(method).append("\n").append(canonical_uri).append("\n").append(canonical_query).append("\n");
  for (const auto& [name, value] : headers) out += name + ":" + value + "\n";
  out.append("\n").append(signed_header_names(headers)).append("\n").append(payload_hash);
  return out;
}

std::string canonical_request(const SignableRequest& request) {
  return canonical_request(request.method, canonical_uri(request.path), canonical_query(request.query),
                           signed_header_list(request), hex_sha256(request.body));
}

std::string credential_scope(const SigningScope& scope) {
  return scope.amz_date.substr(0, 8) + "/" + scope.region + "/" + scope.service + "/aws4_request";
}

std::string string_to_sign(const SigningScope& scope, std::string_view canonical_request) {
  return "AWS4-HMAC-SHA256\n" + scope.amz_date + "\n" + credential_scope(scope) + "\n" + hex_sha256(canonical_request);
}

std::string string_to_sign(const SignableRequest& request, const SigningScope& scope) {
  return string_to_sign(scope, canonical_request(request));
}

std::string signature(std::string_view secret_access_key, const SigningScope& scope, std::string_view string_to_sign) {
  const Digest d = hmac(view(signing_key(secret_access_key, scope)), string_to_sign);
  return to_hex(d.data(), d.size());
}

std::string authorization(const SignableRequest& request, const SigningScope& scope, const Credentials& credentials) {
  return "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" + credential_scope(scope) +
         ", SignedHeaders=" + signed_header_names(signed_header_list(request)) +
         ", Signature=" + signature(credentials.secret_access_key, scope, string_to_sign(request, scope));
}

void sign(SignableRequest& request, const SigningScope& scope, const Credentials& credentials) {
  request.headers.emplace_back("X-Amz-Date", scope.amz_date);
  if (!credentials.session_token.empty()) request.headers.emplace_back("X-Amz-Security-Token", credentials.session_token);
  request.headers.emplace_back("Authorization", authorization(request, scope, credentials));
}

}  // namespace deviceshadow::aws
