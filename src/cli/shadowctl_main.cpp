// shadowctl: command-line client of shadowd. Its commands are described in docs/cli.md.
#include "cli/listen.hpp"
#include "cli/watch.hpp"
#include "deviceshadow/ascii.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/event_id.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/uri.hpp"

#include <CLI/CLI.hpp>
#include <curl/curl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace ds = deviceshadow;
namespace json = boost::json;
namespace cli = deviceshadow::cli;

namespace {

struct Client {
  std::string server = "http://127.0.0.1:8080";
  std::string token;
};

struct Reply {
  long status = 0;
  std::string body;
};

Reply call(const Client& client, const char* method, const std::string& path, const std::string* body = nullptr) {
  CURL* curl = curl_easy_init();
  Reply reply;
  std::string url = client.server + path;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  if (!client.token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + client.token).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
  if (body) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body->size()));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(p, size * n);
    return size * n;
  });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) throw std::runtime_error("cannot reach " + client.server + ": " + curl_easy_strerror(rc));
  return reply;
}

// Nesting shadowctl reads and shows: deeper than any state shadowd takes (--max-depth is at most
// 1000), with the request or answer around it.
constexpr std::size_t kMaxDepth = 1100;

// CLI11 checks an option's text before it converts it, so a value that passes converts.
CLI::Validator whole(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        try {
          ds::parse_whole_number(text, min, max);
          return {};
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      std::to_string(min) + "-" + std::to_string(max));
}

// A decimal number (digits, one '.' at most) in [min, max].
CLI::Validator decimal(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos &&
                            std::count(text.begin(), text.end(), '.') <= 1 && text != ".";
        const double value = digits ? std::strtod(text.c_str(), nullptr) : 0;
        if (!digits || !(value >= min && value <= max)) {
          std::ostringstream range;
          range << min << " to " << max;
          return "'" + text + "' is not a decimal number from " + range.str();
        }
        return {};
      },
      "");
}

CLI::Validator not_empty() {
  return CLI::Validator([](std::string& text) { return text.empty() ? std::string("must not be empty") : std::string(); }, "");
}

// --server: http(s)://HOST[:PORT][/PATH] without a query or fragment; a trailing '/' is dropped.
CLI::Validator server_url() {
  return CLI::Validator(
      [](std::string& url) -> std::string {
        if (!(url.starts_with("http://") || url.starts_with("https://")) || url.find_first_of("?# ") != std::string::npos) {
          return "expected http://HOST[:PORT] or https://HOST[:PORT], not '" + url + "'";
        }
        while (url.ends_with("/") && url.size() > 8) url.pop_back();
        return {};
      },
      "URL");
}

// A bearer token goes into a header: visible ASCII only.
CLI::Validator header_safe() {
  return CLI::Validator(
      [](std::string& token) -> std::string {
        const bool visible = std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; });
        return visible ? std::string() : std::string("a token is visible ASCII (no spaces or control characters)");
      },
      "");
}

// Indented JSON for people.
void pretty(std::string& out, const json::value& v, int indent) {
  auto pad = [&](int n) { out.append(static_cast<std::size_t>(n) * 2, ' '); };
  if (v.is_object() && !v.get_object().empty()) {
    out += "{\n";
    std::size_t i = 0;
    for (const auto& m : v.get_object()) {
      pad(indent + 1);
      ds::append_json_string(out, std::string_view(m.key().data(), m.key().size()));
      out += ": ";
      pretty(out, m.value(), indent + 1);
      out += ++i < v.get_object().size() ? ",\n" : "\n";
    }
    pad(indent);
    out += '}';
  } else if (v.is_array() && !v.get_array().empty()) {
    out += "[\n";
    for (std::size_t i = 0; i < v.get_array().size(); ++i) {
      pad(indent + 1);
      pretty(out, v.get_array()[i], indent + 1);
      out += i + 1 < v.get_array().size() ? ",\n" : "\n";
    }
    pad(indent);
    out += ']';
  } else {
    ds::append_json(out, v);
  }
}

// Readable output shows what devices wrote: every piece of it goes through escape_controls() so that
// no value can send escape sequences to the operator's terminal.
std::string pretty(const json::value& v, int indent = 0) {
  std::string out;
  pretty(out, v, indent);
  return ds::escape_controls(out, true);
}

std::string field(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v) return "";
  return ds::escape_controls(v->is_string() ? std::string_view(v->get_string()) : std::string_view(ds::to_json(*v)));
}

// The reply's JSON (an empty success body is {}); a failure (a redirect, HTTP 4xx/5xx, or a
// body that is not JSON) is thrown, with the server's error code and message when it has them.
json::value parse_reply(const Reply& reply) {
  if (reply.status >= 300 && reply.status < 400) {
    throw std::runtime_error("HTTP " + std::to_string(reply.status) + ": a redirect, not an answer of shadowd's API (check --server)");
  }
  if (reply.body.empty() && reply.status < 400) return json::object();
  json::value body;
  try {
    body = ds::parse_json(reply.body, kMaxDepth);
  } catch (const ds::Error&) {
    throw std::runtime_error("HTTP " + std::to_string(reply.status) + " with a body that is not JSON: " + reply.body);
  }
  if (reply.status >= 400) {
    const json::value* e = body.is_object() ? body.get_object().if_contains("error") : nullptr;
    if (!e || !e->is_object()) throw std::runtime_error("HTTP " + std::to_string(reply.status) + ": " + reply.body);
    throw std::runtime_error(field(e->get_object(), "code") + ": " + field(e->get_object(), "message"));
  }
  return body;
}

