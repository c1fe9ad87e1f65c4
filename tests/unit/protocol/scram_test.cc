// Unit tests of SCRAM-SHA-256: strict base64, PostgreSQL's verifier format (with a verifier
// PostgreSQL 15 generated), the RFC 7677 test vector through both ScramServer and ScramClient,
// full client/server exchanges with a password and with pass-through keys, and the rejection of
// wrong credentials and malformed messages.
#include "pgsluice/protocol/scram.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace pgsluice::protocol {
namespace {

// RFC 7677 section 3.
constexpr std::string_view kRfcClientNonce = "rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kRfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr std::string_view kRfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kRfcServerFirst =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr std::string_view kRfcClientFinal =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr std::string_view kRfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
constexpr std::string_view kRfcCombinedNonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";

// From PostgreSQL 15: SET password_encryption='scram-sha-256';
// CREATE ROLE x LOGIN PASSWORD 'secret'; SELECT rolpassword FROM pg_authid WHERE rolname='x'.
constexpr std::string_view kPostgresVerifier =
    "SCRAM-SHA-256$4096:dGSMaYu3FYD42oSO4CtVZw==$K6xMynoZgY/HcpHquDxMuS9zEV8tPWn4rR5AIXHC27A=:"
    "LebNsaIQfq8ctgVpq5xmbu3PwgksVzpqiwpNPc6HycU=";

ScramVerifier rfc_verifier() {
  return make_scram_verifier("pencil", *base64_decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096);
}

// A ScramServer for the RFC vector that has already answered the RFC client-first.
ScramServer rfc_server_after_first() {
  ScramServer server(rfc_verifier(), std::string(kRfcServerNonce));
  std::string server_first;
  EXPECT_EQ(server.handle_client_first(kRfcClientFirst, server_first), ScramStatus::ok);
  return server;
}

// A ScramClient with the RFC's nonce that has sent its client-first.
ScramClient rfc_client_after_first(std::string_view password = "pencil") {
  ScramClient client = ScramClient::with_password(password, std::string(kRfcClientNonce));
  client.client_first("user");
  return client;
}

struct ExchangeResult {
  ScramStatus server_first_status = ScramStatus::malformed;
  ScramStatus client_final_status = ScramStatus::malformed;
  ScramStatus server_final_status = ScramStatus::malformed;
  ScramStatus client_done_status = ScramStatus::malformed;
};

// Runs one whole exchange between `client` and `server`, as PostgreSQL messages go.
ExchangeResult run_exchange(ScramClient& client, ScramServer& server) {
  ExchangeResult result;
  std::string server_first;
  std::string client_final;
  std::string server_final;
  result.server_first_status = server.handle_client_first(client.client_first(), server_first);
  if (result.server_first_status != ScramStatus::ok) return result;
  result.client_final_status = client.handle_server_first(server_first, client_final);
  if (result.client_final_status != ScramStatus::ok) return result;
  result.server_final_status = server.handle_client_final(client_final, server_final);
  if (result.server_final_status != ScramStatus::ok) return result;
  result.client_done_status = client.handle_server_final(server_final);
  return result;
}

bool exchange_succeeds(ScramClient& client, ScramServer& server) {
  return run_exchange(client, server).client_done_status == ScramStatus::ok;
}

// ---- base64

TEST(Base64Test, EncodesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("n,,"), "biws");
  EXPECT_EQ(base64_encode("y,,"), "eSws");
}

TEST(Base64Test, DecodesWithoutPaddingBytes) {
  // EVP_DecodeBlock alone would return 3 bytes for "Zg==" (the padding decoded as zeros).
  EXPECT_EQ(base64_decode(""), std::string());
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64_decode("Zm8="), "fo");
  EXPECT_EQ(base64_decode("Zm9v"), "foo");
  EXPECT_EQ(base64_decode("Zm9vYg=="), "foob");
  EXPECT_EQ(base64_decode("Zm9vYmE="), "fooba");
  EXPECT_EQ(base64_decode("Zm9vYmFy"), "foobar");
  EXPECT_EQ(base64_decode("AA==")->size(), 1u);
  EXPECT_EQ(base64_decode("AAA=")->size(), 2u);
}

