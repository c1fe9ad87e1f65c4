// SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it, over OpenSSL's libcrypto: strict
// base64, PostgreSQL's verifier format, and both ends of the exchange (the pooler as the server of
// its clients, and as the client of PostgreSQL, with a password or with pass-through keys). Every
// malformed input is reported as a ScramStatus; nothing here throws.
#include "pgsluice/protocol/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace pgsluice::protocol {
namespace {

constexpr std::string_view kVerifierPrefix = "SCRAM-SHA-256$";
constexpr std::string_view kClientKeyLabel = "Client Key";
constexpr std::string_view kServerKeyLabel = "Server Key";
// A server asking for more PBKDF2 rounds than this is broken or hostile (it would pin a core for
// minutes per login); PostgreSQL's default is 4096.
// PostgreSQL's nonces are 24 characters from each side (18 random bytes in base64) and its salts
// 16 bytes; these leave room for other servers and clients and refuse what only an attacker sends.
constexpr size_t kMaxNonceLength = 512;
constexpr size_t kMaxSaltBase64Length = 1024;

// ---- crypto primitives (each returns false only if libcrypto itself fails, e.g. out of memory)

bool sha256(const uint8_t* data, size_t size, ScramKey& out) {
  unsigned int length = 0;
  return EVP_Digest(data, size, out.data(), &length, EVP_sha256(), nullptr) == 1 &&
         length == out.size();
}

bool hmac_sha256(const uint8_t* key, size_t key_size, std::string_view data, ScramKey& out) {
  if (key_size > INT_MAX) return false;
  unsigned int length = 0;
  return HMAC(EVP_sha256(), key, static_cast<int>(key_size),
              reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(),
              &length) != nullptr &&
         length == out.size();
}

bool hmac_sha256(const ScramKey& key, std::string_view data, ScramKey& out) {
  return hmac_sha256(key.data(), key.size(), data, out);
}

bool salted_password(std::string_view password, std::string_view salt, int iterations,
                     ScramKey& out) {
  if (iterations < 1 || password.size() > INT_MAX || salt.size() > INT_MAX) return false;
  return PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                           reinterpret_cast<const unsigned char*>(salt.data()),
                           static_cast<int>(salt.size()), iterations, EVP_sha256(),
                           static_cast<int>(out.size()), out.data()) == 1;
}

// ClientKey and ServerKey of a password; the SaltedPassword in between is wiped, it is as good as
// the password for logging in anywhere the same salt and iteration count are used.
bool derive_keys(std::string_view password, std::string_view salt, int iterations,
                 ScramKey& client_key, ScramKey& server_key) {
  ScramKey salted{};
  const bool ok = salted_password(password, salt, iterations, salted) &&
                  hmac_sha256(salted, kClientKeyLabel, client_key) &&
                  hmac_sha256(salted, kServerKeyLabel, server_key);
  OPENSSL_cleanse(salted.data(), salted.size());
  return ok;
}

ScramKey xor_keys(const ScramKey& a, const ScramKey& b) {
  ScramKey out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = a[i] ^ b[i];
  return out;
}

std::string_view key_view(const ScramKey& key) {
  return {reinterpret_cast<const char*>(key.data()), key.size()};
}

// Decodes base64 that must be exactly one 32-byte key.
bool decode_key(std::string_view text, ScramKey& out) {
  const std::optional<std::string> raw = base64_decode(text);
  if (!raw || raw->size() != out.size()) return false;
  std::copy(raw->begin(), raw->end(), out.begin());
  return true;
}

// ---- message syntax

// RFC 5802 "printable": %x21-7E except ",". Nonces must be made of these.
bool is_printable_nonce(std::string_view nonce) {
  if (nonce.empty()) return false;
  for (char c : nonce) {
    if (c < 0x21 || c > 0x7e || c == ',') return false;
  }
  return true;
}

