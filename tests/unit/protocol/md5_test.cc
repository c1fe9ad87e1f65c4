// Unit tests of PostgreSQL's MD5 password authentication: the stored hash, the salted response to
// AuthenticationMD5Password and its constant-time verification, against values PostgreSQL 15
// itself computed.
#include "pgsluice/protocol/md5.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

namespace pgsluice::protocol {
namespace {

// From PostgreSQL 15: SELECT 'md5'||md5('pencil'||'user'), and the rolpassword of
// CREATE ROLE y PASSWORD 'pencil' with password_encryption='md5' (user name "y").
constexpr std::string_view kPencilUserHash = "md520c46e3762c864548e296b33c3406aa9";
constexpr std::string_view kPencilYHash = "md5a80a6c0967e923f0e3eba985228a4417";
// SELECT 'md5'||md5(convert_to('20c46e3762c864548e296b33c3406aa9','UTF8') || '\x01ff7f80'::bytea)
constexpr std::array<uint8_t, 4> kSalt = {0x01, 0xff, 0x7f, 0x80};
constexpr std::string_view kPencilUserResponse = "md5120d429160c2e56b31c14db8528858c3";

TEST(Md5Test, HexOfEmptyInput) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
}

TEST(Md5Test, HexIsLowercase32Digits) {
  EXPECT_EQ(md5_hex("The quick brown fox jumps over the lazy dog"),
            "9e107d9d372bb6826bd81d3542a419d6");
}

TEST(Md5Test, PasswordHashMatchesPostgres) {
  EXPECT_EQ(md5_password_hash("pencil", "user"), kPencilUserHash);
  EXPECT_EQ(md5_password_hash("pencil", "y"), kPencilYHash);
  EXPECT_EQ(md5_password_hash("secret", "x"), "md5ac2b10d9871b8fe9d086b7652279ff79");
}

TEST(Md5Test, PasswordHashOfAHashIsUnchanged) {
  // Like PostgreSQL's CREATE ROLE … PASSWORD 'md5…': an already hashed password is stored as is.
  EXPECT_EQ(md5_password_hash(kPencilUserHash, "someone-else"), kPencilUserHash);
}

TEST(Md5Test, RecognisesStoredHashes) {
  EXPECT_TRUE(is_md5_password_hash(kPencilUserHash));
  EXPECT_FALSE(is_md5_password_hash("pencil"));
  EXPECT_FALSE(is_md5_password_hash(""));
  EXPECT_FALSE(is_md5_password_hash("md5"));
  EXPECT_FALSE(is_md5_password_hash("md520c46e3762c864548e296b33c3406aa"));    // 31 digits
  EXPECT_FALSE(is_md5_password_hash("md520c46e3762c864548e296b33c3406aa90"));  // 33 digits
  EXPECT_FALSE(is_md5_password_hash("md520C46E3762C864548E296B33C3406AA9"));   // uppercase
  EXPECT_FALSE(is_md5_password_hash("MD520c46e3762c864548e296b33c3406aa9"));
  EXPECT_FALSE(is_md5_password_hash("md520c46e3762c864548e296b33c3406aag"));
}

TEST(Md5Test, SaltedResponseFromPlainPasswordMatchesPostgres) {
  EXPECT_EQ(md5_salted_response("pencil", "user", kSalt), kPencilUserResponse);
}

TEST(Md5Test, SaltedResponseFromStoredHashMatchesPostgres) {
  // The user name does not enter: the stored hash already contains it.
  EXPECT_EQ(md5_salted_response(kPencilUserHash, "user", kSalt), kPencilUserResponse);
  EXPECT_EQ(md5_salted_response(kPencilUserHash, "ignored", kSalt), kPencilUserResponse);
}

TEST(Md5Test, SaltedResponseDependsOnSaltAndUser) {
  const std::string a = md5_salted_response("pencil", "user", kSalt);
  EXPECT_NE(a, md5_salted_response("pencil", "user", {0x01, 0xff, 0x7f, 0x81}));
  EXPECT_NE(a, md5_salted_response("pencil", "usr", kSalt));
  EXPECT_EQ(md5_salted_response("pencil", "user", {0, 0, 0, 0}).size(), 35u);
}

TEST(Md5Test, VerifiesAgainstPlainStoredPassword) {
  EXPECT_TRUE(md5_verify_response("pencil", "user", kSalt, kPencilUserResponse));
}

TEST(Md5Test, VerifiesAgainstStoredHash) {
  EXPECT_TRUE(md5_verify_response(kPencilUserHash, "user", kSalt, kPencilUserResponse));
}

TEST(Md5Test, RejectsWrongPasswordUserOrSalt) {
  EXPECT_FALSE(md5_verify_response("pencil2", "user", kSalt, kPencilUserResponse));
  EXPECT_FALSE(md5_verify_response("pencil", "user2", kSalt, kPencilUserResponse));
  EXPECT_FALSE(md5_verify_response("pencil", "user", {1, 2, 3, 4}, kPencilUserResponse));
  EXPECT_FALSE(md5_verify_response(kPencilYHash, "user", kSalt, kPencilUserResponse));
}

TEST(Md5Test, RejectsMalformedResponses) {
  EXPECT_FALSE(md5_verify_response("pencil", "user", kSalt, ""));
  EXPECT_FALSE(md5_verify_response("pencil", "user", kSalt, "md5"));
  // The right digits, but truncated, extended or with the prefix changed.
  EXPECT_FALSE(md5_verify_response("pencil", "user", kSalt, kPencilUserResponse.substr(0, 34)));
  EXPECT_FALSE(md5_verify_response("pencil", "user", kSalt,
                                   std::string(kPencilUserResponse) + std::string(1, '\0')));
  EXPECT_FALSE(md5_verify_response("pencil", "user", kSalt,
                                   "MD5" + std::string(kPencilUserResponse.substr(3))));
  // The stored hash itself is not a valid response: it lacks the salt.
  EXPECT_FALSE(md5_verify_response("pencil", "user", kSalt, kPencilUserHash));
}

TEST(Md5Test, ScramVerifierCannotAnswerMd5) {
  // Taking a SCRAM verifier for a plain password would let its reader log in with it.
  const std::string verifier =
      "SCRAM-SHA-256$4096:dGSMaYu3FYD42oSO4CtVZw==$K6xMynoZgY/HcpHquDxMuS9zEV8tPWn4rR5AIXHC27A=:"
      "LebNsaIQfq8ctgVpq5xmbu3PwgksVzpqiwpNPc6HycU=";
  const std::string response = md5_salted_response(verifier, "x", kSalt);
  EXPECT_FALSE(md5_verify_response(verifier, "x", kSalt, response));
}

TEST(Md5Test, HandlesBinaryAndEmptyInput) {
  const std::string with_nul("pa\0ss", 5);
  const std::string response = md5_salted_response(with_nul, "u", {0, 0, 0, 0});
  EXPECT_TRUE(md5_verify_response(with_nul, "u", {0, 0, 0, 0}, response));
  EXPECT_FALSE(md5_verify_response("pa", "u", {0, 0, 0, 0}, response));
  EXPECT_EQ(md5_password_hash("", ""), "md5d41d8cd98f00b204e9800998ecf8427e");
}

}  // namespace
}  // namespace pgsluice::protocol
