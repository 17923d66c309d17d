#include "aws/signed_post.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <optional>

namespace deviceshadow::aws {
namespace {

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<PostAnswer*>(out)->body.append(data, size * n);
  return size * n;
}

// The value of header `name` (lower case, with the colon) if `line` is that header.
std::optional<std::string_view> header_value(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || !std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
        return a == std::tolower(static_cast<unsigned char>(b));
      })) {
    return std::nullopt;
  }
  std::string_view v = line.substr(name.size());
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
  return v;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* out) {
  const std::string_view line(data, size * n);
  auto* answer = static_cast<PostAnswer*>(out);
  if (auto v = header_value(line, "x-amzn-query-error:")) answer->query_error = std::string(*v);
  if (auto v = header_value(line, "x-amzn-requestid:")) answer->request_id = std::string(*v);
  return size * n;
}

int on_progress(void* abort, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(abort)->load() ? 1 : 0;  // non-zero: abort the transfer
}

}  // namespace

std::string origin_of(const std::string& url) {
  std::size_t start = url.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  return url.substr(0, url.find_first_of("/?#", start));
}

SignedPost::SignedPost(SignedPostOptions options) : options_(std::move(options)) {
  static std::once_flag initialized;
  std::call_once(initialized, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  const std::string origin = origin_of(options_.endpoint);
  host_ = origin.substr(origin.find("://") == std::string::npos ? 0 : origin.find("://") + 3);
  // The Host header curl sends, which the signature covers: without the scheme's default port.
  const std::string_view default_port = origin.starts_with("https://") ? ":443" : origin.starts_with("http://") ? ":80" : "";
  if (!default_port.empty() && host_.ends_with(default_port)) host_.resize(host_.size() - default_port.size());
}

SignedPost::~SignedPost() {
  if (handle_) curl_easy_cleanup(static_cast<CURL*>(handle_));
}

PostAnswer SignedPost::post(const std::vector<std::pair<std::string, std::string>>& headers, std::string body,
                            const Credentials& credentials) {
  SignableRequest request;
  request.path = "/";
  request.headers = headers;
  request.headers.emplace_back("Host", host_);
  request.body = std::move(body);
  sign(request, {options_.region, options_.service, amz_date_now()}, credentials);

  if (!handle_) {
    CURL* h = curl_easy_init();
    if (!h) return {"out of memory"};
    const std::string url = origin_of(options_.endpoint) + "/";
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    if (options_.abort) {
      curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
      curl_easy_setopt(h, CURLOPT_XFERINFODATA, options_.abort);
    }
    handle_ = h;
  }
  CURL* h = static_cast<CURL*>(handle_);
  PostAnswer answer;
  if (options_.abort && options_.abort->load()) return {"aborted"};
  curl_slist* list = curl_slist_append(nullptr, "Expect:");
  for (const auto& [name, value] : request.headers) {
    if (name != "Host") list = curl_slist_append(list, (name + ": " + value).c_str());
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &answer);
  const CURLcode rc = curl_easy_perform(h);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(list);
  if (rc != CURLE_OK) {
    answer.transport_error = curl_easy_strerror(rc);
    // Refused or unresolvable: never sent. Anything else may have reached the service.
    answer.maybe_sent = rc != CURLE_COULDNT_CONNECT && rc != CURLE_COULDNT_RESOLVE_HOST;
    curl_easy_cleanup(h);  // the connection may be in any state
    handle_ = nullptr;
    return answer;
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &answer.status);
  return answer;
}

}  // namespace deviceshadow::aws