// "a=value" with a single ASCII letter as the attribute name; the value may be empty.
bool is_attribute(std::string_view attr) {
  return attr.size() >= 2 && attr[1] == '=' &&
         ((attr[0] >= 'a' && attr[0] <= 'z') || (attr[0] >= 'A' && attr[0] <= 'Z'));
}

// Splits on ',' (no value may contain one: saslnames escape it as "=2C", base64 cannot hold it),
// so every element is one attribute. Returns false if any element is not of the form "x=…".
bool split_attributes(std::string_view text, std::vector<std::string_view>& out) {
  out.clear();
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view attr = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!is_attribute(attr)) return false;
    out.push_back(attr);
    if (comma == std::string_view::npos) return true;
    start = comma + 1;
  }
}

// No attribute name twice (RFC 5802 gives each one meaning once; PostgreSQL's own order checks
// would read a second r= as an extension).
bool names_unique(const std::vector<std::string_view>& attrs) {
  uint64_t seen = 0;
  for (std::string_view attr : attrs) {
    const char c = attr[0];
    const unsigned bit =
        c >= 'a' ? static_cast<unsigned>(c - 'a') + 26 : static_cast<unsigned>(c - 'A');
    if ((seen >> bit) & 1U) return false;
    seen |= uint64_t{1} << bit;
  }
  return true;
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), as a
// saslname must be.
bool is_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    uint32_t cp = 0;
    uint32_t min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;  // cut short
    for (size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

bool has_name(std::string_view attr, char name) {
  return attr[0] == name;
}
std::string_view value_of(std::string_view attr) {
  return attr.substr(2);
}

// A decimal count without sign, blanks or trailing characters, within [1, max].
bool parse_count(std::string_view text, long max, int& out) {
  if (text.empty() || text.size() > 12) return false;
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > max) {
    return false;
  }
  out = static_cast<int>(value);
  return true;
}

// RFC 5802 saslname: "," and "=" are escaped as "=2C" and "=3D".
std::string escape_saslname(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c == ',') {
      out += "=2C";
    } else if (c == '=') {
      out += "=3D";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

// ---- base64, nonces, comparison

std::string base64_encode(std::string_view raw) {
  // EVP_EncodeBlock takes an int length, so very long inputs go in chunks; a chunk that is a
  // multiple of 3 bytes encodes without padding, so the pieces concatenate into one valid text.
  constexpr size_t kChunk = 3 * 4096;
  std::string out;
  out.reserve((raw.size() + 2) / 3 * 4);
  unsigned char buffer[kChunk / 3 * 4 + 1];  // + the NUL EVP_EncodeBlock writes
  for (size_t offset = 0; offset < raw.size(); offset += kChunk) {
    const std::string_view chunk = raw.substr(offset, kChunk);
    const int written =
        EVP_EncodeBlock(buffer, reinterpret_cast<const unsigned char*>(chunk.data()),
                        static_cast<int>(chunk.size()));
    out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(written));
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  // Strict RFC 4648: whole quads, alphabet characters only, and '=' only as one or two final
  // padding characters. EVP_DecodeBlock alone is too lenient (it skips leading and trailing
  // blanks) and counts each padding '=' as a decoded zero byte, so validate first and subtract.
  if (text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') {
    padding = text[text.size() - 2] == '=' ? 2 : 1;
  }
  for (size_t i = 0; i < text.size() - padding; ++i) {
    if (base64_value(text[i]) < 0) return std::nullopt;
  }
  if (text.empty()) return std::string();
  // The bits of the last character that fall past the final byte must be zero: otherwise several
  // texts would decode to the same bytes (RFC 4648 3.5 lets decoders reject them; we do).
  const int last = base64_value(text[text.size() - padding - 1]);
  if ((padding == 1 && (last & 0x03) != 0) || (padding == 2 && (last & 0x0f) != 0)) {
    return std::nullopt;
  }
  std::string out;
  const size_t decoded_max = text.size() / 4 * 3;
  out.resize(decoded_max);
  // Decode quad-aligned chunks: EVP_DecodeBlock takes an int length, like EVP_EncodeBlock.
  constexpr size_t kChunk = 4 * 4096;
  size_t produced = 0;
  for (size_t offset = 0; offset < text.size(); offset += kChunk) {
    const std::string_view chunk = text.substr(offset, kChunk);
    const int written = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data() + produced),
                                        reinterpret_cast<const unsigned char*>(chunk.data()),
                                        static_cast<int>(chunk.size()));
    if (written < 0 || static_cast<size_t>(written) != chunk.size() / 4 * 3) return std::nullopt;
    produced += static_cast<size_t>(written);
  }
  out.resize(produced - padding);
  return out;
}