TEST(Base64Test, RoundTripsBinaryOfEveryLength) {
  std::string raw;
  for (int i = 0; i < 300; ++i) {
    const std::string encoded = base64_encode(raw);
    EXPECT_EQ(encoded.size(), (raw.size() + 2) / 3 * 4);
    const std::optional<std::string> decoded = base64_decode(encoded);
    ASSERT_TRUE(decoded.has_value()) << i;
    EXPECT_EQ(*decoded, raw) << i;
    raw.push_back(static_cast<char>((i * 37 + 11) & 0xff));
  }
}

TEST(Base64Test, RoundTripsLongerThanOneChunk) {
  // Longer than the chunk size the implementation feeds to OpenSSL at once.
  std::string raw(100'003, '\0');
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i * 131 % 251);
  const std::string encoded = base64_encode(raw);
  EXPECT_EQ(encoded.size(), (raw.size() + 2) / 3 * 4);
  EXPECT_EQ(base64_decode(encoded), raw);
}

TEST(Base64Test, RejectsInvalidInput) {
  const std::vector<std::string> invalid = {"Zg",       "Zg=",
                                            "Z",        "Zm9vY",
                                            "Zg===",    "====",
                                            "=Zg=",     "Z=g=",
                                            "Zm9v=Zm8", "Zm9v Zm8=",
                                            " Zm9v",    "Zm9v\n",
                                            "Zm9v\t",   "Zm9-",
                                            "Zm9_",     "Zm9v!abc",
                                            "Zh==",     "Zm9=",
                                            "A===",     "AB=C",
                                            "Zm8=Zm8=", std::string("Zm\0v", 4)};
  for (const std::string& text : invalid) {
    EXPECT_FALSE(base64_decode(text).has_value()) << '"' << text << '"';
  }
}

TEST(Base64Test, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("", "a"));
}

TEST(ScramNonceTest, RandomNoncesArePrintableAndDistinct) {
  const std::string a = scram_random_nonce();
  const std::string b = scram_random_nonce();
  EXPECT_EQ(a.size(), 24u);  // 18 bytes, as PostgreSQL's server nonce
  EXPECT_NE(a, b);
  for (char c : a) EXPECT_NE(c, ',');
  EXPECT_EQ(base64_decode(a)->size(), 18u);
  EXPECT_EQ(scram_random_nonce(3).size(), 4u);
  EXPECT_EQ(scram_random_nonce(0), "");
}

// ---- verifiers

TEST(ScramVerifierTest, ParsesPostgresVerifier) {
  const std::optional<ScramVerifier> verifier = parse_scram_verifier(kPostgresVerifier);
  ASSERT_TRUE(verifier.has_value());
  EXPECT_EQ(verifier->iterations, 4096);
  EXPECT_EQ(verifier->salt.size(), 16u);
  EXPECT_EQ(verifier->salt, *base64_decode("dGSMaYu3FYD42oSO4CtVZw=="));
  EXPECT_TRUE(is_scram_verifier(kPostgresVerifier));
  EXPECT_EQ(format_scram_verifier(*verifier), kPostgresVerifier);
}

TEST(ScramVerifierTest, PasswordDerivesPostgresVerifier) {
  const ScramVerifier parsed = *parse_scram_verifier(kPostgresVerifier);
  const ScramVerifier made = make_scram_verifier("secret", parsed.salt, parsed.iterations);
  EXPECT_EQ(format_scram_verifier(made), kPostgresVerifier);
  const ScramVerifier other = make_scram_verifier("Secret", parsed.salt, parsed.iterations);
  EXPECT_NE(other.stored_key, parsed.stored_key);
  EXPECT_NE(other.server_key, parsed.server_key);
}

TEST(ScramVerifierTest, RfcVectorVerifierRoundTrips) {
  const ScramVerifier verifier = rfc_verifier();
  const std::string text = format_scram_verifier(verifier);
  EXPECT_TRUE(text.starts_with("SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$")) << text;
  const std::optional<ScramVerifier> parsed = parse_scram_verifier(text);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->iterations, verifier.iterations);
  EXPECT_EQ(parsed->salt, verifier.salt);
  EXPECT_EQ(parsed->stored_key, verifier.stored_key);
  EXPECT_EQ(parsed->server_key, verifier.server_key);
}

