// shadowctl: command-line client of shadowd (SPEC.md §12).
#include "deviceshadow/error.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/uri.hpp"

#include <CLI/CLI.hpp>
#include <curl/curl.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace ds = deviceshadow;
namespace json = boost::json;

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

std::string pretty(const json::value& v, int indent = 0) {
  std::string out;
  pretty(out, v, indent);
  return out;
}

std::string field(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v) return "";
  return v->is_string() ? std::string(v->get_string()) : ds::to_json(*v);
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
  if (c.contains("old")) std::cout << "  " << ds::to_json(c.at("old"));
  if (c.contains("old") && c.contains("new")) std::cout << " ->";
  if (c.contains("new")) std::cout << "  " << ds::to_json(c.at("new"));
  std::cout << "\n";
}

void print_update(const json::object& r) {
  std::cout << (r.at("changed").as_bool() ? "changed" : "unchanged") << ": reported version "
            << field(r.at("reported").as_object(), "version") << ", desired version "
            << field(r.at("desired").as_object(), "version") << "\n";
  for (const auto& c : r.at("changes").as_array()) print_change(c.as_object());
  for (const auto& a : r.at("acknowledged").as_array()) std::cout << "  acknowledged " << field(a.as_object(), "path") << "\n";
  for (const auto& p : r.at("stale").as_array()) std::cout << "  stale " << p.as_string().c_str() << "\n";
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shadowctl: talk to a shadowd server"};
  Client client;
  bool as_json = false;
  if (const char* s = std::getenv("SHADOWCTL_SERVER")) client.server = s;
  if (const char* t = std::getenv("SHADOWCTL_TOKEN")) client.token = t;
  app.add_option("--server", client.server, "server URL (or SHADOWCTL_SERVER)")->capture_default_str();
  app.add_option("--token", client.token, "bearer token (or SHADOWCTL_TOKEN)");
  app.add_flag("--json", as_json, "print the server's JSON instead of readable text");
  app.require_subcommand(1);

  std::string thing, name = "main", section, client_token, tz, mode, prefix, cursor, order, since, until;
  std::vector<std::string> name_and_state;  // report/desire: [NAME] STATE
  std::optional<std::uint64_t> version;
  std::size_t limit = 0;
  bool no_ack = false;

  auto shadow_args = [&](CLI::App* c) {
    c->add_option("thing", thing, "thing name")->required();
    c->add_option("name", name, "shadow name")->capture_default_str();
  };
  CLI::App* get = app.add_subcommand("get", "show a shadow");
  shadow_args(get);
  CLI::App* write_cmds[2];
  for (int i = 0; i < 2; ++i) {
    CLI::App* c = write_cmds[i] = app.add_subcommand(i == 0 ? "report" : "desire",
                                                     i == 0 ? "merge a reported state" : "merge a desired state");
    c->add_option("thing", thing, "thing name")->required();
    c->add_option("state", name_and_state, "[NAME] STATE: a JSON object, @FILE or - for stdin")->required()->expected(1, 2);
    c->add_option("--version", version, "accept only if the section is at this version");
    c->add_option("--client-token", client_token, "client token stored with the write");
    c->add_option("--tz", tz, "IANA time zone of the device");
    c->add_option("--mode", mode, "server_is_master (default) or client_is_master");
    c->add_flag("--no-acknowledge", no_ack, "do not acknowledge desired values");
  }
  CLI::App* del = app.add_subcommand("delete", "delete a shadow or one section");
  shadow_args(del);
  del->add_option("--section", section, "reported or desired (default: both)");
  del->add_option("--version", version, "with --section: delete only at this version");
  CLI::App* list = app.add_subcommand("list", "list the shadows of a thing");
  list->add_option("thing", thing, "thing name")->required();
  CLI::App* things = app.add_subcommand("things", "list things");
  things->add_option("--prefix", prefix, "only things starting with this");
  CLI::App* history = app.add_subcommand("history", "show a shadow's change history");
  shadow_args(history);
  history->add_option("--order", order, "desc (default) or asc");
  history->add_option("--since", since, "RFC 3339 time or epoch");
  history->add_option("--until", until, "RFC 3339 time or epoch");
  for (CLI::App* c : {list, things, history}) {
    c->add_option("--limit", limit, "page size (1-1000)");
    c->add_option("--cursor", cursor, "continue after a previous page");
  }
  CLI11_PARSE(app, argc, argv);

  try {
    std::string base = "/v1/things/" + ds::percent_encode(thing);
    std::string shadow = base + "/shadows/" + ds::percent_encode(name);
    std::string query;
    auto param = [&](const char* key, const std::string& value) {
      if (!value.empty()) query += (query.empty() ? "?" : "&") + std::string(key) + "=" + ds::percent_encode(value);
    };
    if (limit) param("limit", std::to_string(limit));
    param("cursor", cursor);
    Reply reply;
    std::function<void(const json::object&)> print;
    if (*get) {
      reply = call(client, "GET", shadow);
      print = print_shadow;
    } else if (*write_cmds[0] || *write_cmds[1]) {
      if (name_and_state.size() == 2) name = name_and_state[0];
      shadow = base + "/shadows/" + ds::percent_encode(name);
      json::object body;
      json::value parsed = ds::parse_json(read_state_argument(name_and_state.back()));
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
        for (const auto& t : r.at("things").as_array()) std::cout << t.as_string().c_str() << "\n";
        if (r.contains("cursor")) std::cout << "more: --cursor " << field(r, "cursor") << "\n";
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
    }
    json::value body;
    try {
      body = ds::parse_json(reply.body);
    } catch (const ds::Error&) {
      std::cerr << "shadowctl: HTTP " << reply.status << " with a body that is not JSON: " << reply.body << "\n";
      return 1;
    }
    if (reply.status >= 400) {
      const json::object& e = body.at("error").as_object();
      std::cerr << "shadowctl: " << field(e, "code") << ": " << field(e, "message") << "\n";
      return 1;
    }
    if (as_json) {
      std::cout << reply.body << "\n";
    } else {
      print(body.as_object());
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "shadowctl: " << e.what() << "\n";
    return 1;
  }
}