std::string scram_random_nonce(size_t raw_bytes) {
  if (raw_bytes > INT_MAX) std::abort();
  std::string raw(raw_bytes, '\0');
  // A SCRAM nonce that is not unpredictable makes the exchange replayable. There is no status to
  // return here and the library does not throw, so a failing CSPRNG (no entropy source at all) is
  // fatal rather than silently weakening every login.
  if (raw_bytes > 0 &&
      RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw_bytes)) != 1) {
    std::abort();
  }
  return base64_encode(raw);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// ---- verifiers

std::optional<ScramVerifier> parse_scram_verifier(std::string_view text) {
  if (!text.starts_with(kVerifierPrefix)) return std::nullopt;
  text.remove_prefix(kVerifierPrefix.size());
  // <iterations>:<salt>$<StoredKey>:<ServerKey>
  const size_t dollar = text.find('$');
  if (dollar == std::string_view::npos) return std::nullopt;
  const std::string_view params = text.substr(0, dollar);
  const std::string_view keys = text.substr(dollar + 1);
  const size_t colon1 = params.find(':');
  const size_t colon2 = keys.find(':');
  if (colon1 == std::string_view::npos || colon2 == std::string_view::npos) return std::nullopt;

  ScramVerifier verifier;
  // Any count parses (it is still a verifier, never a password); ClientAuth refuses to use one
  // above kMaxScramIterations.
  if (!parse_count(params.substr(0, colon1), INT_MAX, verifier.iterations)) return std::nullopt;
  std::optional<std::string> salt = base64_decode(params.substr(colon1 + 1));
  if (!salt || salt->empty()) return std::nullopt;
  verifier.salt = std::move(*salt);
  // A stray ':' or '$' in a key part is not base64, so decode_key rejects it.
  if (!decode_key(keys.substr(0, colon2), verifier.stored_key) ||
      !decode_key(keys.substr(colon2 + 1), verifier.server_key)) {
    return std::nullopt;
  }
  return verifier;
}

bool is_scram_verifier(std::string_view text) {
  return parse_scram_verifier(text).has_value();
}

std::string format_scram_verifier(const ScramVerifier& verifier) {
  std::string out(kVerifierPrefix);
  out += std::to_string(verifier.iterations);
  out += ':';
  out += base64_encode(verifier.salt);
  out += '$';
  out += base64_encode(key_view(verifier.stored_key));
  out += ':';
  out += base64_encode(key_view(verifier.server_key));
  return out;
}

ScramVerifier make_scram_verifier(std::string_view password, std::string_view salt,
                                  int iterations) {
  ScramVerifier verifier;
  verifier.iterations = iterations;
  verifier.salt = std::string(salt);
  ScramKey client_key{};
  if (!derive_keys(password, salt, iterations, client_key, verifier.server_key) ||
      !sha256(client_key.data(), client_key.size(), verifier.stored_key)) {
    // No way to report failure through this signature: return a verifier nothing can log in
    // with (iterations 0 does not parse back, all-zero StoredKey has no known preimage).
    verifier = ScramVerifier{};
  }
  OPENSSL_cleanse(client_key.data(), client_key.size());
  return verifier;
}

// ---- server side

ScramServer::ScramServer(ScramVerifier verifier, std::string server_nonce)
    : verifier_(std::move(verifier)),
      server_nonce_(server_nonce.empty() ? scram_random_nonce() : std::move(server_nonce)) {}

