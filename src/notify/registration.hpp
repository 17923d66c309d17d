// Notification registrations: who wants to hear of which writes, and where to deliver them.
//
// A registration is a JSON document (stored whole by the Store, see RegistrationRecord):
//   {"id", "sections": "reported"|"desired"|"both", "match": RE2 over "{thing}#{name}",
//    "include": ["old","new","diff"], "paths": [JSON Pointer…], "filter": <a fleet-query filter>,
//    "target": {"type", …}, "enabled", "maxAttempts", "maxAgeSeconds"}
// parse_registration validates one completely (every fault is invalid_request naming its
// field, e.g. "target.url"; a filter that does not parse is invalid_filter) and fills in the defaults; render_registration writes it back in
// that complete form, which is what the store keeps and the API shows.
#pragma once

#include "deviceshadow/document.hpp"
#include "deviceshadow/store.hpp"

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace re2 {
class RE2;
}
namespace deviceshadow::query {
class Filter;
}

namespace deviceshadow::notify {

enum class SectionFilter { reported, desired, both };

// POST of each event to `url` (http or https), signed with `secret` when one is set.
struct WebhookTarget {
  std::string url;
  std::string secret;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{5000};
};

// SendMessageBatch to an SQS queue.
struct SqsTarget {
  std::string queue_url;
  std::string region;    // empty: the queue URL's, else the AWS environment's
  std::string endpoint;  // empty: the region's
};

// Publish to an SNS topic.
struct SnsTarget {
  std::string topic_arn;
  std::string region;    // empty: the ARN's
  std::string endpoint;  // empty: the region's
};

// PUBLISH to an MQTT broker, one topic per shadow from a template.
struct MqttTarget {
  std::string broker;                          // mqtt://host:port
  std::string topic = "shadows/{thing}/{name}";
  int qos = 1;                                 // 0 or 1
  std::string username;
  std::string password;
};

using TargetConfig = std::variant<WebhookTarget, SqsTarget, SnsTarget, MqttTarget>;

inline constexpr int kDefaultMaxAttempts = 10;
inline constexpr std::chrono::seconds kDefaultMaxAge{3600};

struct Registration {
  std::string id;
  SectionFilter sections = SectionFilter::both;
  std::string match = ".*";
  bool include_old = true;
  bool include_new = true;
  bool include_diff = true;
  std::vector<std::string> paths;  // empty: every path
  // A filter of the fleet-query language (docs/queries.md) the shadow must pass as the write
  // left it; empty: every write.
  std::string filter;
  TargetConfig target;
  bool enabled = true;
  int max_attempts = kDefaultMaxAttempts;
  // An event not delivered this long after its write is dead-lettered, whatever attempts are
  // left ("maxAgeSeconds", 1 s to 7 days).
  std::chrono::seconds max_age = kDefaultMaxAge;

  // True when "{thing}#{name}" matches `match` as a whole.
  bool matches_shadow(std::string_view thing, std::string_view name) const;
  // True when `paths` is empty or one of the changed paths is at, below or above one of them
  // (a change of an ancestor replaces the value at the path).
  bool matches_paths(std::span<const std::string> changed_paths) const;
  // True when `filter` is empty or `after` (the shadow as the write left it) passes it;
  // time:now in the filter is the write's time, `write_ns`.
  bool matches_filter(const ShadowKey& key, const ShadowRecord& after, std::int64_t write_ns,
                      const TimestampKeys& keys) const;
  // The registration selects a section this write changed.
  bool selects(Section section) const {
    return sections == SectionFilter::both || (sections == SectionFilter::reported) == (section == Section::reported);
  }

  std::shared_ptr<const re2::RE2> matcher;  // `match`, compiled once
  // `filter`, parsed once; null when it is empty or names time:now (then parsed per write).
  std::shared_ptr<const query::Filter> parsed_filter;
};

// Validates a registration document for `id` (the id of the URL; the document may repeat it).
// Throws Error: invalid_json for malformed JSON, invalid_request naming the field otherwise.
Registration parse_registration(std::string_view id, std::string_view json);
inline constexpr std::size_t kMaxMqttTopicBytes = 65535;  // MQTT's limit on a topic
// What a registration given now must also pass, beyond what parse_registration checks of one
// stored by an earlier version (which must still load): an MQTT broker URL without credentials
// or a path (shadowd dropped them), an MQTT topic template of known placeholders whose topics
// fit kMaxMqttTopicBytes whatever the names, and an AWS region that is a region's name.
// Throws Error::invalid_request naming the field.
void check_new_registration(const Registration& registration);
// A registration's selection alone ("sections", "match", "include", "paths"; no id, target or
// other member): the filter of a live stream (docs/streams.md), validated as parse_registration does.
Registration parse_selection(const json::object& selection);
// The complete document, defaults included (a secret and a password are included: the store
// needs them; the API hides them, see render_registration_public).
std::string render_registration(const Registration& registration);
// As render_registration with what may be a credential replaced by "***": "secret",
// "password", every header value, and in a webhook's URL the password and each query value.
std::string render_registration_public(const Registration& registration);

// True for 1–64 characters from [A-Za-z0-9_.-].
bool valid_registration_id(std::string_view id) noexcept;

}  // namespace deviceshadow::notify
