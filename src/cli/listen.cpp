#include "cli/listen.hpp"

#include "aws/sigv4.hpp"
#include "deviceshadow/ascii.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "http/server.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <iostream>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace deviceshadow::cli {
namespace {

namespace srv = deviceshadow::http;

constexpr std::string_view kSignatureHeader = "X-Shadow-Signature";
constexpr std::string_view kEventTypePrefix = "deviceshadow.shadow.";
constexpr std::size_t kMaxValueChars = 60;  // longer values are cut in the readable summary

// Empty when `value` ("t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>", more
// than one v1 allowed) signs `body` with `secret` at a time within the tolerance of `now`;
// otherwise why not.
std::string check_signature(std::string_view value, std::string_view secret, std::string_view body, std::int64_t now) {
  std::string_view t;
  std::vector<std::string> signatures;
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view item = trim_spaces_and_tabs(value.substr(0, comma));
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = item.substr(0, eq);
    const std::string_view v = item.substr(eq + 1);
    if (key == "t") t = v;
    if (key == "v1") {
      std::string lower(v);
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      signatures.push_back(std::move(lower));
    }
  }
  std::int64_t seconds = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), seconds);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || signatures.empty()) {
    return "malformed X-Shadow-Signature header (expected t=<unix seconds>,v1=<hex HMAC-SHA256>)";
  }
  std::string signed_text;
  signed_text.reserve(t.size() + 1 + body.size());
  signed_text.append(t).append(1, '.').append(body);
  const std::string expected = aws::hex_hmac_sha256(secret, signed_text);
  bool match = false;
  for (const std::string& s : signatures) {
    // Constant time: the comparison takes as long whatever the number of matching bytes.
    if (s.size() == expected.size() && CRYPTO_memcmp(s.data(), expected.data(), expected.size()) == 0) match = true;
  }
  if (!match) return "signature does not match";
  const std::int64_t skew = now > seconds ? now - seconds : seconds - now;
  if (skew > kSignatureToleranceSeconds) {
    return "signature timestamp is " + std::to_string(skew) + " s from the receiver's clock (at most " +
           std::to_string(kSignatureToleranceSeconds) + " s allowed)";
  }
  return "";
}

std::string text(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v) return "";
  return escape_controls(v->is_string() ? std::string_view(v->get_string()) : std::string_view(to_json(*v)));
}

const json::object* object(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

const json::array* array(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_array() ? &v->get_array() : nullptr;
}

// Compact JSON, cut to about kMaxValueChars (never inside a UTF-8 sequence).
std::string short_json(const json::value& v) {
  std::string s = escape_controls(to_json(v));
  if (s.size() <= kMaxValueChars) return s;
  std::size_t cut = kMaxValueChars - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  s.resize(cut);
  return s + "...";
}

// "update /temp 20 -> 21", "add /hum 40", "remove /sp 22".
std::string describe_change(const json::object& c) {
  std::string path = text(c, "path");
  std::string out = text(c, "op") + " " + (path.empty() ? "(root)" : path);
  const json::value* old_value = c.if_contains("old");
  const json::value* new_value = c.if_contains("new");
  if (old_value) out += " " + short_json(*old_value);
  if (old_value && new_value) out += " ->";
  if (new_value) out += " " + short_json(*new_value);
  return out;
}

}  // namespace

