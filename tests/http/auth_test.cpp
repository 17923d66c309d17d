#include "http/auth.hpp"

#include "aws/sigv4.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>

namespace srv = deviceshadow::http;

namespace {

const std::string kHash = deviceshadow::aws::hex_sha256("token-1");

TEST(Auth, Sha256MatchesTheKnownVector) {
  EXPECT_EQ(deviceshadow::aws::hex_sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Auth, ParsesRolesPatternsAndComments) {
  auto auth = srv::Authenticator::parse("# comment line\n  # indented comment\n\n" + kHash + " device house-1\thouse-2%23*\r\n");
  ASSERT_EQ(auth.size(), 1u);
  const srv::Token* t = auth.authenticate("Bearer token-1");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->role, srv::Role::device);
  using P = deviceshadow::ThingPattern;
  EXPECT_EQ(t->patterns, (std::vector<P>{{"house-1", false}, {"house-2#", true}}));
  EXPECT_TRUE(t->covers("house-1"));
  EXPECT_TRUE(t->covers("house-2#kitchen"));
  EXPECT_TRUE(t->covers("house-2#"));
  EXPECT_FALSE(t->covers("house-10"));
  EXPECT_FALSE(t->covers("house-2"));
  EXPECT_EQ(auth.authenticate("Bearer token-2"), nullptr);
  EXPECT_EQ(auth.authenticate("bearer token-1"), nullptr);
  EXPECT_EQ(auth.authenticate("Bearer "), nullptr);
}

// Every valid thing name can be written as a pattern: '#', spaces, '%' and a final '*'.
TEST(Auth, PercentEncodedPatternsExpressEveryName) {
  auto auth = srv::Authenticator::parse(kHash + " device My%20House%23Basement %23kitchen 100%25 star%2A pre%2A* *\n");
  const srv::Token* t = auth.authenticate("Bearer token-1");
  ASSERT_NE(t, nullptr);
  using P = deviceshadow::ThingPattern;
  EXPECT_EQ(t->patterns, (std::vector<P>{{"My House#Basement", false}, {"#kitchen", false}, {"100%", false},
                                          {"star*", false}, {"pre*", true}, {"", true}}));
  EXPECT_TRUE(t->patterns[0].matches("My House#Basement"));
  EXPECT_FALSE(t->patterns[0].matches("My"));
  EXPECT_FALSE(t->patterns[3].matches("starlight"));
  EXPECT_TRUE(t->patterns[5].matches("anything"));
}

TEST(Auth, RejectsMalformedLinesNamingTheLine) {
  for (const std::string& text : std::vector<std::string>{"nothex admin", kHash, kHash + " root", std::string(64, 'A') + " admin"}) {
    try {
      srv::Authenticator::parse("# ok\n" + text + "\n");
      FAIL() << text;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    }
  }
}

// A second line for the same token would be dead (the first wins): refused, as is a file that
// grants nothing, one that is no regular file, and one that others may write.
TEST(Auth, RefusesFilesThatWouldNotGrantWhatTheySay) {
  try {
    srv::Authenticator::parse(kHash + " device only-me\n" + kHash + " admin\n");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2: this token's hash is on an earlier line too"), std::string::npos) << e.what();
  }
  const std::string path = testing::TempDir() + "auth_test_tokens";
  auto write = [&](const std::string& text, mode_t mode) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    ::chmod(path.c_str(), mode);
  };
  auto refusal = [&](const std::string& file) -> std::string {
    try {
      srv::Authenticator::load(file);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "accepted";
  };
  write("# nobody yet\n", 0644);
  EXPECT_NE(refusal(path).find("holds no token"), std::string::npos) << refusal(path);
  write(kHash + " admin\n", 0666);
  EXPECT_NE(refusal(path).find("has mode 0666: group and others must not be able to write it"), std::string::npos)
      << refusal(path);
  write(kHash + " admin\n", 0644);
  EXPECT_EQ(refusal(path), "accepted");
  EXPECT_NE(refusal(testing::TempDir()).find("is not a regular file"), std::string::npos);
  EXPECT_NE(refusal("/dev/null").find("is not a regular file"), std::string::npos);
  std::remove(path.c_str());
}

// A line that could be read more than one way is refused, never read so as to widen a token's
// rights: "#kitchen" used to start a comment and leave an unrestricted device token, and
// "My House#Basement" used to grant "My" and "House#Basement".
TEST(Auth, RefusesAmbiguousPatternsInsteadOfWideningRights) {
  const std::vector<std::string> lines = {
      kHash + " device #kitchen",          kHash + " device My House#Basement",
      kHash + " app house-1 # comment",    kHash + " device 100%",
      kHash + " device bad%2",             kHash + " device bad%zz",
      kHash + " device %00control",        kHash + " device %FF%FE",
      kHash + " device " + std::string(513, 'x'),
  };
  for (const std::string& line : lines) {
    try {
      srv::Authenticator::parse("# tokens\n" + line + "\n");
      FAIL() << "accepted: " << line;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("line 2: pattern "), std::string::npos) << e.what();
    }
  }
}

TEST(Auth, RolesAllowTheActionsOfTheSpec) {
  using A = srv::Action;
  srv::Grant admin{srv::Role::admin, {}}, app{srv::Role::app, {}}, device{srv::Role::device, {}};
  for (A a : {A::read, A::write_reported, A::write_desired, A::remove, A::list, A::history}) EXPECT_TRUE(admin.may(a));
  for (A a : {A::read, A::write_desired, A::remove, A::list, A::history}) EXPECT_TRUE(app.may(a));
  EXPECT_FALSE(app.may(A::write_reported));
  for (A a : {A::read, A::write_reported}) EXPECT_TRUE(device.may(a));
  for (A a : {A::write_desired, A::remove, A::list, A::history}) EXPECT_FALSE(device.may(a));
}

}  // namespace
