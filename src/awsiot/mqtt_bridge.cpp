#include "awsiot/mqtt_bridge.hpp"

#include "awsiot/documents.hpp"
#include "notify/mqtt_session.hpp"
#include "deviceshadow/prometheus.hpp"

#include "aws/sigv4.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/validation.hpp"

#include <functional>
#include <random>
#include <utility>

namespace deviceshadow::awsiot {
namespace {

constexpr int kQos = 1;
constexpr auto kFirstConnectWait = std::chrono::seconds(5);
// How often a thread waiting for room under max_unsent_bytes looks whether the bridge stops.
constexpr auto kStopCheck = std::chrono::milliseconds(100);

// A request topic, split: $aws/things/{thing}/shadow[/name/{name}]/{action}, levels as received.
struct RequestTopic {
  std::string_view prefix;  // up to the action, without the '/' before it
  std::string_view thing;
  std::string_view name;    // with `named`
  std::string_view action;
  bool named = false;       // false: the classic shadow
};

std::optional<RequestTopic> split_topic(std::string_view topic) {
  std::vector<std::string_view> levels;
  for (std::size_t start = 0;;) {
    const std::size_t slash = topic.find('/', start);
    levels.push_back(topic.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (levels.size() < 5 || levels[0] != "$aws" || levels[1] != "things" || levels[3] != "shadow") return std::nullopt;
  RequestTopic t;
  t.thing = levels[2];
  if (levels.size() == 5) {
    t.action = levels[4];
  } else if (levels.size() == 7 && levels[4] == "name") {
    t.name = levels[5];
    t.action = levels[6];
    t.named = true;
  } else {
    return std::nullopt;
  }
  t.prefix = topic.substr(0, topic.size() - t.action.size() - 1);
  return t;
}

// The request's clientToken: the string value of the member "clientToken" of the object the
// payload holds, else "". Found by a scan that builds nothing, stops at the token and follows
// any nesting, so that a payload refused for its depth (or its size, up to 1 MiB) still has its
// token echoed; what follows the token is not looked at.
std::string client_token_of(std::string_view payload) {
  if (payload.size() > (std::size_t{1} << 20)) return {};
  std::size_t i = 0;
  auto skip_space = [&] {
    while (i < payload.size() && (payload[i] == ' ' || payload[i] == '\t' || payload[i] == '\n' || payload[i] == '\r')) ++i;
  };
  // The string literal at i, with its quotes, and i past it; empty when it does not end.
  auto literal = [&]() -> std::string_view {
    const std::size_t start = i++;
    while (i < payload.size() && payload[i] != '"') i += payload[i] == '\\' ? 2 : 1;
    if (i >= payload.size()) return {};
    return payload.substr(start, ++i - start);
  };
  auto decoded = [](std::string_view text) -> std::string {
    try {
      const json::value v = parse_json(text, 1);
      return std::string(v.get_string());
    } catch (const std::exception&) {
      return {};
    }
  };
  skip_space();
  if (i >= payload.size() || payload[i++] != '{') return {};
  std::size_t depth = 1;
  bool at_name = true;  // the next string at depth 1 names a member
  while (i < payload.size()) {
    const char c = payload[i];
    if (c == '"') {
      const std::string_view text = literal();
      if (text.empty()) return {};
      if (depth != 1 || !at_name) continue;
      skip_space();
      if (i >= payload.size() || payload[i++] != ':') return {};
      skip_space();
      if (decoded(text) == "clientToken") {
        if (i >= payload.size() || payload[i] != '"') return {};
        const std::string_view value = literal();
        return value.empty() ? std::string() : decoded(value);
      }
      at_name = false;
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return {};
    } else if (c == ',' && depth == 1) {
      at_name = true;
    }
    ++i;
  }
  return {};
}

// `document` (a JSON object) with "timestamp" (when given) and "clientToken" (when not empty)
// appended.
std::string with_members(std::string document, std::optional<std::int64_t> timestamp, std::string_view client_token) {
  document.pop_back();  // '}'
  if (timestamp) document += std::string(document.back() == '{' ? "" : ",") + "\"timestamp\":" + std::to_string(*timestamp);
  if (!client_token.empty()) {
    document += document.back() == '{' ? "\"clientToken\":" : ",\"clientToken\":";
    append_json_string(document, client_token);
  }
  return document + '}';
}

MqttMessage rejected(std::string_view base, const Error& error, std::string_view client_token) {
  return {std::string(base) + "/rejected",
          with_members(render_error_body(aws_shadow_error(error)), now_seconds(), client_token)};
}

// A get or delete request's payload: empty, or a JSON object (whose clientToken is echoed).
void check_plain_request(std::string_view payload, const Limits& limits) {
  if (payload.empty()) return;
  if (payload.size() > limits.max_body_bytes) throw Error(ErrorCode::document_too_large, "payload too large");
  const json::value v = parse_json(payload, 8);
  if (!v.is_object()) throw Error(ErrorCode::invalid_json, "the payload is not a JSON object");
  if (const json::value* t = v.get_object().if_contains("clientToken")) {
    if (!t->is_string()) throw Error::invalid_request("Invalid clientToken: it must be a string");
    validate_client_token(t->get_string());
  }
}

// Whether `desired` holds the path of any leaf of `reported` (a reported value that a desired
// one waits for).
bool holds_a_leaf_of(const json::object& reported, const json::object& desired, const TimestampKeys& keys) {
  for (const json::key_value_pair& m : reported) {
    const json::value* d = desired.if_contains(m.key());
    if (!d) continue;
    const json::object* r = m.value().if_object();
    if (r && !r->empty() && !keys.find(*r) && d->is_object()) {
      if (holds_a_leaf_of(*r, d->get_object(), keys)) return true;
    } else {
      return true;
    }
  }
  return false;
}

// A name for this process in its claims.
std::string random_owner() {
  std::random_device random;
  return std::to_string(random()) + "-" + std::to_string(random());
}

}  // namespace

ShadowTopics::ShadowTopics(Engine& engine, std::string classic_shadow, bool acknowledge)
    : engine_(engine), classic_shadow_(std::move(classic_shadow)), acknowledge_(acknowledge) {}

const std::vector<std::string>& ShadowTopics::filters() {
  static const std::vector<std::string> kFilters = {"$aws/things/+/shadow/+", "$aws/things/+/shadow/name/+/+"};
  return kFilters;
}

std::string_view ShadowTopics::shadow_of(std::string_view topic) noexcept {
  try {
    const std::optional<RequestTopic> t = split_topic(topic);
    return t ? t->prefix : topic;
  } catch (const std::bad_alloc&) {
    return topic;
  }
}

std::vector<MqttMessage> ShadowTopics::refuse(std::string_view topic, std::string_view payload, const Error& error) {
  const std::optional<RequestTopic> t = split_topic(topic);
  if (!t) return {};
  return {rejected(topic, error, client_token_of(payload))};
}

std::vector<MqttMessage> ShadowTopics::serve(std::string_view topic, std::string_view payload) {
  const std::optional<RequestTopic> t = split_topic(topic);
  if (!t) return {};
  const std::string base(topic);
  const std::string token = client_token_of(payload);
  const bool shared = engine_.store().shares_versions();
  const TimestampKeys& keys = engine_.options().document.timestamp_keys;
  const Limits& limits = engine_.options().document.limits;
  const bool classic = !t->named;
  try {
    if (t->action != "get" && t->action != "update" && t->action != "delete") {
      throw Error::invalid_request("Unknown shadow action: '" + std::string(t->action) +
                                   "' (the actions are get, update and delete)");
    }
    ShadowKey key{notify::unescape_topic_name(t->thing), classic ? classic_shadow_ : notify::unescape_topic_name(t->name)};
    validate_thing(key.thing);
    validate_shadow_name(key.name);
    try {
      if (t->action == "get") {
        check_plain_request(payload, limits);
        return {{base + "/accepted", with_members(render_document(engine_.get(key), shared, keys, now_seconds()),
                                                  std::nullopt, token)}};
      }
      if (t->action == "delete") {
        check_plain_request(payload, limits);
        const DeleteResult result = engine_.remove(key, std::nullopt, std::nullopt, WriteSource::aws_mqtt);
        return {{base + "/accepted", render_deleted(result.record, shared, now_seconds(), token)}};
      }
      // update
      if (payload.size() > limits.max_body_bytes) throw Error(ErrorCode::document_too_large, "payload too large");
      UpdateRequestBody request = read_update_request(payload, limits, acknowledge_);
      request.update.key = key;
      request.update.keep_previous = true;  // for update/documents
      request.update.source = WriteSource::aws_mqtt;  // answered here, not announced again
      const UpdateResult result = engine_.update(request.update);
      const ShadowUpdate& u = request.update;
      std::vector<MqttMessage> out;
      out.push_back({base + "/accepted",
                     render_accepted(request.body.at("state"), result.shadow.record, shared, keys, u.client_token)});
      const json::object* reported = u.reported && !u.reported->remove ? &u.reported->state : nullptr;
      append_update_followups(out, t->prefix, *result.previous, result.shadow, u.desired.has_value(), reported, token);
      return out;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::not_found) throw;
      throw shadow_not_found(key, classic);
    }
  } catch (const Error& e) {
    return {rejected(base, e, token)};
  } catch (const std::exception&) {
    return {rejected(base, Error(ErrorCode::internal, "internal error"), token)};
  }
}

void ShadowTopics::append_update_followups(std::vector<MqttMessage>& out, std::string_view prefix,
                                           const ShadowRecord& before, const ShadowView& after, bool desired_named,
                                           const json::object* reported_requested, std::string_view client_token) const {
  const bool shared = engine_.store().shares_versions();
  const TimestampKeys& keys = engine_.options().document.timestamp_keys;
  const ShadowRecord& current = after.record;
  const std::int64_t written = epoch_seconds(written_ns(current));
  const bool announce_delta =
      !after.delta.empty() &&
      (desired_named || (reported_requested && current.desired.exists() &&
                         holds_a_leaf_of(*reported_requested, section_state(current.desired), keys)));
  if (announce_delta) {
    out.push_back({std::string(prefix) + "/update/delta", render_delta(after, shared, keys, written, client_token)});
  }
  out.push_back({std::string(prefix) + "/update/documents",
                 render_documents(before.exists() ? std::optional(before) : std::nullopt, current, shared, keys, written,
                                  client_token)});
}

std::vector<MqttMessage> ShadowTopics::announce(const WriteNotice& write) const {
  std::vector<MqttMessage> out;
  try {
    std::string prefix = "$aws/things/" + notify::escape_topic_name(write.key.thing) + "/shadow";
    if (write.key.name != classic_shadow_) prefix += "/name/" + notify::escape_topic_name(write.key.name);
    const bool shared = engine_.store().shares_versions();
    const TimestampKeys& keys = engine_.options().document.timestamp_keys;
    if (write.shadow_deleted) {
      out.push_back({prefix + "/delete/accepted", render_deleted(write.after, shared, epoch_seconds(written_ns(write.after)), "")});
      return out;
    }
    // The state AWS would have been asked for: each section the write stored, as requested, or
    // null when it was removed (a section changed only by acknowledgement is left out).
    json::object state;
    for (Section s : {Section::desired, Section::reported}) {
      const std::size_t i = s == Section::reported ? 0 : 1;
      if (write.after.section(s).write_id == write.before.section(s).write_id) continue;  // not stored
      if (write.requested[i]) {
        state[to_string(s)] = *write.requested[i];
      } else if (!write.after.section(s).exists()) {
        state[to_string(s)] = nullptr;
      }
    }
    const std::string token(write.client_token);
    out.push_back({prefix + "/update/accepted", render_accepted(state, write.after, shared, keys, token)});
    const ShadowView after{write.key, write.after,
                           compute_delta(section_state(write.after.desired), section_state(write.after.reported), keys)};
    append_update_followups(out, prefix, write.before, after, write.requested[1] != nullptr, write.requested[0], token);
  } catch (const std::exception&) {
    out.clear();  // a stored document that does not parse: nothing to announce
  }
  return out;
}

MqttBridge::MqttBridge(Engine& engine, DeliveryStore& claims, http::Logger& logger, MqttBridgeOptions options)
    : engine_(engine),
      claims_(claims),
      topics_(engine, options.classic_shadow, options.acknowledge),
      logger_(logger),
      options_(std::move(options)),
      queue_budget_(options_.max_queued_bytes),
      owner_(random_owner()) {
  notify::parse_mqtt_broker(options_.broker);  // throws std::invalid_argument for a bad URL (shadowd checks it first)
  for (std::size_t i = 0; i < std::max<std::size_t>(options_.workers, 1); ++i) {
    shards_.push_back(std::make_unique<Shard>(queue_budget_));
  }
  for (auto& shard : shards_) shard->thread = std::thread([this, s = shard.get()] { work(*s); });
  notify::MqttSessionOptions session;
  session.broker = options_.broker;
  session.username = options_.username;
  session.password = options_.password;
  session.client_id = options_.client_id;
  session.no_delay = true;  // devices wait for each answer
  session.max_unsent_bytes = options_.max_unsent_bytes;
  session.on_connect = [this] {
    // A clean session forgets its subscriptions: subscribe again on every connect.
    for (const std::string& filter : ShadowTopics::filters()) {
      if (std::string error = session_->subscribe(filter, kQos); !error.empty()) {
        logger_.log(http::LogLevel::error, "mqtt: cannot subscribe", {{"filter", filter}, {"error", error}});
      }
    }
    const std::uint64_t n = ++stats_.connects;
    stats_.connected = 1;
    {
      std::lock_guard lock(announce_mutex_);  // so that a waiter sees the new count or the wake-up
    }
    announce_cv_.notify_all();  // announcements waiting for the broker go now
    logger_.log(http::LogLevel::info, n == 1 ? "mqtt: connected" : "mqtt: reconnected",
                {{"broker", options_.broker}, {"connects", std::to_string(n)}});
  };
  session.on_disconnect = [this](const std::string& why) {
    const bool was_connected = stats_.connected.exchange(0) == 1;  // else a connect that failed
    if (was_connected) ++stats_.disconnects;
    if (!stopping_) {
      logger_.log(http::LogLevel::warn, was_connected ? "mqtt: connection lost, reconnecting" : "mqtt: cannot connect, trying again",
                  {{"broker", options_.broker}, {"why", why}});
    }
  };
  session.on_message = [this](std::string_view topic, std::string_view payload) { received(topic, payload); };
  session_ = std::make_unique<notify::MqttSession>(std::move(session));
  session_->start();  // from here the network thread calls the handlers above
  announcer_ = std::thread([this] { announce_writes(); });
  engine_.add_write_listener(*this);
  if (!session_->wait_until_first_connected(kFirstConnectWait)) {
    logger_.log(http::LogLevel::warn, "mqtt: not connected yet, still trying",
                {{"broker", options_.broker}, {"state", session_->state()}});
  }
}

MqttBridge::~MqttBridge() {
  stopping_ = true;
  for (auto& shard : shards_) {
    {
      std::lock_guard lock(shard->mutex);
    }
    shard->cv.notify_all();
  }
  {
    std::lock_guard lock(announce_mutex_);
  }
  announce_cv_.notify_all();
  for (auto& shard : shards_) shard->thread.join();
  engine_.remove_write_listener(*this);  // no writer left: the workers are gone, and REST's before us
  announcer_.join();
  if (!announcements_.empty()) {
    logger_.log(http::LogLevel::warn, "mqtt: stopping with writes not announced",
                {{"writes", std::to_string(announcements_.size())}});
  }
  session_.reset();
}

void MqttBridge::received(std::string_view topic, std::string_view payload) {
  if (stopping_) return;
  ++stats_.requests;
  // Over the largest body, the request is refused as serve() would refuse it, but at once:
  // neither copied nor queued, nor waiting behind its shadow's other requests.
  if (payload.size() > engine_.options().document.limits.max_body_bytes) {
    ++stats_.too_large;
    refuse_now(topic, payload, Error(ErrorCode::document_too_large, "payload too large"));
    return;
  }
  const std::string_view shadow = ShadowTopics::shadow_of(topic);
  Shard& shard = *shards_[std::hash<std::string_view>{}(shadow) % shards_.size()];
  bool queued = false;
  bool shadow_waiting = false;  // the shadow itself holds requests: its share is what is full
  try {
    std::lock_guard lock(shard.mutex);
    queued = shard.queue.push(shadow, topic, payload, std::chrono::steady_clock::now());
    if (!queued) shadow_waiting = shard.queue.held(shadow) > 0;
  } catch (const std::bad_alloc&) {  // refused as when the queue has no room
  }
  if (!queued) {
    ++stats_.overloaded;
    if (shadow_waiting) ++stats_.shadow_throttled;
    refuse_now(topic, payload, Error(ErrorCode::throttled, "too many requests waiting"));
    return;
  }
  shard.cv.notify_one();
}

void MqttBridge::refuse_now(std::string_view topic, std::string_view payload, const Error& error) {
  ++stats_.rejected;
  // The network thread never waits for room: it is what makes room, by sending.
  answer(ShadowTopics::refuse(topic, payload, error), std::chrono::steady_clock::now());
}

void MqttBridge::work(Shard& shard) {
  for (;;) {
    QueuedRequest request;
    {
      std::unique_lock lock(shard.mutex);
      shard.cv.wait(lock, [&] { return stopping_ || !shard.queue.empty(); });
      if (stopping_) return;
      try {
        request = shard.queue.pop();
      } catch (const std::bad_alloc&) {  // the queue is as it was: try again
        continue;
      }
    }
    if (!claim(request)) continue;
    std::vector<MqttMessage> answers = topics_.serve(request.topic, request.payload);
    if (answers.empty()) {
      ++stats_.ignored;
      logger_.log(http::LogLevel::info, "mqtt: not a shadow request topic, ignored", {{"topic", request.topic}});
      continue;
    }
    if (answers.front().topic.ends_with("/rejected")) ++stats_.rejected;
    answer(answers, std::chrono::steady_clock::now() + options_.answer_wait);
  }
}

bool MqttBridge::claim(const QueuedRequest& request) {
  if (options_.claim_window.count() == 0) return true;
  // Neither answer nor serve what another shadowd may have served: a copy that waited past the
  // window could claim again after the first claim expired, and a failed claim says nothing of
  // the others. The device's request times out, and it asks again.
  auto unclaimed = [&](std::string_view why, std::string_view error) {
    ++stats_.unclaimed;
    if (std::uint64_t suppressed = 0; unclaimed_log_.admit(suppressed)) {  // a flooding device makes many
      logger_.log(http::LogLevel::warn, "mqtt: request not served",
                  {{"topic", request.topic}, {"why", std::string(why)}, {"error", std::string(error)},
                   {"suppressed", std::to_string(suppressed)}});
    }
    return false;
  };
  if (std::chrono::steady_clock::now() - request.received >= options_.claim_window) {
    return unclaimed("it waited for a worker longer than the claim window", "");
  }
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
  const std::int64_t window = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.claim_window).count();
  std::string identity = request.topic;
  identity += '\0';
  identity += request.payload;
  try {
    // The claim outlives the window each copy has to claim it in (from its own receipt) by one
    // window: a copy another shadowd received up to a window later cannot claim it once more.
    if (claims_.claim(aws::hex_sha256(identity), owner_, now, now + 2 * window)) return true;
    ++stats_.claimed_elsewhere;
    return false;
  } catch (const std::exception& e) {
    return unclaimed("the claim failed", e.what());
  }
}

void MqttBridge::on_write(const WriteNotice& write) noexcept {
  if (stopping_ || write.source == WriteSource::aws_mqtt) return;  // the bridge answers its own writes
  try {
    Announcement a{write.key, write.before, write.after, {}, write.shadow_deleted, std::string(write.client_token)};
    for (std::size_t i = 0; i < 2; ++i) {
      if (write.requested[i]) a.requested[i] = *write.requested[i];
    }
    bool first_drop = false;
    {
      std::lock_guard lock(announce_mutex_);
      if (announcements_.size() >= std::max<std::size_t>(options_.max_announcements, 1)) {
        announcements_.pop_front();
        ++stats_.announcements_dropped;
        first_drop = !std::exchange(dropping_, true);
      }
      announcements_.push_back(std::move(a));
      stats_.announcements_waiting = announcements_.size();
    }
    announce_cv_.notify_one();
    if (first_drop) {
      logger_.log(http::LogLevel::error, "mqtt: too many writes waiting to be announced, dropping the oldest",
                  {{"broker", options_.broker}, {"waiting", std::to_string(options_.max_announcements)}});
    }
  } catch (const std::exception&) {  // out of memory: the write stands, its announcement is lost
    ++stats_.announcements_dropped;
  }
}

void MqttBridge::announce_writes() {
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    Announcement a;
    {
      std::unique_lock lock(announce_mutex_);
      announce_cv_.wait(lock, [&] { return stopping_ || !announcements_.empty(); });
      if (stopping_) return;
      a = std::move(announcements_.front());
      announcements_.pop_front();
      stats_.announcements_waiting = announcements_.size();
    }
    WriteNotice write{a.key, a.before, a.after};
    for (std::size_t i = 0; i < 2; ++i) write.requested[i] = a.requested[i] ? &*a.requested[i] : nullptr;
    write.shadow_deleted = a.shadow_deleted;
    write.client_token = a.client_token;
    for (const MqttMessage& m : topics_.announce(write)) {
      // Never dropped for want of room under max_unsent_bytes: waits for it (the queue of
      // announcements bounds what waits meanwhile).
      if (!wait_for_room(notify::MqttSession::unsent_cost(m.topic.size(), m.payload.size()),
                         std::chrono::steady_clock::time_point::max())) {
        return;  // stopping
      }
      // Held while the broker is away (the queue bounds what waits), then published in order.
      for (std::string error;;) {
        const std::uint64_t connects = stats_.connects;
        if (session_->publish(m.topic, m.payload, kQos, error)) break;
        ++stats_.publish_failures;
        std::unique_lock lock(announce_mutex_);
        // Until the broker is back (on_connect wakes it) or the backoff ends; a failure while
        // connected waits out the backoff too.
        announce_cv_.wait_for(lock, backoff, [&] { return stopping_ || stats_.connects != connects; });
        if (stopping_) return;
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      }
      backoff = std::chrono::milliseconds(100);
    }
    ++stats_.announced;
    std::lock_guard lock(announce_mutex_);
    dropping_ = false;
  }
}