std::string describe_event(const json::object& event) {
  const json::object empty;
  const json::object* data_ptr = object(event, "data");
  const json::object& data = data_ptr ? *data_ptr : empty;
  std::string time = text(event, "time");
  std::string type = text(event, "type");
  if (type.starts_with(kEventTypePrefix)) type.erase(0, kEventTypePrefix.size());
  std::string subject = data.contains("thing") && data.contains("name") ? text(data, "thing") + "#" + text(data, "name")
                                                                          : text(event, "subject");
  if (subject.empty()) subject = "id " + text(event, "id");
  std::string head = (time.empty() ? "-" : time) + " " + (type.empty() ? "event" : type) + " " + subject;

  // Acknowledgements also appear as removals of desired; they are marked there.
  std::vector<std::pair<std::string, const json::value*>> acknowledged;
  if (const json::array* acks = array(data, "acknowledged")) {
    for (const json::value& a : *acks) {
      if (a.is_object()) acknowledged.emplace_back(text(a.get_object(), "path"), a.get_object().if_contains("value"));
    }
  }
  std::vector<bool> ack_shown(acknowledged.size(), false);
  std::vector<std::string> changes;  // "section change"
  int sections = 0;
  for (const char* s : {"reported", "desired"}) {
    const json::object* section = object(data, s);
    if (!section) continue;
    ++sections;
    head += std::string(" ") + s + " v" + text(*section, "version");
    const json::array* diff = array(*section, "diff");
    if (!diff) {  // a registration may ask for the states without the diff
      if (const json::value* state = section->if_contains("new")) changes.push_back(std::string(s) + " now " + short_json(*state));
      continue;
    }
    for (const json::value& c : *diff) {
      if (!c.is_object()) continue;
      std::string line = std::string(s) + " " + describe_change(c.get_object());
      if (std::string_view(s) == "desired" && text(c.get_object(), "op") == "remove") {
        for (std::size_t i = 0; i < acknowledged.size(); ++i) {
          if (!ack_shown[i] && acknowledged[i].first == text(c.get_object(), "path")) {
            ack_shown[i] = true;
            line += " (acknowledged)";
            break;
          }
        }
      }
      changes.push_back(std::move(line));
    }
  }
  for (std::size_t i = 0; i < acknowledged.size(); ++i) {
    if (ack_shown[i]) continue;
    std::string line = "acknowledged " + acknowledged[i].first;
    if (acknowledged[i].second) line += " " + short_json(*acknowledged[i].second);
    changes.push_back(std::move(line));
  }
  std::string tail;
  if (data.contains("clientToken")) tail += " (clientToken " + text(data, "clientToken") + ")";
  if (const json::value* t = data.if_contains("truncated"); t && t->is_bool() && t->get_bool()) tail += " [truncated: no old/new states]";

  const bool acks_marked = std::find(ack_shown.begin(), ack_shown.end(), false) == ack_shown.end();
  if (changes.size() == 1 && sections == 1 && acks_marked) {
    // The section is named in the head already.
    const std::string& only = changes[0];
    return head + ": " + only.substr(only.find(' ') + 1) + tail + "\n";
  }
  std::string out = head + tail + "\n";
  for (const std::string& c : changes) out += "  " + c + "\n";
  return out;
}

namespace {

// The CloudEvent as received on one line: the body itself unless it spans lines.
std::string one_line(const std::string& body, const json::value& parsed) {
  if (body.find_first_of("\r\n") == std::string::npos) return body;
  return to_json(parsed);
}

class Receiver {
 public:
  explicit Receiver(const ListenOptions& options) : options_(options) {}

  srv::HttpResponse handle(const srv::HttpRequest& r) {
    if (r.method != "POST") {
      srv::HttpResponse response = refuse(r, 405, "only POST is accepted");
      response.headers.emplace_back("Allow", "POST");
      return response;
    }
    if (!options_.secret.empty()) {
      const std::string* signature = r.header(kSignatureHeader);
      const std::string why = signature ? check_signature(*signature, options_.secret, r.body, std::time(nullptr))
                                        : "missing X-Shadow-Signature header";
      if (!why.empty()) return refuse(r, 401, why);
    }
    json::value event;
    try {
      event = parse_json(r.body);
    } catch (const Error& e) {
      return refuse(r, 400, std::string("body is not JSON: ") + e.what());
    }
    if (!event.is_object()) return refuse(r, 400, "body is not a JSON object (a CloudEvent)");
    const std::string out = options_.json ? one_line(r.body, event) + "\n" : describe_event(event.get_object());
    {
      std::lock_guard lock(output_);
      std::cout << out << std::flush;
    }
    return {204, "text/plain", "", {}};
  }

 private:
  srv::HttpResponse refuse(const srv::HttpRequest& r, int status, const std::string& why) {
    {
      std::lock_guard lock(output_);
      std::cerr << "shadowctl: refused " << r.method << " " << r.target << ": " << status << " " << why << std::endl;
    }
    return {status, "text/plain", why + "\n", {}};
  }

  const ListenOptions& options_;
  std::mutex output_;
};

}  // namespace

int listen(const ListenOptions& options) {
  srv::block_shutdown_signals();  // before any thread starts: SIGINT/SIGTERM go to the server's run()
  Receiver receiver(options);
  srv::HttpServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  server_options.workers = 4;
  server_options.max_body_bytes = std::size_t{16} << 20;
  std::optional<srv::HttpServer> server;
  try {
    server.emplace(
        server_options, [&receiver](const srv::HttpRequest& r) { return receiver.handle(r); },
        [](int status, const std::string& message) { return srv::HttpResponse{status, "text/plain", message + "\n", {}}; });
  } catch (const std::exception& e) {
    std::cerr << "shadowctl: " << e.what() << "\n";  // "cannot listen on HOST:PORT: why"
    return 1;
  }
  const bool v6 = options.host.find(':') != std::string::npos;
  std::cerr << "shadowctl: listening on http://" << (v6 ? "[" + options.host + "]" : options.host) << ":"
            << server->port() << "/ for CloudEvents ("
            << (options.secret.empty() ? "unsigned events accepted" : "signatures checked")
            << "); Ctrl-C stops" << std::endl;
  server->run();
  return 0;
}

}  // namespace deviceshadow::cli
