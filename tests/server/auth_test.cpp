#include "server/auth.hpp"

#include <gtest/gtest.h>

namespace srv = deviceshadow::server;

namespace {

const std::string kHash = srv::sha256_hex("token-1");

TEST(Auth, Sha256MatchesTheKnownVector) {
  EXPECT_EQ(srv::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Auth, ParsesRolesPatternsAndComments) {
  auto auth = srv::Authenticator::parse("# comment line\n\n" + kHash + " device house-1 house-2#* # trailing comment\n");
  ASSERT_EQ(auth.size(), 1u);
  const srv::Token* t = auth.authenticate("Bearer token-1");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->role, srv::Role::device);
  EXPECT_EQ(t->patterns, (std::vector<std::string>{"house-1", "house-2#*"}));
  EXPECT_TRUE(t->covers("house-1"));
  EXPECT_TRUE(t->covers("house-2#kitchen"));
  EXPECT_TRUE(t->covers("house-2#"));
  EXPECT_FALSE(t->covers("house-10"));
  EXPECT_FALSE(t->covers("house-2"));
  EXPECT_EQ(auth.authenticate("Bearer token-2"), nullptr);
  EXPECT_EQ(auth.authenticate("bearer token-1"), nullptr);
  EXPECT_EQ(auth.authenticate("Bearer "), nullptr);
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

TEST(Auth, RolesAllowTheActionsOfTheSpec) {
  using A = srv::Action;
  srv::Token admin{"", srv::Role::admin, {}}, app{"", srv::Role::app, {}}, device{"", srv::Role::device, {}};
  for (A a : {A::read, A::write_reported, A::write_desired, A::remove, A::list, A::history}) EXPECT_TRUE(admin.may(a));
  for (A a : {A::read, A::write_desired, A::remove, A::list, A::history}) EXPECT_TRUE(app.may(a));
  EXPECT_FALSE(app.may(A::write_reported));
  for (A a : {A::read, A::write_reported}) EXPECT_TRUE(device.may(a));
  for (A a : {A::write_desired, A::remove, A::list, A::history}) EXPECT_FALSE(device.may(a));
}

}  // namespace