bool MqttBridge::wait_for_room(std::size_t bytes, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (session_->wait_for_room(bytes, deadline - now < kStopCheck ? deadline : now + kStopCheck)) return true;
    if (stopping_ || std::chrono::steady_clock::now() >= deadline) return false;
  }
}

void MqttBridge::answer(const std::vector<MqttMessage>& messages, std::chrono::steady_clock::time_point deadline) {
  std::size_t bytes = 0;
  for (const MqttMessage& m : messages) bytes += notify::MqttSession::unsent_cost(m.topic.size(), m.payload.size());
  if (messages.empty() || wait_for_room(bytes, deadline)) {
    publish(messages);
    return;
  }
  stats_.answers_dropped += messages.size();
  if (std::uint64_t suppressed = 0; drop_log_.admit(suppressed)) {
    logger_.log(http::LogLevel::warn, "mqtt: answers dropped, the broker takes messages slower than they are made",
                {{"topic", messages.front().topic},
                 {"unsent_bytes", std::to_string(session_->unsent_bytes())},
                 {"suppressed", std::to_string(suppressed)}});
  }
}

void MqttBridge::publish(const std::vector<MqttMessage>& messages) {
  for (const MqttMessage& m : messages) {
    std::string error;
    // Not tried again: kept while the broker is away (the delta of a write served, say).
    if (!session_->publish(m.topic, m.payload, kQos, error, notify::MqttSession::WhileDown::keep)) {
      ++stats_.publish_failures;
      logger_.log(http::LogLevel::warn, "mqtt: cannot publish an answer", {{"topic", m.topic}, {"error", error}});
    }
  }
}

