#include "http/metrics.hpp"

#include "deviceshadow/prometheus.hpp"

#include <chrono>
#include <cstdio>

namespace deviceshadow::http {
using prometheus::append_histogram;
using prometheus::append_metric;
using prometheus::format_value;
using prometheus::append_header;
using prometheus::append_sample;

std::string_view method_label(std::string_view method) {
  for (std::string_view known : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    if (method == known) return known;
  }
  return "other";
}

void Metrics::request_finished(std::string_view route, std::string_view method, int status, double seconds) {
  --in_flight_;
  std::lock_guard lock(mutex_);
  ++requests_[{std::string(route), std::string(method_label(method)), status}];
  request_latency_[std::string(route)].observe(seconds);
}

void Metrics::store_operation(std::string_view operation, double seconds) {
  std::lock_guard lock(mutex_);
  store_latency_[std::string(operation)].observe(seconds);
}


std::string Metrics::render(const EngineStats& engine) const {
  std::string out;
  std::unique_lock lock(mutex_);
  append_header(out, "shadowd_http_requests_total", "counter", "HTTP requests by route, method and status.");
  for (const auto& [key, count] : requests_) {
    const auto& [route, method, status] = key;
    append_sample(out, "shadowd_http_requests_total",
           "route=\"" + route + "\",method=\"" + method + "\",status=\"" + std::to_string(status) + "\"",
           std::to_string(count));
  }
  append_header(out, "shadowd_http_request_duration_seconds", "histogram", "HTTP request latency by route.");
  for (const auto& [route, h] : request_latency_) append_histogram(out, "shadowd_http_request_duration_seconds", "route=\"" + route + "\"", h);
  append_header(out, "shadowd_store_operation_duration_seconds", "histogram", "Store operation latency.");
  for (const auto& [op, h] : store_latency_) append_histogram(out, "shadowd_store_operation_duration_seconds", "operation=\"" + op + "\"", h);
  append_header(out, "shadowd_http_requests_in_flight", "gauge", "HTTP requests being served.");
  append_sample(out, "shadowd_http_requests_in_flight", "", std::to_string(in_flight_.load()));
  append_header(out, "shadowd_http_requests_handed_on_total", "counter",
                "Requests tried on an I/O thread and handed to the workers: the store could not read at once.");
  append_sample(out, "shadowd_http_requests_handed_on_total", "", std::to_string(handed_on_.load()));
  auto metric = [&](const char* type, const char* name, const char* help, const std::atomic<std::uint64_t>& v) {
    append_metric(out, type, name, help, v.load(std::memory_order_relaxed));
  };
  auto counter = [&](const char* name, const char* help, const std::atomic<std::uint64_t>& v) {
    metric("counter", name, help, v);
  };
  if (const HttpStats* http = http_.load()) {
    metric("gauge", "shadowd_http_connections_open", "Open client connections.", http->open_connections);
    counter("shadowd_http_connections_rejected_total", "Connections refused with 503 over the connection limit.",
            http->rejected_connections);
    counter("shadowd_http_accept_failures_total", "Failed accepts (e.g. out of file descriptors), each followed by a pause.",
            http->accept_failures);
    counter("shadowd_http_requests_rejected_total", "Requests refused by the transport (oversized, malformed, ambiguous framing).",
            http->rejected_requests);
    metric("gauge", "shadowd_http_response_bytes_in_flight", "Response bytes being written to clients.",
           http->response_bytes_in_flight);
    counter("shadowd_http_responses_shed_total", "Read responses answered 503 while too many bytes waited for slow clients.",
            http->shed_responses);
  }
  counter("shadowd_writes_stored_total", "Writes that stored something.", engine.stored_writes);
  counter("shadowd_writes_unchanged_total", "Accepted writes that changed nothing.", engine.unchanged_writes);
  counter("shadowd_write_retries_total", "Read-merge-write attempts repeated after a version conflict.", engine.retries);
  counter("shadowd_version_conflicts_total", "Writes answered with version_conflict.", engine.conflicts);
  counter("shadowd_stale_values_total", "Timestamped values rejected as not newer than stored.", engine.stale_values);
  counter("shadowd_acknowledgements_total", "Desired leaves acknowledged by reports.", engine.acknowledgements);
  // Sections render outside the lock: they take locks of their own, which may be held by a
  // thread waiting to record a store operation here.
  const std::vector<std::function<void(std::string&)>> sections = sections_;
  lock.unlock();
  for (const auto& append : sections) append(out);
  return out;
}

template <class F>
auto MeteredStore::timed(std::string_view operation, F&& f) {
  auto start = std::chrono::steady_clock::now();
  struct Record {
    Metrics& m;
    std::string_view op;
    std::chrono::steady_clock::time_point start;
    ~Record() { m.store_operation(op, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()); }
  } record{metrics_, operation, start};
  return f();
}

std::vector<ShadowRecord> MeteredStore::read(std::span<const ShadowKey> keys) {
  return timed("read", [&] { return inner_.read(keys); });
}
// Timed as a read when it reads.
std::optional<ShadowRecord> MeteredStore::try_read(const ShadowKey& key) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<ShadowRecord> record = inner_.try_read(key);
  if (record) metrics_.store_operation("read", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return record;
}
void MeteredStore::write(const ShadowWrite& w) {
  timed("write", [&] { inner_.write(w); });
}
std::vector<ShadowSummary> MeteredStore::list_shadows(std::string_view thing, std::string_view after, std::size_t limit) {
  return timed("list_shadows", [&] { return inner_.list_shadows(thing, after, limit); });
}
std::vector<std::string> MeteredStore::list_things(std::string_view prefix, std::string_view after, std::size_t limit) {
  return timed("list_things", [&] { return inner_.list_things(prefix, after, limit); });
}
std::vector<ShadowKey> MeteredStore::list_shadow_keys(const ShadowKey* after, std::size_t limit) {
  return timed("list_shadow_keys", [&] { return inner_.list_shadow_keys(after, limit); });
}
std::vector<HistoryEvent> MeteredStore::history(const ShadowKey& key, const HistoryQuery& query) {
  return timed("history", [&] { return inner_.history(key, query); });
}
std::vector<ShadowHistoryEvent> MeteredStore::history_since(std::int64_t since_ns, const ShadowHistoryEvent* after,
                                                          std::size_t limit) {
  return timed("history_since", [&] { return inner_.history_since(since_ns, after, limit); });
}
void MeteredStore::append_history(std::span<const ShadowHistoryEvent> events) {
  timed("append_history", [&] { inner_.append_history(events); });
}
std::optional<StateImage> MeteredStore::image_before(const ShadowKey& key, std::string_view event_id) {
  return timed("image_before", [&] { return inner_.image_before(key, event_id); });
}
std::vector<IndexHit> MeteredStore::index_range(std::string_view field, const IndexRange& range, const IndexHit* after,
                                                std::size_t limit) {
  return timed("index_range", [&] { return inner_.index_range(field, range, after, limit); });
}
std::uint64_t MeteredStore::index_count(std::string_view field, const IndexRange& range, std::uint64_t cap) {
  return timed("index_count", [&] { return inner_.index_count(field, range, cap); });
}
std::size_t MeteredStore::purge(std::int64_t now_ns) {
  return timed("purge", [&] { return inner_.purge(now_ns); });
}

std::size_t MeteredStore::purge_dead_letters(std::int64_t now_ns) {
  return timed("purge_dead_letters", [&] { return inner_.purge_dead_letters(now_ns); });
}
bool MeteredStore::claim(std::string_view id, std::string_view owner, std::int64_t now_ns, std::int64_t expires_ns) {
  return timed("claim", [&] { return inner_.claim(id, owner, now_ns, expires_ns); });
}

}  // namespace deviceshadow::http