void print_section(const char* name, const json::object& view) {
  std::cout << name << "  version " << field(view, "version");
  if (view.contains("timestamp")) std::cout << "  at " << field(view, "timestamp");
  if (view.contains("clientToken")) std::cout << "  clientToken " << field(view, "clientToken");
  if (view.contains("tz")) std::cout << "  tz " << field(view, "tz");
  std::cout << "\n  " << pretty(view.at("state"), 1) << "\n";
}

void print_shadow(const json::object& s) {
  std::cout << "thing " << field(s, "thing") << "  shadow " << field(s, "name") << "\n";
  print_section("reported", s.at("reported").as_object());
  print_section("desired ", s.at("desired").as_object());
  std::cout << "delta\n  " << pretty(s.at("delta"), 1) << "\n";
}

void print_change(const json::object& c) {
  std::cout << "  " << field(c, "op") << " " << (c.contains("section") ? field(c, "section") + " " : "") << field(c, "path");
  if (c.contains("old")) std::cout << "  " << ds::escape_controls(ds::to_json(c.at("old")));
  if (c.contains("old") && c.contains("new")) std::cout << " ->";
  if (c.contains("new")) std::cout << "  " << ds::escape_controls(ds::to_json(c.at("new")));
  std::cout << "\n";
}

void print_update(const json::object& r) {
  std::cout << (r.at("changed").as_bool() ? "changed" : "unchanged") << ": reported version "
            << field(r.at("reported").as_object(), "version") << ", desired version "
            << field(r.at("desired").as_object(), "version") << "\n";
  for (const auto& c : r.at("changes").as_array()) print_change(c.as_object());
  for (const auto& a : r.at("acknowledged").as_array()) std::cout << "  acknowledged " << field(a.as_object(), "path") << "\n";
  for (const auto& p : r.at("stale").as_array()) std::cout << "  stale " << ds::escape_controls(p.as_string()) << "\n";
  if (!r.at("delta").as_object().empty()) std::cout << "delta\n  " << pretty(r.at("delta"), 1) << "\n";
}

std::string read_state_argument(const std::string& arg) {
  if (arg == "-") {
    std::stringstream in;
    in << std::cin.rdbuf();
    return in.str();
  }
  if (!arg.empty() && arg[0] == '@') {
    std::ifstream f(arg.substr(1));
    if (!f) throw std::runtime_error("cannot read " + arg.substr(1));
    std::stringstream in;
    in << f.rdbuf();
    return in.str();
  }
  return arg;
}

// The contents of `path`, or of stdin for "" and "-".
std::string read_file_or_stdin(const std::string& path) {
  std::stringstream in;
  if (path.empty() || path == "-") {
    in << std::cin.rdbuf();
  } else {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot read " + path);
    in << f.rdbuf();
  }
  return in.str();
}

// "webhook http://…", "sqs https://…", "sns arn:…", "mqtt mqtt://… topic …".
std::string describe_target(const json::object& registration) {
  const json::value* t = registration.if_contains("target");
  if (!t || !t->is_object()) return "?";
  const json::object& target = t->get_object();
  std::string type = field(target, "type");
  for (const char* key : {"url", "queueUrl", "topicArn", "broker"}) {
    if (target.contains(key)) type += " " + field(target, key);
  }
  if (target.contains("topic")) type += " topic " + field(target, "topic");
  return type;
}

// One job as GET /v1/jobs/{id} shows it; `brief`: its first line only (a listing).
void print_job(const json::object& j, bool brief) {
  std::cout << field(j, "id") << "  " << field(j, "status") << "  " << field(j, "targets") << " targets: "
            << field(j, "succeeded") << " succeeded, " << field(j, "failed") << " failed, " << field(j, "skipped")
            << " skipped\n";
  if (brief) return;
  std::cout << "  filter " << field(j, "filter") << "\n  ";
  if (j.contains("desired")) {
    std::cout << "desired " << ds::escape_controls(ds::to_json(j.at("desired")));
  } else {
    std::cout << "delete desired";
  }
  std::cout << "  clientToken " << field(j, "clientToken");
  for (const char* k : {"ratePerSecond", "abortAfterFailures"}) {
    if (j.contains(k)) std::cout << "  " << k << " " << field(j, k);
  }
  std::cout << "\n  created " << field(j, "createdAt");
  if (j.contains("finishedAt")) std::cout << "  finished " << field(j, "finishedAt");
  std::cout << "\n";
  if (j.contains("reason")) std::cout << "  " << field(j, "reason") << "\n";
  if (const json::value* errors = j.if_contains("errors"); errors && !errors->as_array().empty()) {
    std::cout << "errors (the first " << errors->as_array().size() << ")\n";
    for (const auto& e : errors->as_array()) {
      const json::object& o = e.as_object();
      const json::object& error = o.at("error").as_object();
      std::cout << "  " << field(o, "thing") << "  " << field(o, "name") << "  " << field(error, "code") << ": "
                << field(error, "message") << "\n";
    }
  }
}