void ScramServer::set_channel_binding(bool offered, std::string data) {
  binding_offered_ = offered || !data.empty();
  binding_data_ = std::move(data);
}

ScramStatus ScramServer::handle_client_first(std::string_view client_first,
                                             std::string& server_first) {
  client_first_bare_.clear();
  server_first_.clear();
  combined_nonce_.clear();
  gs2_header_.clear();
  client_key_ = ScramKey{};

  // gs2-header = gs2-cbind-flag "," [authzid] ","
  // gs2-cbind-flag = ("p=" cb-name) / "n" / "y"
  const size_t first_comma = client_first.find(',');
  if (first_comma == std::string_view::npos) return ScramStatus::malformed;
  const std::string_view flag = client_first.substr(0, first_comma);
  if (flag.starts_with("p=")) {
    // Binding is only valid when the client chose SCRAM-SHA-256-PLUS (binding_data_ set), and
    // only to the one type we can compute.
    if (binding_data_.empty() || flag.substr(2) != kScramChannelBindingType) {
      return ScramStatus::unsupported;
    }
  } else if (flag == "n" || flag == "y") {
    // -PLUS chosen without binding is a contradiction. "y" means the client could bind but
    // thinks the server cannot: when -PLUS was offered, someone removed it on the way.
    if (!binding_data_.empty() || (flag == "y" && binding_offered_)) {
      return ScramStatus::malformed;
    }
  } else {
    return ScramStatus::malformed;
  }
  const size_t second_comma = client_first.find(',', first_comma + 1);
  if (second_comma == std::string_view::npos) return ScramStatus::malformed;
  const std::string_view authzid =
      client_first.substr(first_comma + 1, second_comma - first_comma - 1);
  if (!authzid.empty()) {
    // "a=<user>": acting as another user, which PostgreSQL does not support either.
    return authzid.starts_with("a=") ? ScramStatus::unsupported : ScramStatus::malformed;
  }
  const std::string_view gs2_header = client_first.substr(0, second_comma + 1);
  const std::string_view bare = client_first.substr(second_comma + 1);

  // client-first-message-bare = [reserved-mext ","] username "," nonce ["," extensions]
  std::vector<std::string_view> attrs;
  if (!split_attributes(bare, attrs)) return ScramStatus::malformed;
  if (has_name(attrs[0], 'm')) return ScramStatus::unsupported;  // mandatory extension
  // The user name is ignored, as PostgreSQL does: the startup packet's user is authoritative and
  // clients (libpq) send "n=" empty. Extensions after the nonce are ignored.
  if (attrs.size() < 2 || !has_name(attrs[0], 'n') || !has_name(attrs[1], 'r') ||
      !names_unique(attrs) || !is_utf8(value_of(attrs[0]))) {
    return ScramStatus::malformed;
  }
  const std::string_view client_nonce = value_of(attrs[1]);
  if (!is_printable_nonce(client_nonce) || client_nonce.size() > kMaxNonceLength) {
    return ScramStatus::malformed;
  }

  gs2_header_ = std::string(gs2_header);
  client_first_bare_ = std::string(bare);
  combined_nonce_ = std::string(client_nonce) + server_nonce_;
  server_first_ = "r=" + combined_nonce_ + ",s=" + base64_encode(verifier_.salt) +
                  ",i=" + std::to_string(verifier_.iterations);
  server_first = server_first_;
  return ScramStatus::ok;
}

