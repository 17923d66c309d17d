#include "awsiot/credentials.hpp"

#include "deviceshadow/private_file.hpp"

#include <stdexcept>

namespace deviceshadow::awsiot {
namespace {

constexpr std::size_t kMaxAccessKeyIdBytes = 128;

// Empty when the id is acceptable, else what is wrong with it.
std::string access_key_id_problem(std::string_view id) {
  if (id.size() > kMaxAccessKeyIdBytes) return "access key id longer than 128 characters";
  for (unsigned char c : id) {
    if (c == '/' || c == ',' || c == '=') return "access key id holding '/', ',' or '='";
    if (c < 0x20 || c == 0x7f) return "access key id holding a control character";
  }
  return "";
}

}  // namespace

CredentialsTable CredentialsTable::parse(std::string_view text) {
  CredentialsTable table;
  http::for_each_entry(text, [&](int number, std::span<const std::string_view> fields) {
    auto bad = [&](const std::string& why) {
      return std::runtime_error("AWS credentials file line " + std::to_string(number) + ": " + why);
    };
    if (fields.size() < 3) throw bad("expected ACCESS_KEY_ID SECRET_ACCESS_KEY ROLE [PATTERN...]");
    const std::string_view id = fields[0];
    if (std::string why = access_key_id_problem(id); !why.empty()) throw bad(why);
    if (table.keys_.contains(id)) throw bad("access key id " + std::string(id) + " is listed twice");
    AccessKey key;
    try {
      static_cast<http::Grant&>(key.principal) = http::parse_grant(fields.subspan(2));
    } catch (const std::invalid_argument& e) {
      throw bad(e.what());
    }
    key.principal.access_key_id = std::string(id);
    key.secret_access_key = std::string(fields[1]);
    table.keys_.emplace(std::string(id), std::move(key));
  });
  return table;
}

CredentialsTable CredentialsTable::load(const std::string& path) {
  return parse(read_private_file(path, "AWS credentials file"));
}

const AccessKey* CredentialsTable::find(std::string_view access_key_id) const {
  auto it = keys_.find(access_key_id);
  return it == keys_.end() ? nullptr : &it->second;
}

}  // namespace deviceshadow::awsiot