TEST(ScramVerifierTest, RejectsMalformedVerifiers) {
  const std::string salt = "dGSMaYu3FYD42oSO4CtVZw==";
  const std::string stored = "K6xMynoZgY/HcpHquDxMuS9zEV8tPWn4rR5AIXHC27A=";
  const std::string server = "LebNsaIQfq8ctgVpq5xmbu3PwgksVzpqiwpNPc6HycU=";
  const std::string short_key = "K6xMynoZgY/HcpHquDxMuS9zEV8tPWn4rR5AIXHC";  // 30 bytes
  const std::vector<std::string> invalid = {
      "",
      "secret",
      "md520c46e3762c864548e296b33c3406aa9",
      "SCRAM-SHA-256$",
      "SCRAM-SHA-1$4096:" + salt + "$" + stored + ":" + server,
      "scram-sha-256$4096:" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$0:" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$-1:" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$+4096:" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$ 4096:" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$4096x:" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$99999999999:" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$:" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$4096:$" + stored + ":" + server,
      "SCRAM-SHA-256$4096:" + salt + "$" + stored,
      "SCRAM-SHA-256$4096:" + salt + "$" + stored + ":",
      "SCRAM-SHA-256$4096:" + salt + "$" + stored + ":" + server + "x",
      "SCRAM-SHA-256$4096:" + salt + "$" + stored + ":" + server + ":" + server,
      "SCRAM-SHA-256$4096:" + salt + "$" + stored + ":" + server + "$",
      "SCRAM-SHA-256$4096:" + salt + "$" + short_key + ":" + server,
      "SCRAM-SHA-256$4096:" + salt + "$" + stored + ":" + short_key,
      "SCRAM-SHA-256$4096:" + salt + stored + ":" + server,
      "SCRAM-SHA-256$4096" + salt + "$" + stored + ":" + server,
      "SCRAM-SHA-256$4096:dGSM!Yu3FYD42oSO4CtVZw==$" + stored + ":" + server,
  };
  for (const std::string& text : invalid) {
    EXPECT_FALSE(parse_scram_verifier(text).has_value()) << text;
    EXPECT_FALSE(is_scram_verifier(text)) << text;
  }
}

TEST(ScramVerifierTest, AHugeIterationCountIsStillAVerifier) {
  // Never mistaken for a plain password (which anyone who read the verifier could then type);
  // ClientAuth refuses to compute with it (kMaxScramIterations).
  const std::string text =
      "SCRAM-SHA-256$2147483647:dGSMaYu3FYD42oSO4CtVZw==$"
      "K6xMynoZgY/HcpHquDxMuS9zEV8tPWn4rR5AIXHC27A=:"
      "LebNsaIQfq8ctgVpq5xmbu3PwgksVzpqiwpNPc6HycU=";
  EXPECT_TRUE(is_scram_verifier(text));
  EXPECT_EQ(parse_scram_verifier(text)->iterations, 2147483647);
  EXPECT_GT(2147483647, kMaxScramIterations);
}

TEST(ScramVerifierTest, InvalidIterationCountMakesUnusableVerifier) {
  const ScramVerifier verifier = make_scram_verifier("secret", "salt", 0);
  EXPECT_EQ(verifier.iterations, 0);
  EXPECT_FALSE(is_scram_verifier(format_scram_verifier(verifier)));
}

// ---- RFC 7677 test vector

TEST(ScramRfcVectorTest, ServerAnswersRfcMessages) {
  ScramServer server(rfc_verifier(), std::string(kRfcServerNonce));
  std::string server_first;
  ASSERT_EQ(server.handle_client_first(kRfcClientFirst, server_first), ScramStatus::ok);
  EXPECT_EQ(server_first, kRfcServerFirst);
  std::string server_final;
  ASSERT_EQ(server.handle_client_final(kRfcClientFinal, server_final), ScramStatus::ok);
  EXPECT_EQ(server_final, kRfcServerFinal);
}

TEST(ScramRfcVectorTest, ClientComputesRfcProof) {
  ScramClient client = ScramClient::with_password("pencil", std::string(kRfcClientNonce));
  EXPECT_EQ(client.client_first("user"), kRfcClientFirst);
  std::string client_final;
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_EQ(client_final, kRfcClientFinal);
  EXPECT_EQ(client.handle_server_final(kRfcServerFinal), ScramStatus::ok);
}

