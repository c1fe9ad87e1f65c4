// TlsContext and TlsSession without sockets: an accepting and a connecting session pass their
// ciphertext to each other in memory. Certificates are made here with OpenSSL's API (EC P-256, a
// CA, a server certificate for 127.0.0.1/localhost, a client certificate, and an unrelated CA),
// written to a temp dir because TlsContext reads files as the configuration names them.
#include "pooler/net/tls_session.h"

#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "pgsluice/protocol/scram.h"
#include "pooler/net/tls_context.h"

namespace pgsluice {
namespace {

namespace fs = std::filesystem;
namespace pp = pgsluice::protocol;

EVP_PKEY* make_key() {
  return EVP_EC_gen("P-256");
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(ext, nullptr);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// Signs a certificate for `cn` with `issuer_key` (self-signed when issuer is null).
X509* make_cert(const char* cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool ca,
                const char* san) {
  static long serial = 1;
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509_set_issuer_name(cert, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509* signer = issuer != nullptr ? issuer : cert;
  if (ca) {
    add_ext(cert, signer, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(cert, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  }
  if (san != nullptr) add_ext(cert, signer, NID_subject_alt_name, san);
  X509_sign(cert, issuer_key, EVP_sha256());
  return cert;
}

void write_pem(const fs::path& path, X509* cert) {
  FILE* f = std::fopen(path.c_str(), "w");
  PEM_write_X509(f, cert);
  std::fclose(f);
}

void write_pem(const fs::path& path, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
}

// The certificates, made once for the whole suite.
class TlsFiles {
 public:
  TlsFiles() {
    dir = fs::temp_directory_path() / ("pgsluice-tls-test-" + std::to_string(getpid()));
    fs::create_directories(dir);
    EVP_PKEY* ca_key = make_key();
    X509* ca = make_cert("test CA", ca_key, nullptr, ca_key, true, nullptr);
    EVP_PKEY* other_key = make_key();
    X509* other = make_cert("other CA", other_key, nullptr, other_key, true, nullptr);
    EVP_PKEY* server_key = make_key();
    X509* server =
        make_cert("localhost", server_key, ca, ca_key, false, "IP:127.0.0.1,DNS:localhost");
    EVP_PKEY* client_key = make_key();
    X509* client = make_cert("app", client_key, ca, ca_key, false, nullptr);
    EVP_PKEY* intruder_key = make_key();
    X509* intruder = make_cert("app", intruder_key, other, other_key, false, nullptr);
    write_pem(dir / "ca.crt", ca);
    write_pem(dir / "other-ca.crt", other);
    write_pem(dir / "server.crt", server);
    write_pem(dir / "server.key", server_key);
    write_pem(dir / "client.crt", client);
    write_pem(dir / "client.key", client_key);
    write_pem(dir / "intruder.crt", intruder);
    write_pem(dir / "intruder.key", intruder_key);
    for (X509* c : {ca, other, server, client, intruder}) X509_free(c);
    for (EVP_PKEY* k : {ca_key, other_key, server_key, client_key, intruder_key}) {
      EVP_PKEY_free(k);
    }
  }
  ~TlsFiles() { fs::remove_all(dir); }
  [[nodiscard]] std::string path(const char* name) const { return (dir / name).string(); }

  fs::path dir;
};

const TlsFiles& files() {
  static TlsFiles f;
  return f;
}

TlsSettings server_side(SslMode mode = SslMode::require) {
  TlsSettings s;
  s.sslmode = mode;
  s.cert_file = files().path("server.crt");
  s.key_file = files().path("server.key");
  return s;
}

std::shared_ptr<const TlsContext> context(TlsContext::Role role, const TlsSettings& s) {
  std::string error;
  auto ctx = TlsContext::create(role, s, error);
  EXPECT_NE(ctx, nullptr) << error;
  return ctx;
}

// Moves ciphertext both ways until neither side has more to say; returns false on an error.
bool pump(TlsSession& a, TlsSession& b) {
  for (int round = 0; round < 20; ++round) {
    std::string ab;
    std::string ba;
    a.drain(ab);
    b.drain(ba);
    if (ab.empty() && ba.empty()) return true;
    if (!ab.empty()) b.feed(ab.data(), ab.size());
    if (!ba.empty()) a.feed(ba.data(), ba.size());
    if (!a.handshake_done() && a.handshake() == TlsSession::Status::error) return false;
    if (!b.handshake_done() && b.handshake() == TlsSession::Status::error) return false;
  }
  return true;
}

std::string read_all(TlsSession& s) {
  std::string out;
  char buf[1000];
  size_t got = 0;
  while (s.read(buf, sizeof(buf), got) == TlsSession::Status::ok) out.append(buf, got);
  return out;
}

struct Pair {
  std::unique_ptr<TlsSession> server;  // pgsluice accepting a client
  std::unique_ptr<TlsSession> client;  // pgsluice connecting to PostgreSQL
  bool ok = false;
};

Pair handshake(const TlsSettings& accept, const TlsSettings& connect, std::string_view host) {
  Pair p;
  auto actx = context(TlsContext::Role::accept, accept);
  auto cctx = context(TlsContext::Role::connect, connect);
  if (actx == nullptr || cctx == nullptr) return p;
  p.server = actx->new_session();
  p.client = cctx->new_session(host);
  EXPECT_EQ(p.client->handshake(), TlsSession::Status::want_more);  // ClientHello is out
  EXPECT_EQ(p.server->handshake(), TlsSession::Status::want_more);  // nothing in yet
  p.ok = pump(*p.client, *p.server) && p.client->handshake_done() && p.server->handshake_done();
  return p;
}

TEST(TlsContextTest, DisabledSideHasNoContext) {
  std::string error;
  EXPECT_EQ(TlsContext::create(TlsContext::Role::accept, TlsSettings{}, error), nullptr);
  EXPECT_TRUE(error.empty());
}

TEST(TlsContextTest, ConfigurationErrorsNameTheKey) {
  std::string error;
  TlsSettings s;
  s.sslmode = SslMode::require;
  EXPECT_EQ(TlsContext::create(TlsContext::Role::accept, s, error), nullptr);
  EXPECT_NE(error.find("client_tls_key_file"), std::string::npos) << error;

  s = server_side();
  s.key_file = files().path("client.key");  // not the certificate's key
  EXPECT_EQ(TlsContext::create(TlsContext::Role::accept, s, error), nullptr);
  EXPECT_NE(error.find("client_tls_key_file"), std::string::npos) << error;
  EXPECT_NE(error.find("mismatch"), std::string::npos) << error;

  s = server_side();
  s.cert_file = files().path("missing.crt");
  EXPECT_EQ(TlsContext::create(TlsContext::Role::accept, s, error), nullptr);
  EXPECT_NE(error.find("client_tls_cert_file"), std::string::npos) << error;

  s = server_side();
  s.protocols = "tlsv9";
  EXPECT_EQ(TlsContext::create(TlsContext::Role::accept, s, error), nullptr);
  EXPECT_NE(error.find("client_tls_protocols"), std::string::npos) << error;

  s = server_side(SslMode::verify_ca);  // verifying clients needs a CA
  EXPECT_EQ(TlsContext::create(TlsContext::Role::accept, s, error), nullptr);
  EXPECT_NE(error.find("client_tls_ca_file"), std::string::npos) << error;
}

TEST(TlsContextTest, ServerSideWithNothingToCheckIsBuiltAtItsFirstSession) {
  // The default server_tls_sslmode = prefer: no SSL_CTX (2 MB of libcrypto mapped) until a
  // server accepts TLS.
  TlsSettings connect;
  connect.sslmode = SslMode::prefer;
  auto ctx = context(TlsContext::Role::connect, connect);
  ASSERT_NE(ctx, nullptr);
  EXPECT_FALSE(ctx->built());
  EXPECT_NE(ctx->new_session("127.0.0.1"), nullptr);
  EXPECT_TRUE(ctx->built());
  EXPECT_TRUE(ctx->build_error().empty());

  // What can be wrong is checked at once: a file, a cipher list of one's own, the protocols.
  std::string error;
  TlsSettings s = connect;
  s.ca_file = files().path("missing.crt");
  EXPECT_EQ(TlsContext::create(TlsContext::Role::connect, s, error), nullptr);
  EXPECT_NE(error.find("server_tls_ca_file"), std::string::npos) << error;
  s = connect;
  s.ciphers = "NO-SUCH-CIPHER";
  EXPECT_EQ(TlsContext::create(TlsContext::Role::connect, s, error), nullptr);
  EXPECT_NE(error.find("server_tls_ciphers"), std::string::npos) << error;
  s = connect;
  s.protocols = "tlsv9";
  EXPECT_EQ(TlsContext::create(TlsContext::Role::connect, s, error), nullptr);
  EXPECT_NE(error.find("server_tls_protocols"), std::string::npos) << error;
  s = connect;
  s.ca_file = files().path("ca.crt");
  auto checked = TlsContext::create(TlsContext::Role::connect, s, error);
  ASSERT_NE(checked, nullptr) << error;
  EXPECT_TRUE(checked->built());
}

TEST(TlsSessionTest, HandshakeAndDataBothWays) {
  TlsSettings connect;
  connect.sslmode = SslMode::require;
  Pair p = handshake(server_side(), connect, "127.0.0.1");
  ASSERT_TRUE(p.ok) << p.client->error() << " / " << p.server->error();
  EXPECT_NE(p.client->describe().find("TLSv1.3"), std::string::npos) << p.client->describe();

  // A message larger than one TLS record (16 KB) and a small one, in each direction.
  std::string big(100'000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  ASSERT_EQ(p.client->write(big), TlsSession::Status::ok);
  ASSERT_EQ(p.client->write("Q"), TlsSession::Status::ok);
  ASSERT_TRUE(pump(*p.client, *p.server));
  EXPECT_EQ(read_all(*p.server), big + "Q");
  ASSERT_EQ(p.server->write("reply"), TlsSession::Status::ok);
  ASSERT_TRUE(pump(*p.client, *p.server));
  EXPECT_EQ(read_all(*p.client), "reply");

  // Ciphertext fed one byte at a time decrypts the same.
  ASSERT_EQ(p.server->write("byte by byte"), TlsSession::Status::ok);
  std::string cipher;
  p.server->drain(cipher);
  EXPECT_EQ(cipher.find("byte by byte"), std::string::npos);  // it is encrypted
  std::string got;
  for (char c : cipher) {
    p.client->feed(&c, 1);
    got += read_all(*p.client);
  }
  EXPECT_EQ(got, "byte by byte");

  // close_notify reads as closed on the other side.
  p.client->shutdown();
  ASSERT_TRUE(pump(*p.client, *p.server));
  char buf[10];
  size_t n = 0;
  EXPECT_EQ(p.server->read(buf, sizeof(buf), n), TlsSession::Status::closed);
}

TEST(TlsSessionTest, VerifyFullChecksCaAndName) {
  TlsSettings connect;
  connect.sslmode = SslMode::verify_full;
  connect.ca_file = files().path("ca.crt");
  EXPECT_TRUE(handshake(server_side(), connect, "127.0.0.1").ok);
  EXPECT_TRUE(handshake(server_side(), connect, "localhost").ok);

  // A name the certificate does not have.
  Pair wrong_name = handshake(server_side(), connect, "db.example.com");
  EXPECT_FALSE(wrong_name.ok);
  EXPECT_NE(wrong_name.client->error().find("certificate verify failed"), std::string::npos)
      << wrong_name.client->error();

  // verify-ca does not check the name.
  connect.sslmode = SslMode::verify_ca;
  EXPECT_TRUE(handshake(server_side(), connect, "db.example.com").ok);

  // Another CA: refused under verify-ca and verify-full, accepted under require.
  connect.ca_file = files().path("other-ca.crt");
  Pair wrong_ca = handshake(server_side(), connect, "127.0.0.1");
  EXPECT_FALSE(wrong_ca.ok);
  EXPECT_NE(wrong_ca.client->error().find("unable to get local issuer certificate"),
            std::string::npos)
      << wrong_ca.client->error();
  connect.sslmode = SslMode::require;
  EXPECT_TRUE(handshake(server_side(), connect, "127.0.0.1").ok);
}

TEST(TlsSessionTest, ClientCertificates) {
  TlsSettings accept = server_side(SslMode::verify_ca);
  accept.ca_file = files().path("ca.crt");
  TlsSettings connect;
  connect.sslmode = SslMode::require;

  // Without a certificate: refused under verify-ca (the server side sees it at once; TLS 1.3
  // clients learn of it with the alert).
  Pair none = handshake(accept, connect, "127.0.0.1");
  EXPECT_FALSE(none.server->handshake_done());
  EXPECT_NE(none.server->error().find("certificate"), std::string::npos) << none.server->error();

  connect.cert_file = files().path("client.crt");
  connect.key_file = files().path("client.key");
  Pair good = handshake(accept, connect, "127.0.0.1");
  ASSERT_TRUE(good.ok) << good.server->error();
  EXPECT_EQ(good.server->peer_common_name(), "app");

  // Signed by another CA: refused.
  connect.cert_file = files().path("intruder.crt");
  connect.key_file = files().path("intruder.key");
  Pair intruder = handshake(accept, connect, "127.0.0.1");
  EXPECT_FALSE(intruder.server->handshake_done());
  EXPECT_EQ(intruder.server->peer_common_name(), "");
}

TEST(TlsSessionTest, ChannelBindingDataIsTheSameOnBothSides) {
  TlsSettings connect;
  connect.sslmode = SslMode::require;
  Pair p = handshake(server_side(), connect, "127.0.0.1");
  ASSERT_TRUE(p.ok);
  std::string ours = p.server->server_end_point();
  EXPECT_EQ(ours.size(), 32u);  // ecdsa-with-SHA256: a SHA-256 hash
  EXPECT_EQ(p.client->server_end_point(), ours);

  // SCRAM-SHA-256-PLUS between the two ends, and a relay with another certificate refused.
  pp::ScramVerifier verifier = pp::make_scram_verifier("secret", "saltsaltsalt", 4096);
  auto exchange = [&](const std::string& client_data, const std::string& server_data) {
    pp::ScramServer server(verifier);
    server.set_channel_binding(true, server_data);
    pp::ScramClient client = pp::ScramClient::with_password("secret");
    client.set_channel_binding(client_data);
    std::string server_first;
    std::string client_final;
    std::string server_final;
    if (server.handle_client_first(client.client_first(), server_first) != pp::ScramStatus::ok) {
      return pp::ScramStatus::malformed;
    }
    if (client.handle_server_first(server_first, client_final) != pp::ScramStatus::ok) {
      return pp::ScramStatus::malformed;
    }
    pp::ScramStatus s = server.handle_client_final(client_final, server_final);
    if (s != pp::ScramStatus::ok) return s;
    return client.handle_server_final(server_final);
  };
  EXPECT_EQ(exchange(ours, ours), pp::ScramStatus::ok);
  EXPECT_EQ(exchange(std::string(32, 'x'), ours), pp::ScramStatus::malformed);

  // The server offered -PLUS: a client saying "y" (it could bind) was downgraded on the way.
  pp::ScramServer server(verifier);
  server.set_channel_binding(true, {});
  std::string server_first;
  EXPECT_EQ(server.handle_client_first("y,,n=,r=abcdef", server_first), pp::ScramStatus::malformed);
  // Without -PLUS offered, "y" is fine.
  pp::ScramServer plain(verifier);
  EXPECT_EQ(plain.handle_client_first("y,,n=,r=abcdef", server_first), pp::ScramStatus::ok);
}

}  // namespace
}  // namespace pgsluice