void MqttBridge::render_metrics(std::string& out) const {
  auto metric = [&](const char* type, const char* name, const char* help, const std::atomic<std::uint64_t>& v) {
    prometheus::append_metric(out, type, name, help, v.load(std::memory_order_relaxed));
  };
  metric("counter", "shadowd_mqtt_requests_total", "Messages received on the AWS IoT shadow request topics.", stats_.requests);
  metric("counter", "shadowd_mqtt_rejected_total", "Requests answered on .../rejected.", stats_.rejected);
  metric("counter", "shadowd_mqtt_ignored_total", "Messages on topics that are no shadow request.", stats_.ignored);
  metric("counter", "shadowd_mqtt_overloaded_total", "Requests refused with 429: no room for them in the queue.",
         stats_.overloaded);
  metric("counter", "shadowd_mqtt_shadow_throttled_total",
         "Requests refused with 429 while their own shadow had requests waiting: its share of the queue was full.",
         stats_.shadow_throttled);
  metric("counter", "shadowd_mqtt_too_large_total", "Requests refused with 413 at once: over --max-body-bytes.",
         stats_.too_large);
  metric("counter", "shadowd_mqtt_answers_dropped_total",
         "Answers dropped: the broker connection held too many unsent bytes for longer than a worker waits.",
         stats_.answers_dropped);
  prometheus::append_metric(out, "gauge", "shadowd_mqtt_queued_bytes", "Bytes of requests waiting for a worker.",
                            queue_budget_.used());
  prometheus::append_metric(out, "gauge", "shadowd_mqtt_unsent_bytes",
                            "Bytes of answers and announcements handed to the broker connection, not yet acknowledged.",
                            session_->unsent_bytes());
  metric("counter", "shadowd_mqtt_publish_failures_total", "Messages that could not be handed to the broker (answers are dropped, announcements retried).", stats_.publish_failures);
  metric("counter", "shadowd_mqtt_connects_total", "Connections made to the broker, the first included.", stats_.connects);
  metric("counter", "shadowd_mqtt_disconnects_total", "Connections to the broker lost.", stats_.disconnects);
  metric("gauge", "shadowd_mqtt_connected", "1 while connected to the broker.", stats_.connected);
  metric("counter", "shadowd_mqtt_claimed_elsewhere_total", "Requests left to the shadowd that claimed them first.",
         stats_.claimed_elsewhere);
  metric("counter", "shadowd_mqtt_unclaimed_total",
         "Requests not served because they waited past the claim window or the claim failed.", stats_.unclaimed);
  metric("counter", "shadowd_mqtt_announced_total", "Writes made through REST announced on the shadow topics.",
         stats_.announced);
  metric("counter", "shadowd_mqtt_announcements_dropped_total",
         "Writes made through REST not announced: too many waited for the broker.", stats_.announcements_dropped);
  metric("gauge", "shadowd_mqtt_announcements_waiting", "Writes made through REST waiting to be announced.",
         stats_.announcements_waiting);
}

}  // namespace deviceshadow::awsiot