TEST(ScramRfcVectorTest, ServerRecoversClientKeyForPassThrough) {
  ScramServer server = rfc_server_after_first();
  std::string server_final;
  ASSERT_EQ(server.handle_client_final(kRfcClientFinal, server_final), ScramStatus::ok);
  // The recovered ClientKey with the verifier's ServerKey reproduces the RFC exchange exactly.
  ScramClient client = ScramClient::with_keys(server.client_key(), server.verifier().server_key,
                                              std::string(kRfcClientNonce));
  EXPECT_EQ(client.client_first("user"), kRfcClientFirst);
  std::string client_final;
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_EQ(client_final, kRfcClientFinal);
  EXPECT_EQ(client.handle_server_final(kRfcServerFinal), ScramStatus::ok);
}

TEST(ScramRfcVectorTest, ClientFirstEscapesUserName) {
  ScramClient client = ScramClient::with_password("pencil", "abc");
  EXPECT_EQ(client.client_first(), "n,,n=,r=abc");
  EXPECT_EQ(client.client_first("a,b=c"), "n,,n=a=2Cb=3Dc,r=abc");
}

// ---- PostgreSQL 15 verifier

TEST(ScramPostgresTest, PasswordLogsInAgainstPostgresVerifier) {
  ScramServer server(*parse_scram_verifier(kPostgresVerifier));
  ScramClient client = ScramClient::with_password("secret");
  EXPECT_TRUE(exchange_succeeds(client, server));
}

TEST(ScramPostgresTest, PassThroughLogsInWithProvenKeys) {
  const ScramVerifier verifier = *parse_scram_verifier(kPostgresVerifier);
  // A client logs in to the pooler with its password…
  ScramServer pooler_side(verifier);
  ScramClient app = ScramClient::with_password("secret");
  ASSERT_TRUE(exchange_succeeds(app, pooler_side));
  // …and the pooler logs in to a server with the same verifier using only the keys.
  ScramServer server_side(verifier);
  ScramClient pooler =
      ScramClient::with_keys(pooler_side.client_key(), pooler_side.verifier().server_key);
  EXPECT_TRUE(exchange_succeeds(pooler, server_side));
  EXPECT_EQ(server_side.client_key(), pooler_side.client_key());
}

TEST(ScramPostgresTest, WrongPasswordIsWrongProof) {
  ScramServer server(*parse_scram_verifier(kPostgresVerifier));
  ScramClient client = ScramClient::with_password("Secret");
  EXPECT_EQ(run_exchange(client, server).server_final_status, ScramStatus::wrong_proof);
  EXPECT_EQ(server.client_key(), ScramKey{});
}

TEST(ScramPostgresTest, PassThroughWithWrongKeysFails) {
  const ScramVerifier verifier = *parse_scram_verifier(kPostgresVerifier);
  ScramKey client_key{};
  client_key[0] = 1;
  ScramServer server(verifier);
  ScramClient client = ScramClient::with_keys(client_key, verifier.server_key);
  EXPECT_EQ(run_exchange(client, server).server_final_status, ScramStatus::wrong_proof);

  // The right ClientKey but a wrong ServerKey: the server's signature does not verify.
  ScramServer pooler_side(verifier);
  ScramClient app = ScramClient::with_password("secret");
  ASSERT_TRUE(exchange_succeeds(app, pooler_side));
  ScramKey wrong_server_key = verifier.server_key;
  wrong_server_key[31] ^= 0x80;
  ScramServer server2(verifier);
  ScramClient client2 = ScramClient::with_keys(pooler_side.client_key(), wrong_server_key);
  EXPECT_EQ(run_exchange(client2, server2).client_done_status, ScramStatus::wrong_server_signature);
}

TEST(ScramExchangeTest, FreshVerifierAndRandomNonces) {
  const ScramVerifier verifier = make_scram_verifier("correct horse", "0123456789abcdef", 16);
  ScramServer server(verifier);
  ScramClient client = ScramClient::with_password("correct horse");
  EXPECT_TRUE(exchange_succeeds(client, server));
  ScramServer server2(verifier);
  ScramClient client2 = ScramClient::with_password("correct horse!");
  EXPECT_EQ(run_exchange(client2, server2).server_final_status, ScramStatus::wrong_proof);
}

// ---- server side: malformed and unsupported client messages

