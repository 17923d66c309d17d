#include "notify/dispatcher.hpp"

#include "deviceshadow/prometheus.hpp"

namespace deviceshadow::notify {

void render_metrics(std::string& out, const std::vector<RegistrationStatus>& registrations) {
  if (registrations.empty()) return;
  auto each = [&](const char* name, const char* type, const char* help, auto value) {
    prometheus::append_header(out, name, type, help);
    for (const RegistrationStatus& r : registrations) prometheus::append_sample(out, name, "registration=\"" + r.id + "\"", value(r));
  };
  using S = const RegistrationStatus&;
  each("shadowd_notify_delivered_total", "counter", "Events delivered, by registration.",
       [](S r) { return std::to_string(r.delivered); });
  each("shadowd_notify_failed_attempts_total", "counter", "Failed delivery attempts, by registration.",
       [](S r) { return std::to_string(r.failed); });
  each("shadowd_notify_dead_lettered_total", "counter", "Events dead-lettered, by registration.",
       [](S r) { return std::to_string(r.dead_lettered); });
  each("shadowd_notify_dead_letters_evicted_total", "counter",
       "Dead letters removed, oldest first, to keep a registration's at --max-dead-letters, by registration.",
       [](S r) { return std::to_string(r.dead_letters_evicted); });
  each("shadowd_notify_pending", "gauge", "Change-feed entries not yet delivered or passed, by registration.",
       [](S r) { return std::to_string(r.pending); });
  each("shadowd_notify_lag_seconds", "gauge", "Age of the oldest undelivered event, by registration.",
       [](S r) { return prometheus::format_value(r.lag_seconds); });
  prometheus::append_header(out, "shadowd_notify_delivery_latency_seconds", "histogram",
         "Time from a write to its delivery, by registration.");
  for (S r : registrations) {
    prometheus::append_histogram(out, "shadowd_notify_delivery_latency_seconds", "registration=\"" + r.id + "\"", r.latency);
  }
}

}  // namespace deviceshadow::notify