// Polls the job until it finishes; on a terminal, draws its progress on stderr meanwhile.
json::object follow_job(const Client& client, const std::string& id) {
  const bool terminal = isatty(STDERR_FILENO);
  while (true) {
    json::object j = parse_reply(call(client, "GET", "/v1/jobs/" + ds::percent_encode_segment(id))).as_object();
    const auto count = [&](const char* k) { return j.at(k).to_number<std::uint64_t>(); };
    const std::uint64_t targets = count("targets"), done = count("succeeded") + count("failed") + count("skipped");
    if (terminal) {
      constexpr int kWidth = 30;
      const int filled = targets ? static_cast<int>(done * kWidth / targets) : kWidth;
      std::cerr << "\r[" << std::string(filled, '#') << std::string(kWidth - filled, '-') << "] " << done << "/" << targets
                << "  failed " << count("failed") << "  skipped " << count("skipped") << "  " << field(j, "status")
                << "   " << std::flush;
    }
    if (field(j, "status") != "running") {
      if (terminal) std::cerr << "\n";
      return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

void print_registrations(const json::object& r) {
  for (const auto& item : r.at("registrations").as_array()) {
    const json::object& o = item.as_object();
    std::cout << field(o, "id") << "  " << describe_target(o) << "  sections " << field(o, "sections") << "  match "
              << field(o, "match");
    if (o.contains("enabled") && !o.at("enabled").as_bool()) std::cout << "  disabled";
    if (const json::value* s = o.if_contains("status"); s && s->is_object()) {
      std::cout << "  pending " << field(s->get_object(), "pending") << "  dead letters "
                << field(s->get_object(), "deadLetters");
    }
    std::cout << "\n";
  }
}

void print_dead_letters(const json::object& r) {
  for (const auto& item : r.at("deadLetters").as_array()) {
    const json::object& d = item.as_object();
    const json::value* e = d.if_contains("event");
    static const json::object none;
    const json::object& event = e && e->is_object() ? e->get_object() : none;
    std::cout << field(d, "failedAt") << "  " << field(event, "id") << "  " << field(event, "subject") << "  attempts "
              << field(d, "attempts") << "\n";
    if (d.contains("lastError")) std::cout << "  " << field(d, "lastError") << "\n";
  }
  if (r.contains("cursor")) std::cout << "more: --cursor " << field(r, "cursor") << "\n";
}

// The "metrics" of an aggregation from --metric LABEL=EXPR or EXPR (labelled by itself): the
// label ends at an '=' before the expression's '('. None: {"count":"count()"}.
json::object metrics_request(const std::vector<std::string>& metrics) {
  json::object out;
  for (const std::string& m : metrics) {
    const std::size_t eq = m.find('=');
    if (eq != std::string::npos && eq < m.find('(')) {
      out[m.substr(0, eq)] = m.substr(eq + 1);
    } else {
      out[m] = m;
    }
  }
  if (metrics.empty()) out["count"] = "count()";
  return out;
}

// One line per group: its key as property=value, then each metric as label=value in the order
// asked for; the groups summed up past --max-groups as "other (N groups)".
void print_aggregate(const json::object& r, const json::object& metrics) {
  auto line = [&](const json::object& group, std::string head) {
    for (const auto& m : metrics) {
      const json::value* v = group.if_contains(m.key());
      head += (head.empty() ? "" : "  ") + ds::escape_controls(m.key()) + "=" + ds::escape_controls(v ? ds::to_json(*v) : "null");
    }
    std::cout << head << "\n";
  };
  for (const auto& g : r.at("groups").as_array()) {
    std::string key;
    for (const auto& k : g.at("key").as_object()) {
      key += (key.empty() ? "" : "  ") + ds::escape_controls(k.key()) + "=" + ds::escape_controls(ds::to_json(k.value()));
    }
    line(g.as_object(), key);
  }
  if (const json::value* other = r.if_contains("other"); other && other->is_object()) {
    line(other->get_object(), "other (" + field(other->get_object(), "groups") + " groups)");
  }
}

// An event id ("{20 digits}#{letter}{version}") rather than a time.
// A moment diff takes: an event id or an RFC 3339 time ("2026-11-27T10:00:00Z").
bool looks_like_moment(std::string_view s) {
  return ds::is_event_id(s) ||
         (s.size() > 10 && s[4] == '-' && s[7] == '-' && (s[10] == 'T' || s[10] == 't') &&
          std::all_of(s.begin(), s.begin() + 4, [](char c) { return c >= '0' && c <= '9'; }));
}

void print_mark(const char* label, const json::object& m) {
  std::cout << label << "  " << field(m, "timestamp") << "  " << field(m, "id");
  if (m.contains("reportedVersion")) {
    std::cout << "  reported v" << field(m, "reportedVersion") << "  desired v" << field(m, "desiredVersion");
  }
  std::cout << "\n";
}

void print_series(const json::object& r) {
  for (const auto& p : r.at("series").as_array()) {
    const json::object& o = p.as_object();
    std::cout << field(o, "timestamp") << "  v" << field(o, "version") << "  "
              << (o.contains("value") ? ds::escape_controls(ds::to_json(o.at("value"))) : "(removed)");
    if (o.contains("ts")) std::cout << "  ts " << field(o, "ts");
    std::cout << "\n";
  }
  if (r.contains("cursor")) std::cout << "more: --cursor " << field(r, "cursor") << "\n";
}

// Shows each variadic positional that takes an optional shadow name and then more (report and
// desire: [name] state; diff: [name] from [to]; series: [name] path) as the arguments it stands
// for.
class Formatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    if (const std::string* shown = positional ? shown_as(opt) : nullptr) return *shown;
    return CLI::Formatter::make_option_name(opt, positional);
  }
  std::string make_option_usage(const CLI::Option* opt) const override {
    if (const std::string* shown = shown_as(opt)) return *shown;
    return CLI::Formatter::make_option_usage(opt);
  }
  void show_as(const CLI::Option* opt, std::string shown) { shown_.emplace_back(opt, std::move(shown)); }

 private:
  const std::string* shown_as(const CLI::Option* opt) const {
    auto it = std::find_if(shown_.begin(), shown_.end(), [&](const auto& s) { return s.first == opt; });
    return it == shown_.end() ? nullptr : &it->second;
  }
  std::vector<std::pair<const CLI::Option*, std::string>> shown_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shadowctl: talk to a shadowd server, or receive its notifications"};
  auto formatter = std::make_shared<Formatter>();
  app.formatter(formatter);  // subcommands added below share it
  Client client;
  bool as_json = false;
  app.add_option("--server", client.server, "server URL")->envname("SHADOWCTL_SERVER")->transform(server_url())->capture_default_str();
  app.add_option("--token", client.token, "bearer token")->envname("SHADOWCTL_TOKEN")->check(header_safe());
  app.add_flag("--json", as_json, "print the server's JSON instead of readable text");
  app.require_subcommand(1);

  std::string thing, name = "main", section, client_token, tz, mode, prefix, cursor, order, since, until, as_of;
  std::vector<std::string> name_and_state;  // report/desire: [NAME] STATE
  std::vector<std::string> diff_args;       // diff: [NAME] FROM [TO]
  std::vector<std::string> series_args;     // series: [NAME] PATH
  bool bounds = false;
  std::optional<std::uint64_t> version;
  std::size_t limit = 0;
  bool no_ack = false;

  auto shadow_args = [&](CLI::App* c) {
    c->add_option("thing", thing, "thing name")->required()->check(not_empty());
    c->add_option("name", name, "shadow name")->check(not_empty())->capture_default_str();
  };
  CLI::App* get = app.add_subcommand("get", "show a shadow");
  shadow_args(get);
  get->add_option("--as-of", as_of, "as it was right after this RFC 3339 time or event id")->check(not_empty());
  CLI::App* write_cmds[2];
  for (int i = 0; i < 2; ++i) {
    CLI::App* c = write_cmds[i] = app.add_subcommand(i == 0 ? "report" : "desire",
                                                     i == 0 ? "merge a reported state" : "merge a desired state");
    c->add_option("thing", thing, "thing name")->required()->check(not_empty());
    formatter->show_as(
        c->add_option("state", name_and_state,
                      "shadow name (default main), then the state: a JSON object, @FILE or - for stdin")
            ->required()
            ->expected(1, 2),
        "[name] state");
    c->add_option("--version", version, "accept only if the section is at this version")
        ->check(whole(0, UINT64_MAX));
    c->add_option("--client-token", client_token, "client token stored with the write")->check(not_empty());
    c->add_option("--tz", tz, "IANA time zone of the device")->check(not_empty());
    c->add_option("--mode", mode, "server_is_master (default) or client_is_master")
        ->check(CLI::IsMember({"server_is_master", "client_is_master"}));
    c->add_flag("--no-acknowledge", no_ack, "do not acknowledge desired values");
  }
  CLI::App* del = app.add_subcommand("delete", "delete a shadow or one section");
  shadow_args(del);
  del->add_option("--section", section, "reported or desired (default: both)")->check(CLI::IsMember({"reported", "desired"}));
  del->add_option("--version", version, "with --section: delete only at this version")->check(whole(0, UINT64_MAX));
  CLI::App* list = app.add_subcommand("list", "list the shadows of a thing");
  list->add_option("thing", thing, "thing name")->required()->check(not_empty());
  CLI::App* things = app.add_subcommand("things", "list things");
  things->add_option("--prefix", prefix, "only things starting with this");
  CLI::App* history = app.add_subcommand("history", "show a shadow's change history");
  shadow_args(history);
  CLI::Option* bounds_flag = history->add_flag("--bounds", bounds, "show the oldest and newest events kept instead");
  bounds_flag->excludes(history->add_option("--order", order, "desc (default) or asc")->check(CLI::IsMember({"desc", "asc"})));
  CLI::App* diff = app.add_subcommand("diff", "show what changed in a shadow between two moments");
  diff->add_option("thing", thing, "thing name")->required()->check(not_empty());
  formatter->show_as(diff->add_option("args", diff_args,
                                      "shadow name (default main), then FROM and TO (default now): RFC 3339 times "
                                      "or event ids")
                         ->required()
                         ->expected(1, 3),
                     "[name] from [to]");
  CLI::App* series = app.add_subcommand("series", "show every change of one path of a shadow, oldest first");
  series->add_option("thing", thing, "thing name")->required()->check(not_empty());
  formatter->show_as(series->add_option("args", series_args, "shadow name (default main), then the path: a JSON "
                                                              "Pointer such as /temp")
                         ->required()
                         ->expected(1, 2),
                     "[name] path");
  series->add_option("--section", section, "reported (default) or desired")->check(CLI::IsMember({"reported", "desired"}));
  std::string filter, fields;
  bool count_only = false, allow_scan = false;
  CLI::App* find = app.add_subcommand("find", "find shadows across the fleet with a filter (docs/queries.md)");
  find->add_option("filter", filter, "the filter, e.g. 'lt(reported/temp@ts,time:now-PT15M)'")->required()->check(not_empty());
  find->add_option("--fields", fields, "show these properties instead of whole shadows, e.g. reported/temp,_pending");
  find->add_flag("--count", count_only, "print how many shadows match");
  std::vector<std::string> group_by, metrics;
  std::optional<std::size_t> max_groups;
  CLI::App* aggregate = app.add_subcommand("aggregate", "count and measure shadows across the fleet, in groups (docs/queries.md)");
  aggregate->add_option("filter", filter, "only the shadows this filter matches (default: every one)");
  aggregate->add_option("--group-by", group_by, "a group per distinct value of this property, e.g. reported/fw (repeatable)")
      ->allow_extra_args(false);
  aggregate->add_option("--metric", metrics,
                        "LABEL=EXPR or EXPR (labelled by itself): count(), min|max|sum|avg(PROP), percentiles(PROP,50,95,...) "
                        "(repeatable; default count=count())")
      ->allow_extra_args(false);
  aggregate->add_option("--max-groups", max_groups, "groups shown (default 100); the rest are summed up as other")
      ->check(whole(1, 1000));
  for (CLI::App* c : {find, aggregate}) {
    c->add_flag("--allow-scan", allow_scan, "DynamoDB: consent to read every thing of the table");
    c->add_flag("--json", as_json, "print the server's JSON instead of readable text");
  }
  std::vector<std::string> index_fields;
  CLI::App* index = app.add_subcommand("index", "declare the fields fleet queries read by index (needs an admin token)");
  index->require_subcommand(1);
  CLI::App* index_put = index->add_subcommand("put", "declare exactly these fields (a field left out is no longer indexed)");
  index_put->add_option("fields", index_fields, "fields such as reported/fw, reported/temp@ts or _modified (none: drop all)");
  CLI::App* index_get = index->add_subcommand("get", "show the declared fields: building (with the shadows indexed so far) or ready");
  for (CLI::App* c : {index_put, index_get}) c->add_flag("--json", as_json, "print the server's JSON instead of readable text");
  for (CLI::App* c : {history, series}) {
    for (auto [opt, var] : {std::pair{"--since", &since}, std::pair{"--until", &until}}) {
      CLI::Option* o = c->add_option(opt, *var, "RFC 3339 time or epoch")->check(not_empty());
      if (c == history) bounds_flag->excludes(o);
    }
  }
  for (CLI::App* c : {list, things, history, series, find}) {
    CLI::Option* l = c->add_option("--limit", limit, "page size")->check(whole(1, 1000));
    CLI::Option* k = c->add_option("--cursor", cursor, "continue after a previous page");
    if (c == history) bounds_flag->excludes(l)->excludes(k);
  }

  // Notifications: registrations (admin token) and a webhook receiver to watch them.
  std::string registration, file;
  std::vector<std::string> event_ids;
  bool all = false;
  CLI::App* regs = app.add_subcommand("registrations", "manage notification registrations (needs an admin token)");
  regs->require_subcommand(1);
  CLI::App* reg_put = regs->add_subcommand("put", "create or replace a registration");
  CLI::App* reg_list = regs->add_subcommand("list", "list registrations");
  CLI::App* reg_get = regs->add_subcommand("get", "show a registration and its delivery status");
  CLI::App* reg_delete = regs->add_subcommand("delete", "delete a registration and its dead letters");
  CLI::App* reg_dead = regs->add_subcommand("dead-letters", "list a registration's events that could not be delivered");
  CLI::App* reg_redrive = regs->add_subcommand("redrive", "deliver dead letters again: those given by event id, else all");
  CLI::App* reg_purge = regs->add_subcommand("delete-dead-letters", "discard dead letters: those given by event id, or --all");
  for (CLI::App* c : {reg_put, reg_get, reg_delete, reg_dead, reg_redrive, reg_purge}) {
    c->add_option("id", registration, "registration id")->required()->check(not_empty());
  }
  reg_put->add_option("file", file, "the registration as JSON: a file, or - (the default) for stdin");
  reg_dead->add_option("--limit", limit, "page size")->check(whole(1, 1000));
  reg_dead->add_option("--cursor", cursor, "continue after a previous page");
  reg_dead->add_flag("--all", all, "follow cursors to the last page");
  for (CLI::App* c : {reg_redrive, reg_purge}) c->add_option("event_id", event_ids, "dead letters, by event id");
  reg_purge->add_flag("--all", all, "every dead letter of the registration");

  // Bulk jobs (docs/jobs.md).
  std::string job_id, desired_state;
  bool delete_desired = false, dry_run = false, wait = false;
  std::optional<double> rate;
  std::optional<std::uint64_t> abort_after;
  CLI::App* jobs = app.add_subcommand("jobs", "bulk jobs: one desired write to every shadow a filter matches (docs/jobs.md)");
  jobs->require_subcommand(1);
  CLI::App* job_start = jobs->add_subcommand("start", "start a job (or --dry-run: count its targets)");
  CLI::App* job_get = jobs->add_subcommand("get", "show a job and its progress");
  CLI::App* job_list = jobs->add_subcommand("list", "list jobs, newest first");
  CLI::App* job_cancel = jobs->add_subcommand("cancel", "cancel a running job");
  job_start->add_option("filter", filter, "the shadows to write, e.g. 'lt(reported/fw,\"1.3.0\")'")->required()->check(not_empty());
  CLI::Option* desired_opt = job_start->add_option("--desired", desired_state, "the desired state as JSON, @FILE or - (stdin)");
  job_start->add_flag("--delete-desired", delete_desired, "delete each target's desired section instead")->excludes(desired_opt);
  job_start->add_option("--mode", mode, "server_is_master (default) or client_is_master")
      ->check(CLI::IsMember({"server_is_master", "client_is_master"}));
  job_start->add_option("--client-token", client_token, "the writes' client token (default job:<id>)")->check(not_empty());
  job_start->add_option("--rate", rate, "targets per second at most (0.1-100000)")->check(decimal(0.1, 100000));
  job_start->add_option("--abort-after", abort_after, "end the job as failed once this many targets failed")
      ->check(whole(1, UINT64_MAX));
  job_start->add_flag("--dry-run", dry_run, "write nothing: print how many shadows would be targets, and the first 100");
  for (CLI::App* c : {job_get, job_cancel}) c->add_option("id", job_id, "job id")->required()->check(not_empty());
  for (CLI::App* c : {job_start, job_get}) {
    c->add_flag("--wait", wait, "follow the job until it finishes (a progress bar on a terminal); exit status 1 unless it succeeded");
  }
  job_list->add_option("--limit", limit, "page size")->check(whole(1, 1000));
  job_list->add_option("--cursor", cursor, "continue after a previous page");

  cli::ListenOptions listen_options;
  CLI::App* listen_cmd = app.add_subcommand("listen", "receive webhook notifications and print each event");
  listen_cmd->add_option("--port", listen_options.port, "port to listen on; 0 picks a free one")->required();
  listen_cmd->add_option("--host", listen_options.host, "address to listen on")->capture_default_str();
  listen_cmd->add_option("--secret", listen_options.secret,
                         "refuse (401) events without a valid X-Shadow-Signature made with this secret, or "
                         "signed more than 300 s from now")
      ->check(not_empty());
  listen_cmd->add_flag("--json", as_json, "print each event as received, one compact JSON line");

  cli::WatchOptions watch_options;
  CLI::App* watch_cmd = app.add_subcommand("watch", "print changes as they happen (a live stream; reconnects with the last id)");
  watch_cmd->add_option("thing", watch_options.thing, "follow only this thing's shadow (default: every shadow)");
  watch_cmd->add_option("name", watch_options.name, "with THING: the shadow (default main)");
  watch_cmd->add_option("--match", watch_options.match, "without THING: only shadows whose {thing}#{name} matches this RE2");
  watch_cmd->add_option("--filter", watch_options.filter,
                        "only writes after which the shadow passes this filter (docs/queries.md), e.g. 'gt(reported/v,10)'");

  // A subcommand copies its parent's footer when it is created, so the footers are set last: the
  // top-level one only on the top-level help (in a command's help, "options above" are the
  // command's own), and each command that talks to the server says where the global options go.
  std::function<void(CLI::App*, const std::string&)> set_footers = [&](CLI::App* parent, const std::string& path) {
    for (CLI::App* c : parent->get_subcommands([](CLI::App*) { return true; })) {
      const std::string command = path + " " + c->get_name();
      c->footer(c == listen_cmd ? "" : "Global options go before the command: shadowctl --server URL --token T --json" +
                                           command + " ...");
      set_footers(c, command);
    }
  };
  set_footers(&app, "");
  app.footer(
      "Options above go before the command: shadowctl --server URL --token T --json get THING.\n"
      "To watch writes: shadowctl listen --port 9000, then register http://127.0.0.1:9000/ as a\n"
      "webhook with shadowctl registrations put ID (see docs/cli-notifications.md).");
  CLI11_PARSE(app, argc, argv);

  if (*listen_cmd) {
    listen_options.json = as_json;
    return cli::listen(listen_options);
  }
  if (*watch_cmd) {
    if (!watch_options.thing.empty() && !watch_options.match.empty()) {
      std::cerr << "shadowctl: watch: --match applies to every shadow; leave THING out" << std::endl;
      return 2;
    }
    watch_options.server = client.server;
    watch_options.token = client.token;
    watch_options.json = as_json;
    return cli::watch(watch_options);
  }

  try {
    std::string base = "/v1/things/" + ds::percent_encode_segment(thing);
    std::string shadow = base + "/shadows/" + ds::percent_encode_segment(name);
    std::string query;
    auto param = [&](const char* key, const std::string& value) {
      if (!value.empty()) query += (query.empty() ? "?" : "&") + std::string(key) + "=" + ds::percent_encode(value);
    };
    if (limit) param("limit", std::to_string(limit));
    param("cursor", cursor);
    Reply reply;
    std::function<void(const json::object&)> print;
    if (*get) {
      if (!as_of.empty()) param(ds::is_event_id(as_of) ? "asOfEvent" : "asOf", as_of);
      reply = call(client, "GET", shadow + query);
      print = [](const json::object& r) {
        print_shadow(r);
        if (r.contains("event")) std::cout << "as of " << field(r, "asOf") << "  event " << field(r, "event") << "\n";
      };
    } else if (*diff) {
      // [NAME] FROM [TO]: with two arguments, the first is FROM when it is a time or an event id.
      std::size_t at = diff_args.size() == 3 || (diff_args.size() == 2 && !looks_like_moment(diff_args[0])) ? 1 : 0;
      if (at) name = diff_args[0];
      param("from", diff_args[at]);
      if (at + 1 < diff_args.size()) param("to", diff_args[at + 1]);
      reply = call(client, "GET", base + "/shadows/" + ds::percent_encode_segment(name) + "/diff" + query);
      print = [](const json::object& r) {
        print_mark("from", r.at("from").as_object());
        print_mark("to  ", r.at("to").as_object());
        for (const auto& c : r.at("changes").as_array()) print_change(c.as_object());
      };
    } else if (*series) {
      if (series_args.size() == 2) name = series_args[0];
      param("format", "series");
      param("path", series_args.back());
      param("section", section);
      param("since", since);
      param("until", until);
      reply = call(client, "GET", base + "/shadows/" + ds::percent_encode_segment(name) + "/history" + query);
      print = print_series;
    } else if (*history && bounds) {
      reply = call(client, "GET", shadow + "/history/bounds");
      print = [](const json::object& r) {
        print_mark("oldest", r.at("oldest").as_object());
        print_mark("newest", r.at("newest").as_object());
        std::cout << (r.at("complete").as_bool() ? "complete: the oldest event kept is the shadow's first\n"
                                                  : "incomplete: older events have expired\n");
      };
    } else if (*write_cmds[0] || *write_cmds[1]) {
      if (name_and_state.size() == 2) name = name_and_state[0];
      shadow = base + "/shadows/" + ds::percent_encode_segment(name);
      json::object body;
      json::value parsed = ds::parse_json(read_state_argument(name_and_state.back()), kMaxDepth);
      body["state"] = parsed;
      if (version) body["version"] = *version;
      if (!client_token.empty()) body["clientToken"] = client_token;
      if (!tz.empty()) body["tz"] = tz;
      if (!mode.empty()) body["mode"] = mode;
      if (no_ack) body["acknowledge"] = false;
      std::string text = ds::to_json(body);
      reply = call(client, "POST", shadow + (*write_cmds[0] ? "/reported" : "/desired"), &text);
      print = print_update;
    } else if (*del) {
      if (version) param("version", std::to_string(*version));
      reply = call(client, "DELETE", shadow + (section.empty() ? "" : "/" + section) + query);
      print = [](const json::object& r) {
        std::cout << "deleted";
        for (const auto& s : r.at("deleted").as_array()) {
          std::string sec(s.as_string());
          std::cout << " " << sec << " (tombstone version " << field(r.at(sec).as_object(), "version") << ")";
        }
        std::cout << "\n";
      };
    } else if (*list) {
      reply = call(client, "GET", base + "/shadows" + query);
      print = [](const json::object& r) {
        for (const auto& s : r.at("shadows").as_array()) {
          const json::object& o = s.as_object();
          std::cout << field(o, "name") << "  reported v" << field(o, "reportedVersion") << "  desired v"
                    << field(o, "desiredVersion") << "  " << field(o, "timestamp") << "\n";
        }
        if (r.contains("cursor")) std::cout << "more: --cursor " << field(r, "cursor") << "\n";
      };
    } else if (*things) {
      param("prefix", prefix);
      reply = call(client, "GET", "/v1/things" + query);
      print = [](const json::object& r) {
        for (const auto& t : r.at("things").as_array()) std::cout << ds::escape_controls(t.as_string()) << "\n";
        if (r.contains("cursor")) std::cout << "more: --cursor " << field(r, "cursor") << "\n";
      };
    } else if (*find && count_only) {
      query.clear();
      param("filter", filter);
      if (allow_scan) param("allowScan", "true");
      reply = call(client, "GET", "/v1/shadows/count" + query);
      print = [](const json::object& r) { std::cout << field(r, "count") << "\n"; };
    } else if (*find) {  // POST: the filter in a body, never too long for a URL
      json::object request;
      request["filter"] = filter;
      if (!fields.empty()) request["fields"] = fields;
      if (limit) request["limit"] = limit;
      if (!cursor.empty()) request["cursor"] = cursor;
      if (allow_scan) request["allowScan"] = true;
      const std::string text = ds::to_json(request);
      reply = call(client, "POST", "/v1/shadows/search", &text);
      print = [](const json::object& r) {
        for (const auto& s : r.at("shadows").as_array()) {
          const json::object& o = s.as_object();
          std::cout << field(o, "thing") << "  " << field(o, "name");
          for (const auto& m : o) {
            if (m.key() == "thing" || m.key() == "name") continue;
            if (m.key() == "reported" || m.key() == "desired") {
              std::cout << "  " << ds::escape_controls(m.key()) << " v" << field(m.value().as_object(), "version");
            } else {
              std::cout << "  " << ds::escape_controls(m.key()) << "=" << ds::escape_controls(ds::to_json(m.value()));
            }
          }
          std::cout << "\n";
        }
        if (r.contains("cursor")) std::cout << "more: --cursor " << field(r, "cursor") << "\n";
      };
    } else if (*aggregate) {
      json::object request;
      if (!filter.empty()) request["filter"] = filter;
      if (!group_by.empty()) request["groupBy"] = json::array(group_by.begin(), group_by.end());
      const json::object asked = metrics_request(metrics);
      request["metrics"] = asked;
      if (max_groups) request["maxGroups"] = *max_groups;
      if (allow_scan) request["allowScan"] = true;
      const std::string text = ds::to_json(request);
      reply = call(client, "POST", "/v1/shadows/aggregate", &text);
      print = [asked](const json::object& r) { print_aggregate(r, asked); };
    } else if (*index) {
      if (*index_put) {
        json::object request;
        request["fields"] = json::array(index_fields.begin(), index_fields.end());
        const std::string text = ds::to_json(request);
        reply = call(client, "PUT", "/v1/index", &text);
      } else {
        reply = call(client, "GET", "/v1/index");
      }
      print = [](const json::object& r) {
        for (const auto& f : r.at("fields").as_array()) {
          const json::object& o = f.as_object();
          std::cout << field(o, "field") << "  " << field(o, "state") << "  " << field(o, "indexed") << " indexed\n";
        }
      };
    } else if (*history) {
      param("order", order);
      param("since", since);
      param("until", until);
      reply = call(client, "GET", shadow + "/history" + query);
      print = [](const json::object& r) {
        for (const auto& e : r.at("events").as_array()) {
          const json::object& o = e.as_object();
          std::cout << field(o, "timestamp") << "  " << field(o, "op");
          for (const char* s : {"reported", "desired"}) {
            if (o.contains(s)) std::cout << "  " << s << " v" << field(o.at(s).as_object(), "version");
          }
          if (o.contains("clientToken")) std::cout << "  clientToken " << field(o, "clientToken");
          std::cout << "\n";
          for (const char* s : {"reported", "desired"}) {
            if (!o.contains(s)) continue;
            for (const auto& c : o.at(s).at("changes").as_array()) {
              json::object with_section = c.as_object();
              with_section["section"] = s;
              print_change(with_section);
            }
          }
        }
        if (r.contains("cursor")) std::cout << "more: --cursor " << field(r, "cursor") << "\n";
      };
    } else if (*jobs) {
      auto print_full = [](const json::object& r) { print_job(r, false); };
      if (*job_start) {
        if (desired_state.empty() == !delete_desired) throw std::runtime_error("jobs start: give --desired STATE or --delete-desired");
        json::object request;
        request["filter"] = filter;
        if (delete_desired) {
          request["delete"] = "desired";
        } else {
          request["desired"] = ds::parse_json(read_state_argument(desired_state), kMaxDepth);
        }
        if (!mode.empty()) request["mode"] = mode;
        if (!client_token.empty()) request["clientToken"] = client_token;
        if (rate) request["ratePerSecond"] = *rate;
        if (abort_after) request["abortAfterFailures"] = *abort_after;
        if (dry_run) request["dryRun"] = true;
        const std::string text = ds::to_json(request);
        reply = call(client, "POST", "/v1/jobs", &text);
        if (dry_run) {
          print = [](const json::object& r) {
            std::cout << field(r, "targets") << " targets\n";
            for (const auto& t : r.at("sample").as_array()) {
              std::cout << "  " << field(t.as_object(), "thing") << "  " << field(t.as_object(), "name") << "\n";
            }
          };
        } else {
          print = print_full;
          if (wait) job_id = field(parse_reply(reply).as_object(), "id");
        }
      } else if (*job_get) {
        reply = call(client, "GET", "/v1/jobs/" + ds::percent_encode_segment(job_id));
        print = print_full;
      } else if (*job_list) {
        reply = call(client, "GET", "/v1/jobs" + query);
        print = [](const json::object& r) {
          for (const auto& j : r.at("jobs").as_array()) print_job(j.as_object(), true);
          if (r.contains("cursor")) std::cout << "more: --cursor " << field(r, "cursor") << "\n";
        };
      } else if (*job_cancel) {
        reply = call(client, "POST", "/v1/jobs/" + ds::percent_encode_segment(job_id) + "/cancel");
        print = print_full;
      }
      if (wait && !job_id.empty()) {
        parse_reply(reply);  // a refused start or an unknown job fails here
        const json::object finished = follow_job(client, job_id);
        reply = {200, ds::to_json(finished)};
        if (as_json) {
          std::cout << reply.body << "\n";
        } else {
          print_job(finished, false);
        }
        return field(finished, "status") == "succeeded" ? 0 : 1;
      }
    } else if (*regs) {
      const std::string path = "/v1/registrations" + (registration.empty() ? "" : "/" + ds::percent_encode_segment(registration));
      const std::string dead_letters = path + "/dead-letters";
      auto print_pretty = [](const json::object& r) { std::cout << pretty(r) << "\n"; };
      if (*reg_put) {
        const std::string text = read_file_or_stdin(file);
        ds::parse_json(text, kMaxDepth);  // a malformed file is reported here, with its line and column
        reply = call(client, "PUT", path, &text);
        print = print_pretty;
      } else if (*reg_list) {
        reply = call(client, "GET", path);
        print = print_registrations;
      } else if (*reg_get) {
        reply = call(client, "GET", path);
        print = print_pretty;
      } else if (*reg_delete) {
        reply = call(client, "DELETE", path);
        print = [&](const json::object&) { std::cout << "deleted registration " << registration << "\n"; };
      } else if (*reg_dead) {
        reply = call(client, "GET", dead_letters + query);
        if (all) {  // every page, printed as one
          json::array items;
          for (;;) {
            json::object page = parse_reply(reply).as_object();
            for (auto& d : page["deadLetters"].as_array()) items.push_back(std::move(d));
            const json::value* next = page.if_contains("cursor");
            if (!next || !next->is_string() || next->get_string().empty()) break;
            cursor = std::string(next->get_string());
            query.clear();
            if (limit) param("limit", std::to_string(limit));
            param("cursor", cursor);
            reply = call(client, "GET", dead_letters + query);
          }
          json::object merged;
          merged["deadLetters"] = std::move(items);
          reply = {200, ds::to_json(merged)};
        }
        print = print_dead_letters;
      } else if (*reg_redrive) {
        json::object request;
        if (!event_ids.empty()) {
          json::array ids;
          for (const std::string& id : event_ids) ids.emplace_back(id);
          request["ids"] = std::move(ids);
        }
        const std::string text = ds::to_json(request);
        reply = call(client, "POST", dead_letters + "/redrive", &text);
        print = [](const json::object& r) { std::cout << "redriven " << field(r, "redriven") << " dead letter(s)\n"; };
      } else if (*reg_purge) {
        if (all == !event_ids.empty()) throw std::runtime_error("delete-dead-letters: give either event ids or --all");
        if (all) {
          reply = call(client, "DELETE", dead_letters);
        } else {  // one request per event; the counts are added up
          std::uint64_t deleted = 0;
          for (const std::string& id : event_ids) {
            const json::value r = parse_reply(call(client, "DELETE", dead_letters + "/" + ds::percent_encode_segment(id)));
            if (const json::value* n = r.as_object().if_contains("deleted")) deleted += n->to_number<std::uint64_t>();
          }
          json::object total;
          total["deleted"] = deleted;
          reply = {200, ds::to_json(total)};
        }
        print = [](const json::object& r) { std::cout << "deleted " << field(r, "deleted") << " dead letter(s)\n"; };
      }
    }
    const json::value body = parse_reply(reply);
    if (as_json) {
      std::cout << (reply.body.empty() ? "{}" : reply.body) << "\n";
      return 0;
    }
    // Printed whole or not at all: an answer of another shape prints nothing but the error.
    std::ostringstream text;
    std::streambuf* const terminal = std::cout.rdbuf(text.rdbuf());
    try {
      if (!body.is_object()) throw std::invalid_argument("not a JSON object");
      print(body.as_object());
    } catch (const std::exception& e) {
      std::cout.rdbuf(terminal);
      throw std::runtime_error("HTTP " + std::to_string(reply.status) + " with an answer of another shape than expected (" +
                               e.what() + "): " + ds::escape_controls(reply.body.substr(0, 200)));
    }
    std::cout.rdbuf(terminal);
    std::cout << text.str();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "shadowctl: " << e.what() << "\n";
    return 1;
  }
}