TEST(ScramServerTest, AcceptsAnyUserNameAndYFlag) {
  for (std::string_view first :
       {"n,,n=,r=abc", "n,,n=someone,r=abc", "y,,n=,r=abc", "n,,n=user,r=abc,x=extension"}) {
    ScramServer server(rfc_verifier(), "XYZ");
    std::string server_first;
    EXPECT_EQ(server.handle_client_first(first, server_first), ScramStatus::ok) << first;
    EXPECT_TRUE(server_first.starts_with("r=abcXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")) << first;
  }
}

TEST(ScramServerTest, YFlagNeedsMatchingChannelBinding) {
  ScramServer server(rfc_verifier(), std::string(kRfcServerNonce));
  std::string server_first;
  ASSERT_EQ(server.handle_client_first("y,,n=user,r=rOprNGfwEbeRWgbNEkqO", server_first),
            ScramStatus::ok);
  std::string server_final;
  // "biws" is "n,,", but this client sent "y,,": the c= must be "eSws".
  EXPECT_EQ(server.handle_client_final(kRfcClientFinal, server_final), ScramStatus::malformed);

  // A full exchange with "y,,": the client side here is built by hand from the RFC keys.
  ScramServer server2(rfc_verifier(), std::string(kRfcServerNonce));
  ASSERT_EQ(server2.handle_client_first("y,,n=user,r=rOprNGfwEbeRWgbNEkqO", server_first),
            ScramStatus::ok);
  std::string final_with_y = "c=eSws,r=" + std::string(kRfcCombinedNonce) + ",p=";
  // The proof of the RFC vector is for c=biws and n=user with "n,,"; with "eSws" it differs, so
  // expect wrong_proof (well-formed, wrong signature) rather than malformed.
  EXPECT_EQ(server2.handle_client_final(
                final_with_y + "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", server_final),
            ScramStatus::wrong_proof);
}

TEST(ScramServerTest, ChannelBindingAndAuthzidAreUnsupported) {
  const std::vector<std::string_view> unsupported = {
      "p=tls-server-end-point,,n=,r=abc",
      "n,a=admin,n=,r=abc",
      "n,,m=ext,n=,r=abc",
  };
  for (std::string_view first : unsupported) {
    ScramServer server(rfc_verifier());
    std::string server_first;
    EXPECT_EQ(server.handle_client_first(first, server_first), ScramStatus::unsupported) << first;
  }
}

TEST(ScramServerTest, RejectsMalformedClientFirst) {
  const std::vector<std::string> malformed = {
      "",
      "n",
      "n,",
      "n,,",
      "x,,n=,r=abc",
      "p,,n=,r=abc",
      "nn,,n=,r=abc",
      "n,x,n=,r=abc",
      "n,,r=abc",        // no user name attribute
      "n,,n=",           // no nonce
      "n,,n=,r=",        // empty nonce
      "n,,n=,x=abc",     // nonce attribute missing
      "n,,r=abc,n=",     // wrong order
      "n,,n=,,r=abc",    // empty attribute
      "n,,n=,r=abc,",    // trailing comma
      "n,,n=,r=ab c",    // space in nonce
      "n,,n=,r=ab\x7f",  // DEL in nonce
      "n,,n=,rr=abc",    // attribute name of two letters
      "n,,n=,1=abc",     // not a letter
      std::string("n,,n=,r=a\0c", 11),
      "n,,n=,r=abc,r=def",                 // the nonce twice
      "n,,n=,r=abc,x=1,x=2",               // an extension twice
      "n,,n=\xff\xfe,r=abc",               // a user name that is not UTF-8
      "n,,n=\xc0\xaf,r=abc",               // an overlong '/'
      "n,,n=\xed\xa0\x80,r=abc",           // a surrogate
      "n,,n=ab\xe2\x82,r=abc",             // cut short
      "n,,n=,r=" + std::string(513, 'a'),  // an oversized nonce
  };
  for (const std::string& first : malformed) {
    ScramServer server(rfc_verifier());
    std::string server_first;
    EXPECT_EQ(server.handle_client_first(first, server_first), ScramStatus::malformed) << first;
  }
}

