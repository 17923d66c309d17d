#include "awsiot/credentials.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace awsiot = deviceshadow::awsiot;
namespace srv = deviceshadow::http;
using P = deviceshadow::ThingPattern;

namespace {

TEST(AwsCredentials, ParsesKeysWithRolesAndPatterns) {
  const auto table = awsiot::CredentialsTable::parse(
      "# access keys of the AWS IoT API\n"
      "\n"
      "AKIAADMIN   wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY admin\n"
      "  # an indented comment\n"
      "device-1\ts3cr3t+/=\tdevice house-1 house-2* My%20House\r\n"
      "app-1 x app *\n");
  ASSERT_EQ(table.size(), 3u);
  const awsiot::AccessKey* admin = table.find("AKIAADMIN");
  ASSERT_NE(admin, nullptr);
  EXPECT_EQ(admin->secret_access_key, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
  EXPECT_EQ(admin->principal.access_key_id, "AKIAADMIN");
  EXPECT_EQ(admin->principal.role, srv::Role::admin);
  EXPECT_TRUE(admin->principal.patterns.empty());

  const awsiot::AccessKey* device = table.find("device-1");
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->secret_access_key, "s3cr3t+/=");
  EXPECT_EQ(device->principal.role, srv::Role::device);
  EXPECT_EQ(device->principal.patterns, (std::vector<P>{{"house-1", false}, {"house-2", true}, {"My House", false}}));
  EXPECT_TRUE(device->principal.covers("house-2b"));
  EXPECT_FALSE(device->principal.covers("house-3"));
  EXPECT_TRUE(device->principal.may(srv::Action::write_reported));
  EXPECT_FALSE(device->principal.may(srv::Action::write_desired));

  EXPECT_TRUE(table.find("app-1")->principal.covers("anything"));
  EXPECT_EQ(table.find("AKIAADMIN "), nullptr);
  EXPECT_EQ(table.find("unknown"), nullptr);
}

TEST(AwsCredentials, AnEmptyFileHasNoKeys) {
  EXPECT_EQ(awsiot::CredentialsTable::parse("").size(), 0u);
  EXPECT_EQ(awsiot::CredentialsTable::parse("# nothing yet\n\n").size(), 0u);
}

TEST(AwsCredentials, RefusesMalformedLinesNamingThem) {
  const std::pair<std::string, std::string> cases[] = {
      {"AKID secret", "line 2: expected ACCESS_KEY_ID SECRET_ACCESS_KEY ROLE"},
      {"AKID", "line 2: expected ACCESS_KEY_ID SECRET_ACCESS_KEY ROLE"},
      {"AKID secret root", "line 2: unknown role 'root'"},
      {"AKID secret device bad%zz", "line 2: pattern 1: "},
      {"AKID secret device ok raw#hash", "line 2: pattern 2: "},
      {"AK/ID secret admin", "line 2: access key id holding '/'"},
      {"AK=ID secret admin", "line 2: access key id holding '/', ',' or '='"},
      {std::string(129, 'A') + " secret admin", "line 2: access key id longer than 128"},
      {"AKID s1 admin\nAKID s2 device", "line 3: access key id AKID is listed twice"},
  };
  for (const auto& [body, expected] : cases) {
    try {
      awsiot::CredentialsTable::parse("# keys\n" + body + "\n");
      ADD_FAILURE() << "accepted: " << body;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("AWS credentials file ", 0), 0u) << e.what();
    }
  }
}

class CredentialsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("ds-aws-credentials-" + std::to_string(::getpid()));
    std::ofstream(path_) << "AKID secret admin\n";
  }
  void TearDown() override { std::filesystem::remove(path_); }

  void chmod_to(mode_t mode) { ASSERT_EQ(::chmod(path_.c_str(), mode), 0); }

  std::filesystem::path path_;
};

TEST_F(CredentialsFile, LoadsAFileOnlyItsOwnerMayRead) {
  for (mode_t mode : {0600, 0400, 0700}) {
    chmod_to(mode);
    EXPECT_EQ(awsiot::CredentialsTable::load(path_).size(), 1u) << std::oct << mode;
  }
}

TEST_F(CredentialsFile, RefusesAFileGroupOrOthersMayReadOrWrite) {
  for (mode_t mode : {0640, 0604, 0644, 0620, 0602}) {
    chmod_to(mode);
    try {
      awsiot::CredentialsTable::load(path_);
      ADD_FAILURE() << "loaded with mode " << std::oct << mode;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
    }
  }
}

TEST_F(CredentialsFile, AMissingFileIsAnError) {
  EXPECT_THROW(awsiot::CredentialsTable::load(path_.string() + ".missing"), std::runtime_error);
}

}  // namespace
