// Client authentication by auth_type; see client_auth.h.
#include "pooler/auth/client_auth.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/md5.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/secure_random.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {
constexpr std::string_view kScramMechanism = "SCRAM-SHA-256";
constexpr std::string_view kScramPlusMechanism = "SCRAM-SHA-256-PLUS";

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  if (!secure_random(out.data(), n)) {
    // Only SCRAM salts and the doomed verifier come from here: a zero salt weakens nothing that
    // an attacker could replay (the server nonce of the exchange is random or fatal).
    out.assign(n, '\0');
  }
  return out;
}

// A verifier nobody knows the password of, for users without a secret: the exchange runs to the
// end and fails like a wrong password. Its iteration count is the one of the verifiers made for
// known users, as in PgBouncer: the count must not tell an unknown user apart.
pp::ScramVerifier doomed_verifier(int iterations) {
  pp::ScramVerifier v;
  v.iterations = iterations;
  v.salt = random_bytes(16);
  std::string k = random_bytes(64);
  std::copy(k.begin(), k.begin() + 32, v.stored_key.begin());
  std::copy(k.begin() + 32, k.end(), v.server_key.begin());
  return v;
}
}  // namespace

ClientAuth::ClientAuth(AuthType type, std::string user, std::optional<std::string> secret,
                       const pp::ScramVerifier* plain_verifier)
    : user_(std::move(user)), secret_(std::move(secret)), plain_verifier_(plain_verifier) {
  switch (type) {
    case AuthType::trust:
      method_ = Method::trust;
      break;
    case AuthType::plain:
      method_ = Method::cleartext;
      break;
    case AuthType::md5:
      // As PgBouncer does: a user whose secret is a SCRAM verifier can only prove it by SCRAM.
      method_ = secret_ && pp::is_scram_verifier(*secret_) ? Method::scram : Method::md5;
      break;
    case AuthType::scram_sha_256:
      method_ = Method::scram;
      break;
    case AuthType::cert:
    case AuthType::hba:
      // Decided before any ClientAuth (by the client's TLS certificate, by the hba rule's
      // method); should one be made anyway, it asks for a password nobody has.
      method_ = Method::cleartext;
      secret_.reset();
      break;
  }
}

ClientAuth::Result ClientAuth::fail(std::string reason) {
  failure_reason_ = std::move(reason);
  step_ = Step::done;
  return Result::failed;
}

ClientAuth::Result ClientAuth::start(std::string& out) {
  switch (method_) {
    case Method::trust:
      step_ = Step::done;
      return Result::ok;
    case Method::cleartext:
      pp::write_authentication_cleartext_password(out);
      break;
    case Method::md5: {
      // A predictable salt would let a captured MD5 response be replayed: no salt, no login.
      if (!secure_random(md5_salt_.data(), md5_salt_.size())) {
        return fail("could not generate a random MD5 salt");
      }
      pp::write_authentication_md5_password(out, md5_salt_);
      break;
    }
    case Method::scram: {
      pp::ScramVerifier verifier;
      if (secret_ && pp::is_scram_verifier(*secret_)) {
        auto parsed = pp::parse_scram_verifier(*secret_);
        if (parsed && parsed->iterations > max_iterations_) {
          return fail(too_many_iterations(parsed->iterations));
        }
        verifier = parsed ? *parsed : doomed_verifier(iterations_);
        scram_from_verifier_ = parsed.has_value();
      } else if (secret_ && !pp::is_md5_password_hash(*secret_)) {
        verifier = plain_verifier_ != nullptr
                       ? *plain_verifier_
                       : pp::make_scram_verifier(*secret_, random_bytes(16), iterations_);
      } else {
        verifier = doomed_verifier(iterations_);
      }
      scram_.emplace(std::move(verifier));
      // As PostgreSQL: -PLUS first, and only where there is a channel to bind to.
      if (channel_binding_.empty()) {
        const std::string_view mechanisms[] = {kScramMechanism};
        pp::write_authentication_sasl(out, mechanisms);
      } else {
        const std::string_view mechanisms[] = {kScramPlusMechanism, kScramMechanism};
        pp::write_authentication_sasl(out, mechanisms);
      }
      break;
    }
  }
  step_ = Step::sent_request;
  return Result::need_response;
}