ScramStatus ScramServer::handle_client_final(std::string_view client_final,
                                             std::string& server_final) {
  server_final.clear();
  client_key_ = ScramKey{};
  if (combined_nonce_.empty()) return ScramStatus::malformed;  // no client-first before

  // client-final-message = channel-binding "," nonce ["," extensions] "," proof
  std::vector<std::string_view> attrs;
  if (!split_attributes(client_final, attrs)) return ScramStatus::malformed;
  if (attrs.size() < 3 || !has_name(attrs[0], 'c') || !has_name(attrs[1], 'r') ||
      !has_name(attrs.back(), 'p') || !names_unique(attrs)) {
    return ScramStatus::malformed;
  }
  // c= must repeat the GS2 header of the client-first: it is what ties the (unauthenticated)
  // first message to the signed final one.
  // With channel binding, it also carries the hash of the certificate this TLS connection uses:
  // a relay that terminates TLS with another certificate cannot forward the proof.
  const std::optional<std::string> binding = base64_decode(value_of(attrs[0]));
  const bool binding_expected = gs2_header_.starts_with("p=");
  if (!binding || !binding->starts_with(gs2_header_) ||
      std::string_view(*binding).substr(gs2_header_.size()) !=
          (binding_expected ? std::string_view(binding_data_) : std::string_view())) {
    return ScramStatus::malformed;
  }
  if (value_of(attrs[1]) != combined_nonce_) return ScramStatus::malformed;
  ScramKey proof{};
  if (!decode_key(value_of(attrs.back()), proof)) return ScramStatus::malformed;

  // The proof is the last attribute, so "without proof" is everything before its comma.
  const std::string_view without_proof =
      client_final.substr(0, client_final.size() - attrs.back().size() - 1);
  std::string auth_message = client_first_bare_;
  auth_message += ',';
  auth_message += server_first_;
  auth_message += ',';
  auth_message += without_proof;

  // ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage), so XOR-ing the signature back
  // recovers the ClientKey the client used; it is right iff its hash is the StoredKey.
  ScramKey client_signature{};
  ScramKey candidate_stored{};
  ScramKey server_signature{};
  if (!hmac_sha256(verifier_.stored_key, auth_message, client_signature)) {
    return ScramStatus::unsupported;
  }
  ScramKey candidate = xor_keys(proof, client_signature);
  if (!sha256(candidate.data(), candidate.size(), candidate_stored) ||
      !hmac_sha256(verifier_.server_key, auth_message, server_signature)) {
    OPENSSL_cleanse(candidate.data(), candidate.size());
    return ScramStatus::unsupported;
  }
  if (!constant_time_equal(key_view(candidate_stored), key_view(verifier_.stored_key))) {
    OPENSSL_cleanse(candidate.data(), candidate.size());
    return ScramStatus::wrong_proof;
  }
  client_key_ = candidate;
  OPENSSL_cleanse(candidate.data(), candidate.size());
  server_final = "v=" + base64_encode(key_view(server_signature));
  // One exchange per ScramServer: a replayed client-final must not succeed a second time.
  combined_nonce_.clear();
  return ScramStatus::ok;
}

// ---- client side

ScramClient ScramClient::with_password(std::string_view password, std::string client_nonce) {
  ScramClient client;
  client.password_ = std::string(password);
  client.client_nonce_ = client_nonce.empty() ? scram_random_nonce() : std::move(client_nonce);
  return client;
}

ScramClient ScramClient::with_keys(const ScramKey& client_key, const ScramKey& server_key,
                                   std::string client_nonce) {
  ScramClient client;
  client.client_key_ = client_key;
  client.server_key_ = server_key;
  client.client_nonce_ = client_nonce.empty() ? scram_random_nonce() : std::move(client_nonce);
  return client;
}

void ScramClient::set_channel_binding(std::string data) {
  if (data.empty()) {
    set_channel_binding_unused();
    return;
  }
  gs2_header_ = "p=" + std::string(kScramChannelBindingType) + ",,";
  binding_data_ = std::move(data);
}

std::string ScramClient::client_first() {
  return client_first(std::string_view());
}

std::string ScramClient::client_first(std::string_view user_name) {
  awaiting_server_final_ = false;
  client_first_bare_ = "n=" + escape_saslname(user_name) + ",r=" + client_nonce_;
  return gs2_header_ + client_first_bare_;
}

