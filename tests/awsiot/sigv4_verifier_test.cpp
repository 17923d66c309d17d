#include "awsiot/sigv4_verifier.hpp"

#include "aws/sigv4.hpp"
#include "deviceshadow/json.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace awsiot = deviceshadow::awsiot;
namespace aws = deviceshadow::aws;
namespace srv = deviceshadow::http;
namespace json = boost::json;
using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;
using Refusal = awsiot::Refusal;

namespace {

Clock::time_point at_epoch_seconds(std::int64_t s) { return Clock::time_point(std::chrono::seconds(s)); }

// ---- AWS's published Signature Version 4 test suite --------------------------------------
// Every case signs with the key AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, region
// us-east-1, service "service", at 2015-08-30T12:36:00Z; the request is given as it was sent.

struct SuiteCase {
  const char* name;
  const char* method;
  const char* target;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host and X-Amz-Date
  const char* body;
  const char* signed_headers;
  const char* signature;
};

const SuiteCase kSuite[] = {
    {"get-vanilla", "GET", "/", {}, "", "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-vanilla-empty-query-key", "GET", "/?Param1=value1", {}, "", "host;x-amz-date",
     "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"},
    {"get-vanilla-query-order-key", "GET", "/?Param1=value2&Param1=Value1", {}, "", "host;x-amz-date",
     "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1"},
    {"get-vanilla-query-order-key-case", "GET", "/?Param2=value2&Param1=value1", {}, "", "host;x-amz-date",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
    {"get-vanilla-query-order-value", "GET", "/?Param1=value2&Param1=value1", {}, "", "host;x-amz-date",
     "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"},
    {"get-vanilla-query-unreserved", "GET",
     "/?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
     "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
     {}, "", "host;x-amz-date", "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
    {"get-vanilla-utf8-query", "GET", "/?\xE1\x88\xB4=bar", {}, "", "host;x-amz-date",
     "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
    {"get-unreserved", "GET", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", {}, "",
     "host;x-amz-date", "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
    {"get-utf8", "GET", "/\xE1\x88\xB4", {}, "", "host;x-amz-date",
     "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
    {"get-space", "GET", "/example space/", {}, "", "host;x-amz-date",
     "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"},
    {"get-header-key-duplicate", "GET", "/", {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}},
     "", "host;my-header1;x-amz-date", "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
    {"get-header-value-order", "GET", "/",
     {{"My-Header1", "value4"}, {"My-Header1", "value1"}, {"My-Header1", "value3"}, {"My-Header1", "value2"}}, "",
     "host;my-header1;x-amz-date", "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
    {"get-header-value-trim", "GET", "/", {{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}}, "",
     "host;my-header1;my-header2;x-amz-date", "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
    {"post-vanilla", "POST", "/", {}, "", "host;x-amz-date",
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
    {"post-vanilla-query", "POST", "/?Param1=value1", {}, "", "host;x-amz-date",
     "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
    {"post-header-key-sort", "POST", "/", {{"My-Header1", "value1"}}, "", "host;my-header1;x-amz-date",
     "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
    {"post-header-value-case", "POST", "/", {{"My-Header1", "VALUE1"}}, "", "host;my-header1;x-amz-date",
     "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
    {"post-x-www-form-urlencoded", "POST", "/",
     {{"Content-Type", "application/x-www-form-urlencoded"}, {"Content-Length", "13"}}, "Param1=value1",
     "content-type;host;x-amz-date", "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
    {"post-sts-header-before", "POST", "/",
     {{"X-Amz-Security-Token",
       "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8Y"
       "UuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6f"
       "E8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2"
       "ICCR/oLxBA=="}},
     "", "host;x-amz-date;x-amz-security-token", "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
    // Path normalization: dot segments and repeated slashes are removed before signing.
    {"get-relative", "GET", "/example/..", {}, "", "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-relative-relative", "GET", "/example1/example2/../..", {}, "", "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-slash", "GET", "//", {}, "", "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-slash-dot-slash", "GET", "/./", {}, "", "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-slash-pointless-dot", "GET", "/./example", {}, "", "host;x-amz-date",
     "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5"},
    {"get-slashes", "GET", "//example//", {}, "", "host;x-amz-date",
     "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"},
};

awsiot::SigV4Verifier suite_verifier() {
  return awsiot::SigV4Verifier(
      awsiot::CredentialsTable::parse("AKIDEXAMPLE wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY app\n"),
      awsiot::VerifierOptions{{"service"}, 15min});
}

srv::HttpRequest suite_request(const SuiteCase& c) {
  srv::HttpRequest r;
  r.method = c.method;
  r.target = c.target;
  r.body = c.body;
  r.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  r.headers.insert(r.headers.end(), c.headers.begin(), c.headers.end());
  r.authorization = std::string("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, ") +
                    "SignedHeaders=" + c.signed_headers + ", Signature=" + c.signature;
  r.headers.emplace_back("Authorization", r.authorization);
  return r;
}

const Clock::time_point kSuiteTime = at_epoch_seconds(1440938160);  // 2015-08-30T12:36:00Z

TEST(SigV4Verifier, AcceptsTheRequestsOfTheAwsTestSuite) {
  const auto verifier = suite_verifier();
  for (const SuiteCase& c : kSuite) {
    const awsiot::Verification v = verifier.verify(suite_request(c), kSuiteTime);
    EXPECT_TRUE(v.ok()) << c.name << ": " << v.detail;
    if (v.ok()) {
      EXPECT_EQ(v.principal->access_key_id, "AKIDEXAMPLE");
    }
  }
}

TEST(SigV4Verifier, RefusesTheTestSuiteRequestsWhenAnySignedPartChanges) {
  const auto verifier = suite_verifier();
  for (const SuiteCase& c : kSuite) {
    srv::HttpRequest r = suite_request(c);
    r.method = r.method == "GET" ? "DELETE" : "PUT";
    EXPECT_EQ(verifier.verify(r, kSuiteTime).refusal, Refusal::signature_mismatch) << c.name;
    r = suite_request(c);
    r.target += r.target.find('?') == std::string::npos ? "?extra=1" : "&extra=1";
    EXPECT_EQ(verifier.verify(r, kSuiteTime).refusal, Refusal::signature_mismatch) << c.name;
    r = suite_request(c);
    r.body += "x";
    EXPECT_EQ(verifier.verify(r, kSuiteTime).refusal, Refusal::signature_mismatch) << c.name;
    r = suite_request(c);
    r.headers[0].second = "example.amazonaws.com:8080";
    EXPECT_EQ(verifier.verify(r, kSuiteTime).refusal, Refusal::signature_mismatch) << c.name;
  }
}

// ---- requests made and signed by botocore's iot-data client ------------------------------

struct BotocoreRequest {
  std::string name;
  srv::HttpRequest request;
  std::string access_key;
  Clock::time_point signed_at;
};

// Runs botocore_iotdata.py once and keeps what it printed.
const std::vector<BotocoreRequest>& botocore_requests() {
  static const std::vector<BotocoreRequest> requests = [] {
    std::vector<BotocoreRequest> out;
    const std::string command = std::string("python3 ") + DS_AWSIOT_TEST_DIR + "/botocore_iotdata.py";
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return out;
    std::string text;
    char buf[65536];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
    if (pclose(pipe) != 0) return std::vector<BotocoreRequest>{};
    for (std::size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      const json::value v = deviceshadow::parse_json(std::string_view(text).substr(pos, nl - pos));
      const json::object& o = v.as_object();
      auto str = [&](const char* k) { return std::string(o.at(k).as_string()); };
      BotocoreRequest b{str("name"), {}, str("access_key"), at_epoch_seconds(o.at("signed_at").as_int64())};
      b.request.method = str("method");
      b.request.target = str("target");
      b.request.body = str("body");
      for (const auto& h : o.at("headers").as_array()) {
        b.request.headers.emplace_back(h.at(0).as_string(), h.at(1).as_string());
        if (b.request.headers.back().first == "Authorization") b.request.authorization = b.request.headers.back().second;
      }
      out.push_back(std::move(b));
    }
    return out;
  }();
  return requests;
}

awsiot::SigV4Verifier botocore_verifier() {
  // The keys of botocore_iotdata.py.
  return awsiot::SigV4Verifier(awsiot::CredentialsTable::parse(
      "AKIAADMINEXAMPLE wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY admin\n"
      "device-key-1 s3cr3t+/=key device thing-1 my%20thing\n"));
}

const BotocoreRequest& find_request(std::string_view method, std::string_view target_part) {
  for (const BotocoreRequest& b : botocore_requests()) {
    if (b.request.method == method && b.request.target.find(target_part) != std::string::npos) return b;
  }
  throw std::runtime_error("no botocore request " + std::string(method) + " " + std::string(target_part));
}

TEST(SigV4Verifier, AcceptsEveryRequestSignedByBotocore) {
  const auto& requests = botocore_requests();
  ASSERT_GE(requests.size(), 150u) << "botocore_iotdata.py failed";
  const auto verifier = botocore_verifier();
  std::size_t gateway = 0;
  for (const BotocoreRequest& b : requests) {
    const awsiot::Verification v = verifier.verify(b.request, b.signed_at + 2s);
    ASSERT_TRUE(v.ok()) << b.name << ": " << v.detail;
    EXPECT_EQ(v.principal->access_key_id, b.access_key);
    EXPECT_EQ(v.principal->role, b.access_key == "device-key-1" ? srv::Role::device : srv::Role::admin);
    gateway += b.name.starts_with("iotdevicegateway ");
  }
  EXPECT_GT(gateway, 10u);
}

TEST(SigV4Verifier, OneVerifierServesManyThreadsAtOnce) {
  const auto& requests = botocore_requests();
  ASSERT_FALSE(requests.empty());
  const auto verifier = botocore_verifier();
  std::atomic<std::size_t> accepted{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t n = 0; n < requests.size(); ++n) {
        const BotocoreRequest& b = requests[(n + t * 41) % requests.size()];  // threads out of step
        accepted += verifier.verify(b.request, b.signed_at).ok();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(accepted, 4 * requests.size());
}

TEST(SigV4Verifier, BotocoreRequestsCoverNamesThatNeedPercentEncoding) {
  for (const char* part : {"/things/my%20thing/shadow", "/things/t%231%25/shadow", "/things/%C3%BCn%C3%AF/shadow",
                           "name=a%20b", "name=has%23hash", "name=100%25", "name=%C3%A9%E2%98%83", "name=a%2Fb",
                           "name=plus%2Bsign", "name=%24package", "name=my%3Athing", "nextToken=a%2Bb%2Fc%3Dd%20e"}) {
    EXPECT_NO_THROW(find_request("GET", part)) << part;
  }
  EXPECT_FALSE(find_request("POST", "name=%C3%A9%E2%98%83").request.body.empty());
  EXPECT_NO_THROW(find_request("DELETE", "name=has%23hash"));
}

TEST(SigV4Verifier, RefusesATamperedBody) {
  srv::HttpRequest r = find_request("POST", "name=a%20b").request;
  const auto signed_at = find_request("POST", "name=a%20b").signed_at;
  r.body.replace(r.body.find("21.5"), 4, "99.9");
  const awsiot::Verification v = botocore_verifier().verify(r, signed_at);
  EXPECT_EQ(v.refusal, Refusal::signature_mismatch) << v.detail;
  EXPECT_EQ(v.principal, nullptr);
}

TEST(SigV4Verifier, RefusesATamperedQueryOrPath) {
  const BotocoreRequest& b = find_request("GET", "name=a%20b");
  for (auto tamper : {+[](std::string& t) { t.replace(t.find("a%20b"), 5, "a%20c"); },
                      +[](std::string& t) { t += "&name=other"; },
                      +[](std::string& t) { t.replace(t.find("thing-1"), 7, "thing-2"); },
                      +[](std::string& t) { t.erase(t.find('?')); }}) {
    srv::HttpRequest r = b.request;
    tamper(r.target);
    EXPECT_EQ(botocore_verifier().verify(r, b.signed_at).refusal, Refusal::signature_mismatch) << r.target;
  }
}

TEST(SigV4Verifier, RefusesAPayloadHashThatIsNotTheBodys) {
  const BotocoreRequest& b = find_request("POST", "name=a%20b");
  srv::HttpRequest r = b.request;
  r.headers.emplace_back("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD");
  EXPECT_EQ(botocore_verifier().verify(r, b.signed_at).refusal, Refusal::payload_hash_mismatch);
  r.headers.back().second = aws::hex_sha256(r.body);  // the right hash, unsigned: harmless
  EXPECT_TRUE(botocore_verifier().verify(r, b.signed_at).ok());
}

// ---- refusals of requests signed here ------------------------------------------------------

constexpr const char* kAmzDate = "20261123T101500Z";
const Clock::time_point kSignedAt = at_epoch_seconds(1795428900);  // 2026-11-23T10:15:00Z

// A POST to the shadow "a b" of thing-1, signed by our own signer (which agrees with botocore:
// tests/aws/) with the given key, service and signed headers.
srv::HttpRequest signed_request(const std::string& access_key = "AKIAADMINEXAMPLE",
                                const std::string& secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                const std::string& service = "iotdata", bool sign_host = true) {
  aws::SignableRequest s;
  s.method = "POST";
  s.path = "/things/thing-1/shadow";
  s.query = {{"name", "a b"}};
  s.body = R"({"state":{"desired":{"on":true}}})";
  if (sign_host) s.headers.emplace_back("Host", "127.0.0.1:8443");
  s.headers.emplace_back("Content-Type", "application/json");
  aws::sign(s, {"eu-west-1", service, kAmzDate}, {access_key, secret, ""});
  srv::HttpRequest r;
  r.method = s.method;
  r.target = "/things/thing-1/shadow?name=a%20b";
  r.body = s.body;
  r.headers = s.headers;
  if (!sign_host) r.headers.emplace_back("Host", "127.0.0.1:8443");
  r.authorization = s.headers.back().second;
  return r;
}

Refusal refusal_of(const srv::HttpRequest& r, Clock::time_point now = kSignedAt) {
  return botocore_verifier().verify(r, now).refusal;
}

void set_header(srv::HttpRequest& r, std::string_view name, std::string value) {
  for (auto& [n, v] : r.headers) {
    if (n == name) v = std::move(value);
  }
}

TEST(SigV4Verifier, AcceptsClockSkewUpToFifteenMinutesEitherWay) {
  EXPECT_EQ(refusal_of(signed_request()), Refusal::none);
  EXPECT_EQ(refusal_of(signed_request(), kSignedAt + 15min), Refusal::none);
  EXPECT_EQ(refusal_of(signed_request(), kSignedAt - 15min), Refusal::none);
  EXPECT_EQ(refusal_of(signed_request(), kSignedAt + 16min), Refusal::clock_skew);
  EXPECT_EQ(refusal_of(signed_request(), kSignedAt - 16min), Refusal::clock_skew);
}

TEST(SigV4Verifier, RefusesAnUnknownKeyOrAWrongSecret) {
  EXPECT_EQ(refusal_of(signed_request("AKIAUNKNOWN")), Refusal::unknown_access_key);
  EXPECT_EQ(refusal_of(signed_request("AKIAADMINEXAMPLE", "not-the-secret")), Refusal::signature_mismatch);
  EXPECT_EQ(refusal_of(signed_request("device-key-1", "s3cr3t+/=key")), Refusal::none);
}

TEST(SigV4Verifier, AcceptsOnlyTheServiceNamesOfAwsIot) {
  EXPECT_EQ(refusal_of(signed_request("AKIAADMINEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                      "iotdevicegateway")),
            Refusal::none);
  for (const char* service : {"iot", "s3", "dynamodb", "IOTDATA"}) {
    EXPECT_EQ(refusal_of(signed_request("AKIAADMINEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", service)),
              Refusal::wrong_service)
        << service;
  }
}

TEST(SigV4Verifier, RefusesARequestWhoseHostIsNotSigned) {
  const srv::HttpRequest r = signed_request("AKIAADMINEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "iotdata", false);
  EXPECT_EQ(r.authorization.find("host"), std::string::npos);
  EXPECT_EQ(refusal_of(r), Refusal::host_not_signed);
}

TEST(SigV4Verifier, RefusesAScopeDateThatIsNotTheDayOfXAmzDate) {
  srv::HttpRequest r = signed_request();
  set_header(r, "X-Amz-Date", "20261124T101500Z");
  EXPECT_EQ(refusal_of(r, kSignedAt + 24h), Refusal::date_scope_mismatch);
  r = signed_request();
  set_header(r, "Authorization", r.authorization.replace(r.authorization.find("/20261123/"), 10, "/20261122/"));
  EXPECT_EQ(refusal_of(r), Refusal::date_scope_mismatch);
}

TEST(SigV4Verifier, RefusesAChangedDateOrSignedHeader) {
  srv::HttpRequest r = signed_request();
  set_header(r, "X-Amz-Date", "20261123T101501Z");
  EXPECT_EQ(refusal_of(r), Refusal::signature_mismatch);
  r = signed_request();
  set_header(r, "Content-Type", "text/plain");
  EXPECT_EQ(refusal_of(r), Refusal::signature_mismatch);
  r = signed_request();
  std::erase_if(r.headers, [](const auto& h) { return h.first == "Content-Type"; });
  EXPECT_EQ(refusal_of(r), Refusal::signed_header_missing);
}

TEST(SigV4Verifier, RefusesMissingOrMalformedAuthorization) {
  srv::HttpRequest r = signed_request();
  std::erase_if(r.headers, [](const auto& h) { return h.first == "Authorization"; });
  EXPECT_EQ(refusal_of(r), Refusal::missing_authorization);
  r.target += "&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00";
  const awsiot::Verification presigned = botocore_verifier().verify(r, kSignedAt);
  EXPECT_EQ(presigned.refusal, Refusal::missing_authorization);
  EXPECT_NE(presigned.detail.find("presigned"), std::string::npos);

  const std::string good = signed_request().authorization;
  const std::string sig = good.substr(good.find("Signature=") + 10);
  for (const std::string& bad : {
           std::string("Bearer abc"),
           "AWS4-HMAC-SHA1 " + good.substr(17),
           good.substr(0, good.find(", Signature")),
           good + ", Signature=" + sig,
           "AWS4-HMAC-SHA256 Credential=AKIAADMINEXAMPLE/20261123/eu-west-1/iotdata, SignedHeaders=host, Signature=" + sig,
           "AWS4-HMAC-SHA256 Credential=AKIAADMINEXAMPLE/20261123/eu-west-1/iotdata/aws4_request, "
           "SignedHeaders=Host;x-amz-date, Signature=" + sig,
           good.substr(0, good.size() - 1),
           good.substr(0, good.size() - 64) + std::string(64, 'G'),
           std::string("AWS4-HMAC-SHA256"),
       }) {
    r = signed_request();
    set_header(r, "Authorization", bad);
    EXPECT_EQ(refusal_of(r), Refusal::malformed_authorization) << bad;
  }
}

TEST(SigV4Verifier, RefusesAMissingOrMalformedXAmzDate) {
  for (const char* date : {"", "2026-11-23T10:15:00Z", "20261123T101500", "20261323T101500Z", "20261123T251500Z"}) {
    srv::HttpRequest r = signed_request();
    set_header(r, "X-Amz-Date", date);
    EXPECT_EQ(refusal_of(r), Refusal::missing_date) << date;
  }
}

TEST(SigV4Verifier, RefusesAMalformedQueryEscape) {
  srv::HttpRequest r = signed_request();
  r.target += "&bad=%zz";
  EXPECT_EQ(refusal_of(r), Refusal::signature_mismatch);
}

// A 15 KB request naming one header thousands of times in SignedHeaders used to make an 11 MB
// canonical request, echoed in the 403 and the log. Each name must come once.
TEST(SigV4Verifier, RefusesRepeatedSignedHeaders) {
  const std::string good = signed_request().authorization;
  const std::string head = good.substr(0, good.find("SignedHeaders=") + 14);
  const std::string tail = good.substr(good.find(", Signature="));
  for (const std::string& names : {std::string("host;host;x-amz-date"), std::string("x-amz-date;host;x-amz-date"),
                                   std::string("content-type;host;x-amz-date;x-amz-date")}) {
    srv::HttpRequest r = signed_request();
    set_header(r, "Authorization", head + names + tail);
    const awsiot::Verification v = botocore_verifier().verify(r, kSignedAt);
    EXPECT_EQ(v.refusal, Refusal::malformed_authorization) << names;
    EXPECT_NE(v.detail.find("each header once"), std::string::npos) << v.detail;
  }
  // Another order is the client's to choose (AWS's Java SDK v1 sorts ignoring case): only the
  // signature decides then.
  srv::HttpRequest r = signed_request();
  set_header(r, "Authorization", head + "x-amz-date;host;content-type" + tail);
  EXPECT_EQ(refusal_of(r), Refusal::signature_mismatch);
}

TEST(SigV4Verifier, ARefusalStaysSmallWhateverTheRequestsSize) {
  srv::HttpRequest r = signed_request("AKIAADMINEXAMPLE", "not-the-secret");
  // Signed (by name) headers of 14 KB: the canonical request is at least as long.
  std::string names;
  for (int i = 0; i < 200; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "a-pad-%03d", i);
    r.headers.emplace_back(name, std::string(60, 'v'));
    names += name;
    names += ';';
  }
  names += "content-type;host;x-amz-date";
  const std::string good = r.authorization;
  const std::string bad = good.substr(0, good.find("SignedHeaders=") + 14) + names + good.substr(good.find(", Signature="));
  set_header(r, "Authorization", bad);
  const awsiot::Verification v = botocore_verifier().verify(r, kSignedAt);
  EXPECT_EQ(v.refusal, Refusal::signature_mismatch);
  EXPECT_LT(v.detail.size(), 1200u);
  EXPECT_NE(v.detail.find("bytes in all)"), std::string::npos) << v.detail;
}

}  // namespace
