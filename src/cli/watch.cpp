#include "cli/watch.hpp"

#include "cli/listen.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/uri.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <iostream>
#include <thread>
#include <unordered_set>

namespace deviceshadow::cli {
namespace {

// Events remembered to drop the ones a resume sends again (a resume across shadows reaches back a
// few seconds).
constexpr std::size_t kRemembered = 100000;
constexpr auto kMaxPause = std::chrono::seconds(10);

class Watcher {
 public:
  explicit Watcher(const WatchOptions& options) : options_(options) {
    if (options.thing.empty()) {
      url_ = options.server + "/v1/events";
      if (!options.match.empty()) url_ += "?match=" + percent_encode(options.match);
    } else {
      url_ = options.server + "/v1/things/" + percent_encode_segment(options.thing) + "/shadows/" +
             percent_encode_segment(options.name.empty() ? "main" : options.name) + "/events";
    }
    if (!options.filter.empty()) {
      url_ += url_.find('?') == std::string::npos ? "?filter=" : "&filter=";
      url_ += percent_encode(options.filter);
    }
  }

  int run() {
    for (int failures = 0;; ++failures) {
      const bool heard = connect();
      if (status_ >= 400 && status_ != 429 && status_ != 503) {
        std::cerr << "shadowctl: " << refusal() << std::endl;
        return 1;
      }
      if (heard) failures = 0;
      const auto pause = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(500 << std::min(failures, 5)), kMaxPause);
      std::cerr << "shadowctl: " << (status_ == 0 ? "cannot reach " + options_.server : ended_) << "; reconnecting"
                << (last_id_.empty() ? "" : " after " + last_id_) << std::endl;
      std::this_thread::sleep_for(pause);
    }
  }

 private:
  // One request, until the stream ends; true when it delivered anything.
  bool connect() {
    status_ = 0;
    body_.clear();
    pending_.clear();
    reset_message();
    heard_ = false;
    ended_ = "the stream ended";
    CURL* curl = curl_easy_init();
    curl_slist* headers = curl_slist_append(nullptr, "Accept: text/event-stream");
    if (!options_.token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + options_.token).c_str());
    if (!last_id_.empty()) headers = curl_slist_append(headers, ("Last-Event-ID: " + last_id_).c_str());
    curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
    // The server sends a comment at least every --stream-heartbeat (15 s): a minute of silence is
    // a dead connection.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t size, size_t n, void* self) {
      return static_cast<Watcher*>(self)->take(p, size * n);
    });
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, this);
    curl_ = curl;
    const CURLcode rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status_);
    if (rc != CURLE_OK && status_ == 200) ended_ = std::string("the connection failed: ") + curl_easy_strerror(rc);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return heard_;
  }

  std::size_t take(const char* p, std::size_t n) {
    if (status_ == 0) curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &status_);
    if (status_ != 200) {
      body_.append(p, std::min<std::size_t>(n, 64 << 10));
      return n;
    }
    pending_.append(p, n);
    std::size_t at = 0;
    for (std::size_t end; (end = pending_.find('\n', at)) != std::string::npos; at = end + 1) {
      std::string_view line(pending_.data() + at, end - at);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      on_line(line);
    }
    pending_.erase(0, at);
    return n;
  }

  void on_line(std::string_view line) {
    if (line.empty()) return dispatch();
    if (line.front() == ':') return;  // a comment: keep-alive
    const std::size_t colon = line.find(':');
    const std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "id") id_ = value;
    if (field == "event") event_ = value;
    if (field == "data") data_.append(data_.empty() ? "" : "\n").append(value);
  }

  void dispatch() {
    if (event_ == "change" || event_ == "deleted") {
      show();
    } else if (event_ == "gap") {
      std::cerr << "shadowctl: events before this point are no longer kept (some were missed): " << data_ << std::endl;
    } else if (event_ == "overflow") {
      ended_ = "the server closed the stream: this client read too slowly";
    }
    reset_message();
  }

  void show() {
    heard_ = true;
    json::value event;
    try {
      event = parse_json(data_);
    } catch (const Error&) {
      std::cerr << "shadowctl: an event that is not JSON: " << data_ << std::endl;
      return;
    }
    if (!event.is_object()) return;
    const json::value* subject = event.get_object().if_contains("subject");
    std::string key = (subject && subject->is_string() ? std::string(subject->get_string()) : "") + " " + id_;
    if (!id_.empty()) last_id_ = id_;
    if (!seen_.insert(key).second) return;  // sent again after a resume
    order_.push_back(std::move(key));
    if (order_.size() > kRemembered) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
    std::cout << (options_.json ? data_ + "\n" : describe_event(event.get_object())) << std::flush;
  }

  std::string refusal() const {
    try {
      json::value body = parse_json(body_);
      const json::object& e = body.at("error").as_object();
      return std::string(e.at("code").as_string()) + ": " + std::string(e.at("message").as_string());
    } catch (const std::exception&) {
      return "HTTP " + std::to_string(status_) + ": " + body_;
    }
  }

  void reset_message() {
    id_.clear();
    event_.clear();
    data_.clear();
  }

  const WatchOptions& options_;
  std::string url_;
  CURL* curl_ = nullptr;
  long status_ = 0;
  std::string body_;     // of a refusal
  std::string pending_;  // bytes not yet split into lines
  std::string id_, event_, data_;  // of the message being read
  std::string ended_;
  bool heard_ = false;
  std::string last_id_;
  std::unordered_set<std::string> seen_;
  std::deque<std::string> order_;
};

}  // namespace

int watch(const WatchOptions& options) { return Watcher(options).run(); }

}  // namespace deviceshadow::cli