TEST(ScramServerTest, RejectsMalformedClientFinal) {
  const std::string nonce(kRfcCombinedNonce);
  const std::string proof = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
  const std::vector<std::string> malformed = {
      "",
      "c=biws,r=" + nonce,                           // missing p=
      "c=biws,r=" + nonce + ",p=",                   // empty proof
      "c=biws,p=" + proof,                           // missing r=
      "r=" + nonce + ",p=" + proof,                  // missing c=
      "r=" + nonce + ",c=biws,p=" + proof,           // wrong order
      "c=biws,r=" + nonce + ",p=" + proof + ",x=1",  // proof not last
      "c=eSws,r=" + nonce + ",p=" + proof,           // c= not our GS2 header
      "c=cD10bHMtc2VydmVyLWVuZC1wb2ludCws,r=" + nonce + ",p=" + proof,
      "c=biw,r=" + nonce + ",p=" + proof,          // bad base64 in c=
      "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=" + proof,  // client nonce only
      "c=biws,r=" + nonce + "x,p=" + proof,        // nonce extended
      "c=biws,r=" + nonce.substr(0, nonce.size() - 1) + "1,p=" + proof,
      "c=biws,r=" + nonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ",  // bad base64
      "c=biws,r=" + nonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7And===",
      "c=biws,r=" + nonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7A=",  // 29 bytes
      "c=biws,r=" + nonce + ",p=" + proof + proof,                          // 64 bytes
      "c=biws,r=" + nonce + ",p=" + proof + ",",
      "c=biws,,r=" + nonce + ",p=" + proof,
      "c=biws,r=" + nonce + ",r=" + nonce + ",p=" + proof,  // the nonce twice
  };
  for (const std::string& final_message : malformed) {
    ScramServer server = rfc_server_after_first();
    std::string server_final = "untouched";
    EXPECT_EQ(server.handle_client_final(final_message, server_final), ScramStatus::malformed)
        << final_message;
    EXPECT_EQ(server_final, "");
  }
}

