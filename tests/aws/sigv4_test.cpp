#include "aws/credentials.hpp"
#include "aws/sigv4.hpp"
#include "deviceshadow/json.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace aws = deviceshadow::aws;
namespace json = boost::json;

namespace {

// The worked example of AWS's Signature Version 4 documentation (IAM ListUsers).
TEST(SigV4, MatchesTheWorkedExampleOfTheAwsDocumentation) {
  aws::SignableRequest r;
  r.method = "GET";
  r.path = "/";
  r.query = {{"Version", "2010-05-08"}, {"Action", "ListUsers"}};
  r.headers = {{"Host", "iam.amazonaws.com"},
               {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
               {"X-Amz-Date", "20150830T123600Z"}};
  EXPECT_EQ(aws::canonical_request(r),
            "GET\n/\nAction=ListUsers&Version=2010-05-08\n"
            "content-type:application/x-www-form-urlencoded; charset=utf-8\nhost:iam.amazonaws.com\n"
            "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  aws::SigningScope scope{"us-east-1", "iam", "20150830T123600Z"};
  EXPECT_EQ(aws::string_to_sign(r, scope),
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/iam/aws4_request\n"
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59");
  aws::Credentials c{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
  EXPECT_EQ(aws::authorization(r, scope, c),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date, "
            "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7");
}

TEST(SigV4, AgreesWithBotocoreOnGeneratedRequests) {
  std::string command = std::string("python3 ") + DS_AWS_TEST_DIR + "/botocore_sign.py 500 42";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[65536];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << "botocore_sign.py failed";
  std::size_t checked = 0;
  for (std::size_t pos = 0, nl; (nl = output.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    json::value v = deviceshadow::parse_json(std::string_view(output).substr(pos, nl - pos));
    const json::object& o = v.as_object();
    auto str = [&](const char* k) { return std::string(o.at(k).as_string()); };
    aws::SignableRequest r;
    r.method = str("method");
    r.path = str("path");
    for (const auto& p : o.at("query").as_array()) r.query.emplace_back(p.at(0).as_string(), p.at(1).as_string());
    for (const auto& h : o.at("headers").as_array()) r.headers.emplace_back(h.at(0).as_string(), h.at(1).as_string());
    r.body = str("body");
    aws::SigningScope scope{str("region"), str("service"), str("amz_date")};
    aws::Credentials c{str("access_key"), str("secret"), str("token")};
    aws::SignableRequest signed_request = r;
    aws::sign(signed_request, scope, c);
    ASSERT_EQ(signed_request.headers.back().second, str("authorization"))
        << "request " << checked << "\nours:\n" << aws::canonical_request(signed_request) << "\nbotocore:\n"
        << str("canonical_request");
    ++checked;
  }
  EXPECT_EQ(checked, 500u);
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Credentials, EnvironmentComesFirst) {
  ScopedEnv a("AWS_ACCESS_KEY_ID", "AKENV"), b("AWS_SECRET_ACCESS_KEY", "secret-env"), t("AWS_SESSION_TOKEN", "tok");
  aws::Credentials c = aws::load_credentials();
  EXPECT_EQ(c.access_key_id, "AKENV");
  EXPECT_EQ(c.secret_access_key, "secret-env");
  EXPECT_EQ(c.session_token, "tok");
}

TEST(Credentials, SharedFilesWithProfiles) {
  auto dir = std::filesystem::temp_directory_path() / ("ds-creds-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "credentials") << "[default]\naws_access_key_id = AKDEF\naws_secret_access_key=sdef\n\n"
                                        "# a comment\n[work]\naws_access_key_id=AKWORK\naws_secret_access_key = swork\n"
                                        "aws_session_token = twork\n";
  std::ofstream(dir / "config") << "[default]\nregion = eu-north-1\n[profile work]\nregion=us-west-2\n";
  ScopedEnv a("AWS_ACCESS_KEY_ID", ""), b("AWS_SECRET_ACCESS_KEY", ""), r1("AWS_REGION", ""), r2("AWS_DEFAULT_REGION", "");
  ScopedEnv f1("AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").string()), f2("AWS_CONFIG_FILE", (dir / "config").string());
  {
    ScopedEnv p("AWS_PROFILE", "");
    EXPECT_EQ(aws::load_credentials().access_key_id, "AKDEF");
    EXPECT_EQ(aws::load_region(), "eu-north-1");
  }
  {
    ScopedEnv p("AWS_PROFILE", "work");
    aws::Credentials c = aws::load_credentials();
    EXPECT_EQ(c.access_key_id, "AKWORK");
    EXPECT_EQ(c.session_token, "twork");
    EXPECT_EQ(aws::load_region(), "us-west-2");
  }
  EXPECT_EQ(aws::load_credentials("work").secret_access_key, "swork");
  EXPECT_THROW(aws::load_credentials("missing"), std::runtime_error);
  std::filesystem::remove_all(dir);
}

}  // namespace
