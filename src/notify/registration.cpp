#include "notify/registration.hpp"

#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/uri.hpp"
#include "deviceshadow/validation.hpp"
#include "notify/mqtt_session.hpp"
#include "query/filter.hpp"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <type_traits>

namespace deviceshadow::notify {
namespace {

// The member `key` of `o` as a string, or `fallback` when absent. `field` names it in errors.
std::string string_member(const json::object& o, std::string_view key, const std::string& field,
                          std::string fallback = {}) {
  const json::value* v = o.if_contains(key);
  if (!v) return fallback;
  if (!v->is_string()) throw Error::invalid_request(field + " must be a string", field);
  return std::string(v->get_string());
}

std::string required_string(const json::object& o, std::string_view key, const std::string& field) {
  if (!o.contains(key)) throw Error::invalid_request(field + " is required", field);
  std::string s = string_member(o, key, field);
  if (s.empty()) throw Error::invalid_request(field + " must not be empty", field);
  return s;
}

std::int64_t integer_member(const json::object& o, std::string_view key, const std::string& field,
                            std::int64_t fallback, std::int64_t min, std::int64_t max) {
  const json::value* v = o.if_contains(key);
  if (!v) return fallback;
  const std::string range = " from " + std::to_string(min) + " to " + std::to_string(max);
  if (!v->is_int64() || v->get_int64() < min || v->get_int64() > max) {
    throw Error::invalid_request(field + " must be an integer" + range, field);
  }
  return v->get_int64();
}

void allow_only(const json::object& o, std::initializer_list<std::string_view> names, const std::string& prefix) {
  for (const auto& member : o) {
    std::string_view key(member.key().data(), member.key().size());
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      std::string field = prefix + std::string(key);
      throw Error::invalid_request("unknown member '" + field + "'", field);
    }
  }
}

// The URL with what may be a credential hidden: the password of its user part and the value
// of each query parameter ("https://u:***@host/p?token=***").
std::string hide_url_secrets(std::string_view url) {
  std::string out;
  const std::size_t scheme = url.find("://");
  const std::size_t authority = scheme == std::string_view::npos ? 0 : scheme + 3;
  const std::size_t path = std::min(url.find_first_of("/?#", authority), url.size());
  const std::size_t at = url.substr(0, path).rfind('@');
  if (at != std::string_view::npos && at >= authority) {
    const std::size_t colon = url.substr(0, at).find(':', authority);
    out += url.substr(0, colon == std::string_view::npos ? at : colon + 1);
    if (colon != std::string_view::npos) out += "***";
    out += url.substr(at, path - at);
  } else {
    out += url.substr(0, path);
  }
  const std::size_t query = std::min(url.find('?', path), url.size());
  const std::size_t fragment = std::min(url.find('#', query), url.size());
  out += url.substr(path, query - path);
  if (query < url.size()) {
    std::string_view rest = url.substr(query, fragment - query);  // "?a=1&b=2"
    for (std::size_t start = 0; start < rest.size();) {
      const std::size_t end = std::min(rest.find('&', start + 1), rest.size());
      const std::string_view parameter = rest.substr(start, end - start);  // "?a=1" or "&b=2"
      const std::size_t equals = parameter.find('=');
      out += parameter.substr(0, equals == std::string_view::npos ? parameter.size() : equals + 1);
      if (equals != std::string_view::npos) out += "***";
      start = end;
    }
  }
  out += url.substr(fragment);
  return out;
}

// An absolute http(s) or mqtt URL with a host; `schemes` lists the accepted ones.
void check_url(const std::string& url, std::initializer_list<std::string_view> schemes, const std::string& field) {
  std::size_t colon = url.find("://");
  std::string_view scheme = colon == std::string::npos ? std::string_view() : std::string_view(url).substr(0, colon);
  std::string accepted;
  for (std::string_view s : schemes) accepted += (accepted.empty() ? "" : " or ") + std::string(s) + "://";
  if (std::find(schemes.begin(), schemes.end(), scheme) == schemes.end()) {
    throw Error::invalid_request(field + " must be an " + accepted + " URL", field);
  }
  std::string_view rest = std::string_view(url).substr(colon + 3);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);  // user part
  if (authority.empty() || authority.front() == ':' ||
      url.find_first_of(" \t\r\n") != std::string::npos) {
    throw Error::invalid_request(field + " must name a host: " + hide_url_secrets(url), field);
  }
  // A port, when given, is 1 to 65535: neither libcurl nor libmosquitto may be left to wrap or
  // replace it (an event would go to another service than the one the registration names).
  const std::size_t bracket = authority.rfind(']');
  const std::size_t port_colon = authority.rfind(':');
  if (port_colon != std::string_view::npos && (bracket == std::string_view::npos || port_colon > bracket)) {
    const std::string_view port = authority.substr(port_colon + 1);
    if (!parse_port(port)) {
      throw Error::invalid_request(field + ": port '" + std::string(port) + "' is out of range (1-65535)", field);
    }
  }
}

