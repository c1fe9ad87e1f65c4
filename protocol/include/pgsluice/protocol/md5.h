// PostgreSQL's MD5 password authentication: stored hash "md5" + md5(password + user), and the
// salted response "md5" + md5(hex(stored hash without "md5") + salt).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace pgsluice::protocol {

std::string md5_hex(std::string_view data);
// "md5" followed by 32 hex digits: the form pg_authid and userlist.txt store.
std::string md5_password_hash(std::string_view password, std::string_view user);
bool is_md5_password_hash(std::string_view stored);
// The PasswordMessage a client sends to an AuthenticationMD5Password with `salt`, given either the
// plain password or the stored "md5…" hash.
std::string md5_salted_response(std::string_view password_or_hash, std::string_view user,
                                std::array<uint8_t, 4> salt);
// Checks a client's response against the stored password (plain or "md5…"), in constant time.
bool md5_verify_response(std::string_view stored, std::string_view user,
                         std::array<uint8_t, 4> salt, std::string_view response);

}  // namespace pgsluice::protocol
