#include "aws/client.hpp"

#include "deviceshadow/error.hpp"

#include <curl/curl.h>

#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace deviceshadow::aws {

AwsError::AwsError(std::string type, std::string message, long status, std::string request_id, json::value body,
                   bool outcome_unknown)
    : std::runtime_error(type + ": " + message + (request_id.empty() ? "" : " (request " + request_id + ")")),
      type_(std::move(type)),
      status_(status),
      request_id_(std::move(request_id)),
      body_(std::move(body)),
      outcome_unknown_(outcome_unknown) {}

bool AwsError::throttled() const {
  return status_ == 429 || type_ == "ProvisionedThroughputExceededException" || type_ == "ThrottlingException" ||
         type_ == "RequestLimitExceeded" || type_ == "Throttling";
}

bool AwsError::retryable() const { return throttled() || status_ >= 500 || status_ == 0; }

namespace {

struct Response {
  long status = 0;
  std::string body;
  std::string request_id;
};

std::once_flag curl_initialized;

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* out) {
  std::string_view line(data, size * n);
  constexpr std::string_view kId = "x-amzn-requestid:";
  if (line.size() > kId.size()) {
    std::string lower(line.substr(0, kId.size()));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == kId) {
      std::string_view v = line.substr(kId.size());
      while (!v.empty() && (v.front() == ' ')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
      static_cast<Response*>(out)->request_id = std::string(v);
    }
  }
  return size * n;
}

std::string host_of(const std::string& endpoint) {
  std::size_t start = endpoint.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  std::size_t end = endpoint.find('/', start);
  return endpoint.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

struct JsonClient::Impl {
  std::mutex mutex;
  std::vector<CURL*> idle;  // keep-alive handles, reused
  Credentials credentials;
  std::string host;  // of the endpoint, signed as the Host header

  // A handle with every option that does not change between requests already set.
  CURL* acquire(const ClientOptions& options) {
    {
      std::lock_guard lock(mutex);
      if (!idle.empty()) {
        CURL* h = idle.back();
        idle.pop_back();
        return h;
      }
    }
    CURL* h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, options.endpoint.c_str());
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options.request_timeout.count()));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    return h;
  }
  void release(CURL* h) {
    std::lock_guard lock(mutex);
    idle.push_back(h);
  }
  ~Impl() {
    for (CURL* h : idle) curl_easy_cleanup(h);
  }
};

JsonClient::JsonClient(ClientOptions options, Credentials credentials)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  std::call_once(curl_initialized, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  impl_->credentials = std::move(credentials);
  impl_->host = host_of(options_.endpoint);
}

JsonClient::~JsonClient() = default;

json::value JsonClient::call(std::string_view operation, const std::string& body, bool idempotent) {
  const std::string target = options_.target_prefix + std::string(operation);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  for (int attempt = 1;; ++attempt) {
    SignableRequest request;
    request.path = "/";
    request.headers = {{"Host", impl_->host}, {"Content-Type", "application/x-amz-json-1.0"}, {"X-Amz-Target", target}};
    request.body = body;
    sign(request, {options_.region, options_.service, amz_date_now()}, impl_->credentials);

    Response response;
    CURL* h = impl_->acquire(options_);
    curl_slist* headers = nullptr;
    for (const auto& [name, value] : request.headers) {
      if (name != "Host") headers = curl_slist_append(headers, (name + ": " + value).c_str());
    }
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &response);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);  // the list is freed now; the handle is reused
    curl_slist_free_all(headers);

    std::optional<AwsError> failure;
    if (rc != CURLE_OK) {
      curl_easy_cleanup(h);  // the connection is in an unknown state
      // Refused or unresolvable: never sent. Anything else may have reached the service.
      bool sent = rc != CURLE_COULDNT_CONNECT && rc != CURLE_COULDNT_RESOLVE_HOST;
      failure.emplace("ConnectionError", curl_easy_strerror(rc), 0, "", json::value(), sent);
    } else {
      impl_->release(h);
      json::value parsed;
      try {
        parsed = response.body.empty() ? json::value(json::object()) : parse_json(response.body, 200);
      } catch (const Error&) {
        parsed = json::object();
      }
      if (response.status == 200) return parsed;
      std::string type = "UnknownError";
      std::string message = "HTTP " + std::to_string(response.status);
      if (parsed.is_object()) {
        if (const json::value* t = parsed.get_object().if_contains("__type"); t && t->is_string()) {
          std::string_view full = t->get_string();
          type = std::string(full.substr(full.find('#') == std::string_view::npos ? 0 : full.find('#') + 1));
        }
        for (const char* key : {"message", "Message"}) {
          if (const json::value* m = parsed.get_object().if_contains(key); m && m->is_string()) message = m->get_string();
        }
      }
      failure.emplace(type, message, response.status, response.request_id, std::move(parsed), false);
    }
    bool retry = failure->retryable() && attempt < options_.max_attempts && (idempotent || !failure->outcome_unknown());
    if (!retry) throw *failure;
    auto cap = std::min<std::int64_t>(options_.backoff_max.count(), options_.backoff_base.count() << std::min(attempt, 16));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(0, cap)(rng)));
  }
}

}  // namespace deviceshadow::aws