// RFC 9110 token characters, for header names.
bool header_name(std::string_view name) {
  static constexpr std::string_view kSpecials = "!#$%&'*+-.^_`|~";
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || kSpecials.find(c) != std::string_view::npos;
  });
}

bool valid_pointer(std::string_view p) {
  if (!p.empty() && p.front() != '/') return false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '~' && (i + 1 == p.size() || (p[i + 1] != '0' && p[i + 1] != '1'))) return false;
  }
  return true;
}

TargetConfig parse_target(const json::object& t) {
  const std::string type = required_string(t, "type", "target.type");
  if (type == "webhook") {
    allow_only(t, {"type", "url", "secret", "headers", "timeoutMs"}, "target.");
    WebhookTarget w;
    w.url = required_string(t, "url", "target.url");
    check_url(w.url, {"http", "https"}, "target.url");
    w.secret = string_member(t, "secret", "target.secret");
    if (const json::value* h = t.if_contains("headers")) {
      if (!h->is_object()) throw Error::invalid_request("target.headers must be an object of strings", "target.headers");
      for (const auto& m : h->get_object()) {
        std::string name(m.key().data(), m.key().size());
        std::string field = "target.headers." + name;
        if (!header_name(name)) throw Error::invalid_request(field + ": not a valid header name", field);
        if (!m.value().is_string()) throw Error::invalid_request(field + " must be a string", field);
        std::string value(m.value().get_string());
        if (value.find_first_of("\r\n") != std::string::npos || value.find('\0') != std::string::npos) {
          throw Error::invalid_request(field + " must not contain line breaks", field);
        }
        w.headers.emplace_back(std::move(name), std::move(value));
      }
    }
    w.timeout = std::chrono::milliseconds(integer_member(t, "timeoutMs", "target.timeoutMs", 5000, 1, 300000));
    return w;
  }
  if (type == "sqs") {
    allow_only(t, {"type", "queueUrl", "region", "endpoint"}, "target.");
    SqsTarget s{required_string(t, "queueUrl", "target.queueUrl"), string_member(t, "region", "target.region"),
                string_member(t, "endpoint", "target.endpoint")};
    check_url(s.queue_url, {"http", "https"}, "target.queueUrl");
    if (!s.endpoint.empty()) check_url(s.endpoint, {"http", "https"}, "target.endpoint");
    return s;
  }
  if (type == "sns") {
    allow_only(t, {"type", "topicArn", "region", "endpoint"}, "target.");
    SnsTarget s{required_string(t, "topicArn", "target.topicArn"), string_member(t, "region", "target.region"),
                string_member(t, "endpoint", "target.endpoint")};
    if (s.topic_arn.rfind("arn:", 0) != 0 || s.topic_arn.find(":sns:") == std::string::npos) {
      throw Error::invalid_request("target.topicArn must be an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)",
                                   "target.topicArn");
    }
    if (!s.endpoint.empty()) check_url(s.endpoint, {"http", "https"}, "target.endpoint");
    return s;
  }
  if (type == "mqtt") {
    allow_only(t, {"type", "broker", "topic", "qos", "username", "password"}, "target.");
    MqttTarget m;
    m.broker = required_string(t, "broker", "target.broker");
    check_url(m.broker, {"mqtt"}, "target.broker");
    try {
      parse_mqtt_broker(m.broker);
    } catch (const std::invalid_argument& e) {
      throw Error::invalid_request("target.broker: " + std::string(e.what()), "target.broker");
    }
    m.topic = string_member(t, "topic", "target.topic", m.topic);
    if (m.topic.empty() || m.topic.find_first_of("+#") != std::string::npos || m.topic.find('\0') != std::string::npos) {
      throw Error::invalid_request("target.topic must be a non-empty topic without wildcards (+, #)", "target.topic");
    }
    m.qos = static_cast<int>(integer_member(t, "qos", "target.qos", 1, 0, 1));
    m.username = string_member(t, "username", "target.username");
    m.password = string_member(t, "password", "target.password");
    return m;
  }
  throw Error::invalid_request("target.type must be webhook, sqs, sns or mqtt", "target.type");
}