TEST(ScramServerTest, AcceptsExtensionBeforeProof) {
  // Extensions are part of client-final-without-proof, so the RFC proof no longer matches; the
  // point is that the message is well-formed: wrong_proof, not malformed.
  ScramServer server = rfc_server_after_first();
  std::string server_final;
  EXPECT_EQ(server.handle_client_final("c=biws,r=" + std::string(kRfcCombinedNonce) +
                                           ",x=ext,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                                       server_final),
            ScramStatus::wrong_proof);
}

TEST(ScramServerTest, TamperedProofIsWrongProof) {
  std::string tampered(kRfcClientFinal);
  tampered[tampered.size() - 3] = tampered[tampered.size() - 3] == 'A' ? 'B' : 'A';
  ScramServer server = rfc_server_after_first();
  std::string server_final;
  EXPECT_EQ(server.handle_client_final(tampered, server_final), ScramStatus::wrong_proof);
  EXPECT_EQ(server_final, "");
}

TEST(ScramServerTest, ClientFinalNeedsClientFirstAndWorksOnce) {
  ScramServer fresh(rfc_verifier(), std::string(kRfcServerNonce));
  std::string server_final;
  EXPECT_EQ(fresh.handle_client_final(kRfcClientFinal, server_final), ScramStatus::malformed);

  ScramServer server = rfc_server_after_first();
  ASSERT_EQ(server.handle_client_final(kRfcClientFinal, server_final), ScramStatus::ok);
  EXPECT_EQ(server.handle_client_final(kRfcClientFinal, server_final), ScramStatus::malformed);
}

TEST(ScramServerTest, ChangedServerFirstBreaksTheProof) {
  // The server-first is part of the signed AuthMessage: a server with another salt but the same
  // keys (so a different server-first) must not accept the RFC proof.
  ScramVerifier verifier = rfc_verifier();
  verifier.salt = "another salt";
  ScramServer server(verifier, std::string(kRfcServerNonce));
  std::string server_first;
  ASSERT_EQ(server.handle_client_first(kRfcClientFirst, server_first), ScramStatus::ok);
  std::string server_final;
  EXPECT_EQ(server.handle_client_final(kRfcClientFinal, server_final), ScramStatus::wrong_proof);
}

// ---- client side: malformed server messages

TEST(ScramClientTest, RejectsMalformedServerFirst) {
  const std::string nonce(kRfcCombinedNonce);
  const std::string salt = "W22ZaJ0SNY7soEsUEjb6gQ==";
  const std::vector<std::string> malformed = {
      "",
      "r=" + nonce,
      "r=" + nonce + ",s=" + salt,              // missing i=
      "r=" + nonce + ",i=4096",                 // missing s=
      "s=" + salt + ",i=4096",                  // missing r=
      "s=" + salt + ",r=" + nonce + ",i=4096",  // wrong order
      "r=" + nonce + ",s=" + salt + ",i=0",
      "r=" + nonce + ",s=" + salt + ",i=-1",
      "r=" + nonce + ",s=" + salt + ",i=",
      "r=" + nonce + ",s=" + salt + ",i=4096x",
      "r=" + nonce + ",s=" + salt + ",i= 4096",
      "r=" + nonce + ",s=" + salt + ",i=10000001",  // absurd
      "r=" + nonce + ",s=" + salt + ",i=99999999999999999999",
      "r=" + nonce + ",s=,i=4096",                         // empty salt
      "r=" + nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096",  // bad base64
      "r=" + nonce + ",s=W22ZaJ0S NY7soEsUEjb6gQ==,i=4096",
      "r=rOprNGfwEbeRWgbNEkqO,s=" + salt + ",i=4096",      // not extended
      "r=XOprNGfwEbeRWgbNEkqO%hvY,s=" + salt + ",i=4096",  // not our nonce
      "r=rOprNGfwEbeRWgbNEkq,s=" + salt + ",i=4096",       // prefix of ours
      "r=" + nonce + "\x01,s=" + salt + ",i=4096",         // unprintable
      "r=" + nonce + ",s=" + salt + ",i=4096,",
      "r=" + nonce + ",,s=" + salt + ",i=4096",
      "r=" + nonce + std::string(600, 'n') + ",s=" + salt + ",i=4096",           // oversized nonce
      "r=" + nonce + ",s=" + base64_encode(std::string(1024, 's')) + ",i=4096",  // and salt
  };
  for (const std::string& server_first : malformed) {
    ScramClient client = rfc_client_after_first();
    std::string client_final = "untouched";
    EXPECT_EQ(client.handle_server_first(server_first, client_final), ScramStatus::malformed)
        << server_first;
    EXPECT_EQ(client_final, "");
  }
}

TEST(ScramClientTest, MandatoryExtensionIsUnsupported) {
  ScramClient client = rfc_client_after_first();
  std::string client_final;
  EXPECT_EQ(client.handle_server_first("m=x," + std::string(kRfcServerFirst), client_final),
            ScramStatus::unsupported);
}

TEST(ScramClientTest, AcceptsIterationBounds) {
  // i=1 is the smallest count accepted (and cheap); the signature then differs from the RFC's.
  ScramClient client = rfc_client_after_first();
  std::string client_final;
  EXPECT_EQ(
      client.handle_server_first(
          "r=" + std::string(kRfcCombinedNonce) + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", client_final),
      ScramStatus::ok);
  EXPECT_EQ(client.handle_server_final(kRfcServerFinal), ScramStatus::wrong_server_signature);
}

TEST(ScramClientTest, WithKeysIgnoresSaltAndIterations) {
  ScramServer server = rfc_server_after_first();
  std::string server_final;
  ASSERT_EQ(server.handle_client_final(kRfcClientFinal, server_final), ScramStatus::ok);
  ScramClient client = ScramClient::with_keys(server.client_key(), server.verifier().server_key,
                                              std::string(kRfcClientNonce));
  client.client_first("user");
  std::string client_final;
  // Another salt and count change the server-first (so the proof), but no key derivation is done.
  ASSERT_EQ(client.handle_server_first(
                "r=" + std::string(kRfcCombinedNonce) + ",s=c2FsdA==,i=10000000", client_final),
            ScramStatus::ok);
  EXPECT_TRUE(client_final.starts_with("c=biws,r=" + std::string(kRfcCombinedNonce) + ",p="));
}

TEST(ScramClientTest, WrongPasswordGivesDifferentProof) {
  ScramClient client = rfc_client_after_first("pencil2");
  std::string client_final;
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_NE(client_final, kRfcClientFinal);
  ScramServer server = rfc_server_after_first();
  std::string server_final;
  EXPECT_EQ(server.handle_client_final(client_final, server_final), ScramStatus::wrong_proof);
}

TEST(ScramClientTest, TamperedServerSignatureIsRejected) {
  std::string tampered(kRfcServerFinal);
  tampered[5] = tampered[5] == 'A' ? 'B' : 'A';
  ScramClient client = rfc_client_after_first();
  std::string client_final;
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_EQ(client.handle_server_final(tampered), ScramStatus::wrong_server_signature);
}

TEST(ScramClientTest, RejectsMalformedServerFinal) {
  const std::vector<std::string> malformed = {
      "",
      "v=",
      "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4",  // bad base64
      "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl9",     // short signature
      "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
      "x=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
      std::string(kRfcServerFinal) + ",",
  };
  for (const std::string& server_final : malformed) {
    ScramClient client = rfc_client_after_first();
    std::string client_final;
    ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
    EXPECT_EQ(client.handle_server_final(server_final), ScramStatus::malformed) << server_final;
  }
}

TEST(ScramClientTest, ServerFinalExtensionsAreIgnored) {
  ScramClient client = rfc_client_after_first();
  std::string client_final;
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_EQ(client.handle_server_final(std::string(kRfcServerFinal) + ",x=1"), ScramStatus::ok);
}

TEST(ScramClientTest, ServerErrorAttribute) {
  for (auto [message, expected] : std::vector<std::pair<std::string, ScramStatus>>{
           {"e=invalid-proof", ScramStatus::wrong_proof},
           {"e=other-error", ScramStatus::wrong_server_signature},
           {"e=unknown-user", ScramStatus::wrong_server_signature}}) {
    ScramClient client = rfc_client_after_first();
    std::string client_final;
    ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
    EXPECT_EQ(client.handle_server_final(message), expected) << message;
  }
}

TEST(ScramClientTest, OutOfOrderMessagesAreMalformed) {
  ScramClient client = ScramClient::with_password("pencil", std::string(kRfcClientNonce));
  std::string client_final;
  // No client-first sent yet.
  EXPECT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::malformed);
  // No server-first handled: an all-zero signature must not pass either.
  EXPECT_EQ(client.handle_server_final(kRfcServerFinal), ScramStatus::malformed);
  EXPECT_EQ(client.handle_server_final("v=" + base64_encode(std::string(32, '\0'))),
            ScramStatus::malformed);
  client.client_first("user");
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_EQ(client.handle_server_final(kRfcServerFinal), ScramStatus::ok);
  // One answer per exchange.
  EXPECT_EQ(client.handle_server_final(kRfcServerFinal), ScramStatus::malformed);
}

TEST(ScramServerTest, AcceptsAUtf8UserName) {
  ScramServer server(rfc_verifier());
  std::string server_first;
  EXPECT_EQ(server.handle_client_first("n,,n=J\xc3\xbcrgen \xf0\x9f\x90\x98,r=abc", server_first),
            ScramStatus::ok);
}

TEST(ScramClientTest, ASecondServerFirstIsRefused) {
  // Answering again would sign whatever a second server-first says (a server steering the
  // exchange); PostgreSQL sends one.
  ScramClient client = rfc_client_after_first();
  std::string client_final;
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::malformed);
  EXPECT_EQ(client_final, "");
}