ScramStatus ScramClient::handle_server_first(std::string_view server_first,
                                             std::string& client_final) {
  client_final.clear();
  awaiting_server_final_ = false;
  if (client_first_bare_.empty()) return ScramStatus::malformed;  // no client-first sent
  // One server-first per exchange: answering a second would sign whatever a server makes up.
  if (std::exchange(server_first_seen_, true)) return ScramStatus::malformed;

  // server-first-message = [reserved-mext ","] nonce "," salt "," iteration-count ["," ext]
  std::vector<std::string_view> attrs;
  if (!split_attributes(server_first, attrs)) return ScramStatus::malformed;
  if (has_name(attrs[0], 'm')) return ScramStatus::unsupported;
  if (attrs.size() < 3 || !has_name(attrs[0], 'r') || !has_name(attrs[1], 's') ||
      !has_name(attrs[2], 'i')) {
    return ScramStatus::malformed;
  }
  // The server must extend our nonce, not replace it: our part is what makes the exchange fresh
  // from our side.
  const std::string_view nonce = value_of(attrs[0]);
  if (!is_printable_nonce(nonce) || nonce.size() <= client_nonce_.size() ||
      nonce.size() > kMaxNonceLength || !nonce.starts_with(client_nonce_)) {
    return ScramStatus::malformed;
  }
  if (value_of(attrs[1]).size() > kMaxSaltBase64Length) return ScramStatus::malformed;
  const std::optional<std::string> salt = base64_decode(value_of(attrs[1]));
  if (!salt || salt->empty()) return ScramStatus::malformed;
  int iterations = 0;
  if (!parse_count(value_of(attrs[2]), max_iterations_, iterations)) {
    return ScramStatus::malformed;
  }

  // With keys (pass-through) the salt and iteration count are not needed: the keys already are
  // the PBKDF2 result of the password with the salt and count of the shared verifier.
  if (password_ && !derive_keys(*password_, *salt, iterations, client_key_, server_key_)) {
    return ScramStatus::unsupported;
  }

  std::string without_proof = "c=" + base64_encode(gs2_header_ + binding_data_) + ",r=";
  without_proof += nonce;
  std::string auth_message = client_first_bare_;
  auth_message += ',';
  auth_message += server_first;
  auth_message += ',';
  auth_message += without_proof;

  ScramKey stored_key{};
  ScramKey client_signature{};
  if (!sha256(client_key_.data(), client_key_.size(), stored_key) ||
      !hmac_sha256(stored_key, auth_message, client_signature) ||
      !hmac_sha256(server_key_, auth_message, expected_server_signature_)) {
    return ScramStatus::unsupported;
  }
  const ScramKey proof = xor_keys(client_key_, client_signature);
  client_final = std::move(without_proof);
  client_final += ",p=";
  client_final += base64_encode(key_view(proof));
  awaiting_server_final_ = true;
  return ScramStatus::ok;
}

ScramStatus ScramClient::handle_server_final(std::string_view server_final) {
  if (!awaiting_server_final_) return ScramStatus::malformed;
  awaiting_server_final_ = false;  // one answer per exchange

  // server-final-message = (server-error / verifier) ["," extensions]
  std::vector<std::string_view> attrs;
  if (!split_attributes(server_final, attrs)) return ScramStatus::malformed;
  if (has_name(attrs[0], 'e')) {
    // PostgreSQL reports failures with an ErrorResponse, but a generic SCRAM server sends
    // "e=<reason>". "invalid-proof" means it rejected our credentials, the same meaning as
    // wrong_proof on the server side; any other reason means the server did not authenticate
    // itself, reported as wrong_server_signature.
    return value_of(attrs[0]) == "invalid-proof" ? ScramStatus::wrong_proof
                                                 : ScramStatus::wrong_server_signature;
  }
  if (!has_name(attrs[0], 'v')) return ScramStatus::malformed;
  ScramKey signature{};
  if (!decode_key(value_of(attrs[0]), signature)) return ScramStatus::malformed;
  if (!constant_time_equal(key_view(signature), key_view(expected_server_signature_))) {
    return ScramStatus::wrong_server_signature;
  }
  completed_ = true;
  return ScramStatus::ok;
}

}  // namespace pgsluice::protocol