std::string_view to_string(SectionFilter f) {
  switch (f) {
    case SectionFilter::reported: return "reported";
    case SectionFilter::desired: return "desired";
    case SectionFilter::both: return "both";
  }
  return "both";
}

json::object render_target(const TargetConfig& target, bool hide_secrets) {
  auto secret = [&](const std::string& s) { return json::string(hide_secrets ? "***" : s); };
  return std::visit(
      [&](const auto& t) -> json::object {
        using T = std::decay_t<decltype(t)>;
        json::object o;
        if constexpr (std::is_same_v<T, WebhookTarget>) {
          o["type"] = "webhook";
          o["url"] = hide_secrets ? hide_url_secrets(t.url) : t.url;
          if (!t.secret.empty()) o["secret"] = secret(t.secret);
          if (!t.headers.empty()) {
            json::object headers;
            for (const auto& [name, value] : t.headers) headers[name] = secret(value);
            o["headers"] = std::move(headers);
          }
          o["timeoutMs"] = t.timeout.count();
        } else if constexpr (std::is_same_v<T, SqsTarget>) {
          o["type"] = "sqs";
          o["queueUrl"] = t.queue_url;
          if (!t.region.empty()) o["region"] = t.region;
          if (!t.endpoint.empty()) o["endpoint"] = t.endpoint;
        } else if constexpr (std::is_same_v<T, SnsTarget>) {
          o["type"] = "sns";
          o["topicArn"] = t.topic_arn;
          if (!t.region.empty()) o["region"] = t.region;
          if (!t.endpoint.empty()) o["endpoint"] = t.endpoint;
        } else {
          o["type"] = "mqtt";
          o["broker"] = t.broker;
          o["topic"] = t.topic;
          o["qos"] = t.qos;
          if (!t.username.empty()) o["username"] = t.username;
          if (!t.password.empty()) o["password"] = secret(t.password);
        }
        return o;
      },
      target);
}

std::string render(const Registration& r, bool hide_secrets) {
  json::object o;
  o["id"] = r.id;
  o["sections"] = to_string(r.sections);
  o["match"] = r.match;
  json::array include;
  if (r.include_old) include.emplace_back("old");
  if (r.include_new) include.emplace_back("new");
  if (r.include_diff) include.emplace_back("diff");
  o["include"] = std::move(include);
  if (!r.paths.empty()) {
    json::array paths;
    for (const std::string& p : r.paths) paths.emplace_back(p);
    o["paths"] = std::move(paths);
  }
  if (!r.filter.empty()) o["filter"] = r.filter;
  o["target"] = render_target(r.target, hide_secrets);
  o["enabled"] = r.enabled;
  o["maxAttempts"] = r.max_attempts;
  o["maxAgeSeconds"] = r.max_age.count();
  return to_json(o);
}

}  // namespace

