// AWS credentials and region from the standard places, in the order the AWS CLI uses:
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, then the shared credentials
// file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials) and config file (AWS_CONFIG_FILE or
// ~/.aws/config, sections "[profile NAME]") for the profile AWS_PROFILE (default "default").
#pragma once

#include "aws/sigv4.hpp"

#include <map>
#include <optional>
#include <string>

namespace deviceshadow::aws {

// Sections of an INI file: section name -> key -> value. Comments start with '#' or ';'.
std::map<std::string, std::map<std::string, std::string>> parse_ini(const std::string& text);

// Throws std::runtime_error when no credentials can be found.
Credentials load_credentials(const std::string& profile = "");
// AWS_REGION, AWS_DEFAULT_REGION, then the profile's region; nullopt if none is set.
std::optional<std::string> load_region(const std::string& profile = "");

}  // namespace deviceshadow::aws