ClientAuth::Result ClientAuth::check_cleartext(std::string_view password) {
  if (!secret_) return fail("no such user (auth_file, auth_query) or no password");
  const std::string& s = *secret_;
  bool ok = false;
  if (pp::is_scram_verifier(s)) {
    auto v = pp::parse_scram_verifier(s);
    if (v && v->iterations > max_iterations_) return fail(too_many_iterations(v->iterations));
    if (v) {
      auto derived = pp::make_scram_verifier(password, v->salt, v->iterations);
      ok = pp::constant_time_equal(
          std::string_view(reinterpret_cast<const char*>(derived.stored_key.data()), 32),
          std::string_view(reinterpret_cast<const char*>(v->stored_key.data()), 32));
    }
  } else if (pp::is_md5_password_hash(s)) {
    ok = pp::constant_time_equal(pp::md5_password_hash(password, user_), s);
  } else {
    ok = pp::constant_time_equal(password, s);
  }
  if (!ok) return fail("password does not match");
  step_ = Step::done;
  return Result::ok;
}

std::string ClientAuth::too_many_iterations(int iterations) const {
  return fmt::format(
      "the SCRAM verifier's iteration count {} is above {} (scram_max_iterations): "
      "not used",
      iterations, max_iterations_);
}

ClientAuth::Result ClientAuth::malformed(std::string reason) {
  failure_reason_ = std::move(reason);
  step_ = Step::done;
  return Result::protocol_violation;
}

ClientAuth::Result ClientAuth::on_response(std::string_view body, std::string& out) {
  if (step_ == Step::initial || step_ == Step::done) return Result::protocol_violation;
  switch (method_) {
    case Method::trust:
      return Result::protocol_violation;
    case Method::cleartext: {
      auto msg = pp::parse_password_message(body);
      if (!msg) return Result::protocol_violation;
      return check_cleartext(msg.value.password);
    }
    case Method::md5: {
      auto msg = pp::parse_password_message(body);
      if (!msg) return Result::protocol_violation;
      if (!secret_) return fail("no such user (auth_file, auth_query) or no password");
      if (!pp::md5_verify_response(*secret_, user_, md5_salt_, msg.value.password)) {
        return fail("password does not match");
      }
      step_ = Step::done;
      return Result::ok;
    }
    case Method::scram: {
      if (step_ == Step::sent_request) {
        auto msg = pp::parse_sasl_initial_response(body);
        if (!msg || !msg.value.data) return Result::protocol_violation;
        if (msg.value.mechanism == kScramPlusMechanism && !channel_binding_.empty()) {
          scram_->set_channel_binding(true, channel_binding_);
        } else if (msg.value.mechanism == kScramMechanism) {
          scram_->set_channel_binding(!channel_binding_.empty(), {});
        } else {
          return fail("unsupported SASL mechanism");
        }
        std::string server_first;
        auto status = scram_->handle_client_first(*msg.value.data, server_first);
        if (status == pp::ScramStatus::malformed) {
          return malformed("malformed SCRAM client-first-message (or a channel binding mismatch)");
        }
        if (status != pp::ScramStatus::ok) return fail("unsupported SCRAM client-first-message");
        pp::write_authentication_sasl_continue(out, server_first);
        step_ = Step::sasl_continue;
        return Result::need_response;
      }
      auto msg = pp::parse_sasl_response(body);
      if (!msg) return Result::protocol_violation;
      std::string server_final;
      auto status = scram_->handle_client_final(msg.value.data, server_final);
      // Malformed whatever the user (the message alone decides): no hint whether it exists.
      if (status == pp::ScramStatus::malformed) {
        return malformed("malformed SCRAM client-final-message");
      }
      if (status != pp::ScramStatus::ok) {
        if (!secret_) return fail("no such user (auth_file, auth_query) or no password");
        if (pp::is_md5_password_hash(*secret_)) {
          return fail("auth_file holds an MD5 hash, which cannot verify SCRAM");
        }
        return fail(status == pp::ScramStatus::wrong_proof
                        ? "password does not match"
                        : "malformed SCRAM client-final-message");
      }
      pp::write_authentication_sasl_final(out, server_final);
      if (scram_from_verifier_) {
        proven_client_key_ = scram_->client_key();
        proven_server_key_ = scram_->verifier().server_key;
      }
      step_ = Step::done;
      return Result::ok;
    }
  }
  return Result::protocol_violation;
}

}  // namespace pgsluice