bool valid_registration_id(std::string_view id) noexcept {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

bool Registration::matches_shadow(std::string_view thing, std::string_view name) const {
  // The default: names are valid UTF-8 without control characters (no newline), so it matches
  // every subject.
  if (match == ".*") return true;
  std::string subject;
  subject.reserve(thing.size() + 1 + name.size());
  subject.append(thing).append(1, '#').append(name);
  return RE2::FullMatch(subject, *matcher);
}

bool Registration::matches_paths(std::span<const std::string> changed_paths) const {
  if (paths.empty()) return true;
  // `a` is `b` or an ancestor of it, as JSON Pointers.
  auto covers = [](std::string_view a, std::string_view b) {
    return b.substr(0, a.size()) == a && (b.size() == a.size() || b[a.size()] == '/');
  };
  for (const std::string& changed : changed_paths) {
    for (const std::string& p : paths) {
      if (covers(p, changed) || covers(changed, p)) return true;
    }
  }
  return false;
}

bool Registration::matches_filter(const ShadowKey& key, const ShadowRecord& after, std::int64_t write_ns,
                                  const TimestampKeys& keys) const {
  if (filter.empty()) return true;
  const query::Subject subject(key, after, keys);
  return parsed_filter ? parsed_filter->matches(subject) : query::Filter::parse(filter, write_ns).matches(subject);
}

namespace {

// The members of `o` that select writes (sections, match, include, paths) into `r`.
void read_selection(const json::object& o, Registration& r) {
  const std::string sections = string_member(o, "sections", "sections", "both");
  if (sections == "reported") {
    r.sections = SectionFilter::reported;
  } else if (sections == "desired") {
    r.sections = SectionFilter::desired;
  } else if (sections != "both") {
    throw Error::invalid_request("sections must be reported, desired or both", "sections");
  }

  r.match = string_member(o, "match", "match", r.match);
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(1 << 20);  // a registration's expression stays small
  auto matcher = std::make_shared<const RE2>(r.match, options);
  if (!matcher->ok()) throw Error::invalid_request("match is not a valid RE2 expression: " + matcher->error(), "match");
  r.matcher = std::move(matcher);

  if (const json::value* include = o.if_contains("include")) {
    if (!include->is_array() || include->get_array().empty()) {
      throw Error::invalid_request("include must be a non-empty array of old, new, diff", "include");
    }
    r.include_old = r.include_new = r.include_diff = false;
    for (const json::value& v : include->get_array()) {
      bool* flag = !v.is_string()        ? nullptr
                   : v.get_string() == "old"  ? &r.include_old
                   : v.get_string() == "new"  ? &r.include_new
                   : v.get_string() == "diff" ? &r.include_diff
                                              : nullptr;
      if (!flag) throw Error::invalid_request("include may hold only old, new and diff", "include");
      *flag = true;
    }
  }

  if (const json::value* paths = o.if_contains("paths")) {
    if (!paths->is_array()) throw Error::invalid_request("paths must be an array of JSON Pointers", "paths");
    for (const json::value& v : paths->get_array()) {
      if (!v.is_string() || !valid_pointer(v.get_string())) {
        throw Error::invalid_request("paths must hold JSON Pointers such as /climate/indoor", "paths");
      }
      r.paths.emplace_back(v.get_string());
    }
  }
}

}  // namespace

Registration parse_selection(const json::object& o) {
  allow_only(o, {"sections", "match", "include", "paths"}, "");
  Registration r;
  read_selection(o, r);
  return r;
}

void check_new_registration(const Registration& registration) {
  auto check_region = [](const std::string& region) {
    const auto in_name = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
    if (!std::all_of(region.begin(), region.end(), in_name)) {
      throw Error::invalid_request("target.region must be an AWS region name such as eu-north-1", "target.region");
    }
  };
  if (const auto* sqs = std::get_if<SqsTarget>(&registration.target)) check_region(sqs->region);
  if (const auto* sns = std::get_if<SnsTarget>(&registration.target)) check_region(sns->region);
  const auto* mqtt = std::get_if<MqttTarget>(&registration.target);
  if (!mqtt) return;
  try {
    check_plain_mqtt_broker(mqtt->broker, "target.username and target.password");
  } catch (const std::invalid_argument& e) {
    throw Error::invalid_request("target.broker: " + std::string(e.what()), "target.broker");
  }
  // The longest topic the template can make must fit MQTT's 65,535 bytes: a name takes up to
  // three times its bytes, percent-encoded.
  std::size_t longest = mqtt->topic.size();
  for (std::size_t open = mqtt->topic.find('{'); open != std::string::npos; open = mqtt->topic.find('{', open + 1)) {
    const std::size_t close = mqtt->topic.find('}', open);
    const std::string_view field =
        close == std::string::npos ? std::string_view() : std::string_view(mqtt->topic).substr(open + 1, close - open - 1);
    if (field == "thing") {
      longest += 3 * kMaxThingBytes;
    } else if (field == "name") {
      longest += 3 * kMaxShadowNameChars;
    } else if (field == "section" || field == "type") {
      longest += 8;  // "reported", "desired", "both"; "updated", "deleted"
    } else {
      throw Error::invalid_request("target.topic: '{' starts a placeholder: {thing}, {name}, {section} or {type}",
                                   "target.topic");
    }
  }
  if (longest > kMaxMqttTopicBytes) {
    throw Error::invalid_request("target.topic: the topics it makes could pass MQTT's limit of 65,535 bytes (a name "
                                 "percent-encoded takes up to three times its bytes)",
                                 "target.topic");
  }
}

Registration parse_registration(std::string_view id, std::string_view text) {
  if (!valid_registration_id(id)) {
    throw Error::invalid_request("id must be 1-64 characters from A-Z a-z 0-9 _ . -", "id");
  }
  json::value doc = parse_json(text, 16);
  if (!doc.is_object()) throw Error::invalid_request("a registration must be a JSON object");
  const json::object& o = doc.get_object();
  allow_only(o, {"id", "sections", "match", "include", "paths", "filter", "target", "enabled", "maxAttempts",
                 "maxAgeSeconds"},
             "");
  Registration r;
  r.id = string_member(o, "id", "id", std::string(id));
  if (r.id != id) throw Error::invalid_request("id '" + r.id + "' differs from the id in the URL", "id");

  read_selection(o, r);

  r.filter = string_member(o, "filter", "filter");
  if (!r.filter.empty()) {
    auto parsed = std::make_shared<const query::Filter>(query::Filter::parse(r.filter, now().unix_nanos()));
    if (r.filter.find("time:now") == std::string::npos) r.parsed_filter = std::move(parsed);
  }

  const json::value* target = o.if_contains("target");
  if (!target) throw Error::invalid_request("target is required", "target");
  if (!target->is_object()) throw Error::invalid_request("target must be an object", "target");
  r.target = parse_target(target->get_object());

  if (const json::value* enabled = o.if_contains("enabled")) {
    if (!enabled->is_bool()) throw Error::invalid_request("enabled must be true or false", "enabled");
    r.enabled = enabled->get_bool();
  }
  r.max_attempts = static_cast<int>(integer_member(o, "maxAttempts", "maxAttempts", kDefaultMaxAttempts, 1, 1000));
  r.max_age = std::chrono::seconds(integer_member(o, "maxAgeSeconds", "maxAgeSeconds", kDefaultMaxAge.count(), 1, 7 * 86400));
  return r;
}

std::string render_registration(const Registration& registration) { return render(registration, false); }

std::string render_registration_public(const Registration& registration) { return render(registration, true); }

}  // namespace deviceshadow::notify
