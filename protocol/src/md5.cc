// PostgreSQL's MD5 password authentication over OpenSSL's EVP interface: the stored hash
// "md5" + md5(password + user) and the salted challenge response "md5" + md5(hex + salt).
#include "pgsluice/protocol/md5.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <string>

#include "pgsluice/protocol/scram.h"

namespace pgsluice::protocol {
namespace {

constexpr std::string_view kMd5Prefix = "md5";
constexpr size_t kMd5HexLength = 32;

std::string to_hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0x0f]);
  }
  return out;
}

// The hex digest every salted response is built on: for a stored hash it is the hash itself.
std::string inner_hex(std::string_view password_or_hash, std::string_view user) {
  if (is_md5_password_hash(password_or_hash)) {
    return std::string(password_or_hash.substr(kMd5Prefix.size()));
  }
  std::string data;
  data.reserve(password_or_hash.size() + user.size());
  data.append(password_or_hash);
  data.append(user);
  return md5_hex(data);
}

}  // namespace

std::string md5_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // EVP rather than the deprecated MD5(): it can fail (an OpenSSL built or configured without MD5,
  // e.g. FIPS mode); then the result is empty, which never equals a real "md5…" response.
  // The digest fetched once: EVP_md5() makes EVP_Digest look MD5 up in the provider again on
  // every call (a third of a login's MD5 instructions). Fetched objects are immutable and
  // reference counted, so all threads share this one; it lives as long as the process.
  static EVP_MD* const kMd5 = EVP_MD_fetch(nullptr, "MD5", nullptr);
  if (kMd5 == nullptr ||
      EVP_Digest(data.data(), data.size(), digest, &length, kMd5, nullptr) != 1 ||
      length != kMd5HexLength / 2) {
    return {};
  }
  return to_hex(digest, length);
}

std::string md5_password_hash(std::string_view password, std::string_view user) {
  std::string hex = inner_hex(password, user);
  if (hex.empty()) return {};
  return std::string(kMd5Prefix) + hex;
}

bool is_md5_password_hash(std::string_view stored) {
  // The same test as PostgreSQL's get_password_type(): "md5" and exactly 32 lowercase hex digits.
  // A plain password of that exact shape is therefore taken for a hash, as PostgreSQL does too.
  if (stored.size() != kMd5Prefix.size() + kMd5HexLength || !stored.starts_with(kMd5Prefix)) {
    return false;
  }
  for (char c : stored.substr(kMd5Prefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string md5_salted_response(std::string_view password_or_hash, std::string_view user,
                                std::array<uint8_t, 4> salt) {
  std::string data = inner_hex(password_or_hash, user);
  if (data.empty()) return {};
  // The salt is four raw bytes (any value, NUL included), appended after the hex digits.
  data.append(reinterpret_cast<const char*>(salt.data()), salt.size());
  std::string hex = md5_hex(data);
  if (hex.empty()) return {};
  return std::string(kMd5Prefix) + hex;
}

bool md5_verify_response(std::string_view stored, std::string_view user,
                         std::array<uint8_t, 4> salt, std::string_view response) {
  // A SCRAM verifier cannot answer an MD5 challenge; taking it for a plain password would let
  // whoever read the verifier log in with it, which SCRAM itself does not allow.
  if (is_scram_verifier(stored)) return false;
  const std::string expected = md5_salted_response(stored, user, salt);
  // The lengths are public (every valid response is 35 bytes); only the contents are compared in
  // constant time, so the time taken does not tell how many leading bytes of a guess were right.
  if (expected.empty() || expected.size() != response.size()) return false;
  return CRYPTO_memcmp(expected.data(), response.data(), expected.size()) == 0;
}

}  // namespace pgsluice::protocol