TEST(ScramClientTest, CompletedOnlyAfterTheServerSignatureChecks) {
  ScramClient client = rfc_client_after_first();
  EXPECT_FALSE(client.completed());
  std::string client_final;
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_FALSE(client.completed());  // AuthenticationOk now would be a server that never signed
  ScramClient wrong = rfc_client_after_first();
  ASSERT_EQ(wrong.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_EQ(wrong.handle_server_final("v=" + base64_encode(std::string(32, 'x'))),
            ScramStatus::wrong_server_signature);
  EXPECT_FALSE(wrong.completed());
  EXPECT_EQ(client.handle_server_final(kRfcServerFinal), ScramStatus::ok);
  EXPECT_TRUE(client.completed());
}

TEST(ScramClientTest, FailedSignatureCheckEndsTheExchange) {
  ScramClient client = rfc_client_after_first();
  std::string client_final;
  ASSERT_EQ(client.handle_server_first(kRfcServerFirst, client_final), ScramStatus::ok);
  EXPECT_EQ(client.handle_server_final("v=" + base64_encode(std::string(32, 'x'))),
            ScramStatus::wrong_server_signature);
  EXPECT_EQ(client.handle_server_final(kRfcServerFinal), ScramStatus::malformed);
}

}  // namespace
}  // namespace pgsluice::protocol
