#include "aws/credentials.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace deviceshadow::aws {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r");
  std::size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string home_file(const char* variable, const char* relative) {
  std::string explicit_path = env(variable);
  if (!explicit_path.empty()) return explicit_path;
  std::string home = env("HOME");
  return home.empty() ? "" : home + "/" + relative;
}

std::string profile_name(const std::string& profile) {
  if (!profile.empty()) return profile;
  std::string p = env("AWS_PROFILE");
  return p.empty() ? "default" : p;
}

// The profile's settings: credentials file section, then config file section.
std::map<std::string, std::string> profile_settings(const std::string& name) {
  std::map<std::string, std::string> out;
  auto config = parse_ini(read_file(home_file("AWS_CONFIG_FILE", ".aws/config")));
  auto section = config.find(name == "default" ? "default" : "profile " + name);
  if (section != config.end()) out = section->second;
  auto credentials = parse_ini(read_file(home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials")));
  if (auto it = credentials.find(name); it != credentials.end()) {
    for (const auto& [k, v] : it->second) out[k] = v;  // the credentials file wins
  }
  return out;
}

}  // namespace

std::map<std::string, std::map<std::string, std::string>> parse_ini(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = trim(line.substr(1, line.size() - 2));
      continue;
    }
    std::size_t eq = line.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    out[section][trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

Credentials load_credentials(const std::string& profile) {
  Credentials c{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN")};
  if (!c.empty()) return c;
  const std::string name = profile_name(profile);
  auto settings = profile_settings(name);
  c = {settings["aws_access_key_id"], settings["aws_secret_access_key"], settings["aws_session_token"]};
  if (c.empty()) {
    throw std::runtime_error("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or profile '" + name +
                             "' in the shared credentials file");
  }
  return c;
}

std::optional<std::string> load_region(const std::string& profile) {
  for (const char* variable : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    std::string v = env(variable);
    if (!v.empty()) return v;
  }
  auto settings = profile_settings(profile_name(profile));
  if (auto it = settings.find("region"); it != settings.end() && !it->second.empty()) return it->second;
  return std::nullopt;
}

}  // namespace deviceshadow::aws
