// TLS over memory BIOs; see tls_session.h.
#include "pooler/net/tls_session.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <climits>

namespace pgsluice {

namespace {
// OpenSSL's error queue is per thread and outlives the call that filled it: clear it before each
// operation, so that an error reported for this connection is this connection's.
void clear_errors() {
  ERR_clear_error();
}

std::string error_queue_text() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    // "error:0A000086:SSL routines::certificate verify failed": keep the reason only.
    std::string_view text(buf);
    size_t colon = text.rfind(':');
    out += colon == std::string_view::npos ? text : text.substr(colon + 1);
  }
  return out;
}
}  // namespace

TlsSession::TlsSession(SSL* ssl) : ssl_(ssl) {
  rbio_ = BIO_new(BIO_s_mem());
  wbio_ = BIO_new(BIO_s_mem());
  // An empty input BIO means "no more yet", not end of file.
  BIO_set_mem_eof_return(rbio_, -1);
  BIO_set_mem_eof_return(wbio_, -1);
  SSL_set_bio(ssl_, rbio_, wbio_);
}

TlsSession::~TlsSession() {
  SSL_free(ssl_);
}

TlsSession::Status TlsSession::fail(int ret, std::string_view what) {
  int err = SSL_get_error(ssl_, ret);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return Status::want_more;
  if (err == SSL_ERROR_ZERO_RETURN) return Status::closed;
  std::string reason = error_queue_text();
  long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) {
    reason += reason.empty() ? "" : ": ";
    reason += X509_verify_cert_error_string(verify);
  }
  if (reason.empty()) reason = err == SSL_ERROR_SYSCALL ? "unexpected end of stream" : "error";
  error_ = std::string(what) + ": " + reason;
  return Status::error;
}

TlsSession::Status TlsSession::handshake() {
  if (handshake_done_) return Status::ok;
  clear_errors();
  int ret = SSL_do_handshake(ssl_);
  if (ret == 1) {
    handshake_done_ = true;
    return Status::ok;
  }
  Status s = fail(ret, "TLS handshake failed");
  // A close_notify during the handshake is a refusal too.
  if (s == Status::closed) {
    error_ = "TLS handshake failed: the peer closed the connection";
    return Status::error;
  }
  return s;
}

void TlsSession::feed(const char* data, size_t size) {
  // A memory BIO write only fails on allocation failure, which the next read reports.
  while (size > 0) {
    int chunk = static_cast<int>(size > INT_MAX ? INT_MAX : size);
    int n = BIO_write(rbio_, data, chunk);
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

TlsSession::Status TlsSession::read(char* buf, size_t capacity, size_t& got) {
  got = 0;
  clear_errors();
  size_t n = 0;
  int ret = SSL_read_ex(ssl_, buf, capacity, &n);
  if (ret == 1) {
    got = n;
    return Status::ok;
  }
  return fail(ret, "TLS read failed");
}

TlsSession::Status TlsSession::write(std::string_view plain) {
  while (!plain.empty()) {
    clear_errors();
    size_t n = 0;
    int ret = SSL_write_ex(ssl_, plain.data(), plain.size(), &n);
    if (ret != 1) {
      Status s = fail(ret, "TLS write failed");
      // With memory BIOs and renegotiation off, a write cannot wait for the peer: anything but
      // success means the session is unusable.
      return s == Status::closed ? Status::closed : Status::error;
    }
    plain.remove_prefix(n);
  }
  return Status::ok;
}

void TlsSession::shutdown() {
  clear_errors();
  if (handshake_done_) SSL_shutdown(ssl_);
  clear_errors();
}

size_t TlsSession::pending_output() const {
  return BIO_ctrl_pending(wbio_);
}

size_t TlsSession::drain(std::string& out) {
  size_t pending = BIO_ctrl_pending(wbio_);
  if (pending == 0) return 0;
  size_t old = out.size();
  out.resize(old + pending);
  size_t got = 0;
  if (BIO_read_ex(wbio_, out.data() + old, pending, &got) != 1) got = 0;
  out.resize(old + got);
  return got;
}

std::string TlsSession::describe() const {
  return std::string(SSL_get_version(ssl_)) + " " + SSL_get_cipher_name(ssl_);
}

std::string TlsSession::connection_info() const {
  std::string info = std::string(SSL_get_version(ssl_)) + "/" + SSL_get_cipher_name(ssl_);
  // The group's short object name, as libusual's TLS code names it ("X25519", "prime256v1").
  const int group = SSL_get_negotiated_group(ssl_);
  const char* group_name = group > 0 ? OBJ_nid2sn(group) : nullptr;
  if (group_name != nullptr) info += std::string("/ECDH=") + group_name;
  return info;
}

bool TlsSession::alpn_is_postgresql() const {
  const unsigned char* data = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_, &data, &length);
  return std::string_view(reinterpret_cast<const char*>(data), data != nullptr ? length : 0) ==
         "postgresql";
}

std::string TlsSession::peer_common_name() const {
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr || SSL_get_verify_result(ssl_) != X509_V_OK) return {};
  X509_NAME* subject = X509_get_subject_name(cert);
  int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index < 0) return {};
  // A second CN makes the name ambiguous: refuse it rather than pick one.
  if (X509_NAME_get_index_by_NID(subject, NID_commonName, index) >= 0) return {};
  ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index));
  unsigned char* utf8 = nullptr;
  int length = ASN1_STRING_to_UTF8(&utf8, data);
  if (length < 0) return {};
  std::string name(reinterpret_cast<char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  // An embedded NUL would let "admin\0.evil" pass as "admin".
  if (name.find('\0') != std::string::npos) return {};
  return name;
}

std::string TlsSession::server_end_point() const {
  X509* cert = SSL_is_server(ssl_) ? SSL_get_certificate(ssl_) : SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr) return {};
  int algo_nid = NID_undef;
  if (!OBJ_find_sigid_algs(X509_get_signature_nid(cert), &algo_nid, nullptr)) return {};
  const EVP_MD* md = nullptr;
  // RFC 5929 section 4.1: MD5 and SHA-1 are replaced by SHA-256.
  if (algo_nid == NID_md5 || algo_nid == NID_sha1) {
    md = EVP_sha256();
  } else {
    md = EVP_get_digestbynid(algo_nid);
  }
  if (md == nullptr) return {};
  unsigned char hash[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (X509_digest(cert, md, hash, &length) != 1) return {};
  return std::string(reinterpret_cast<char*>(hash), length);
}

}  // namespace pgsluice
