// What a client's messages may cost in memory: one too large for its phase is refused at its
// header (PostgreSQL's caps before login, max_packet_size after), a large statement after login
// streams to the server as it arrives when its start shows nothing the pooler must follow, and a
// late COPY message is dropped as it arrives.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/deallocate.h"
#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/sql_lexer.h"
#include "pooler/core/client.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"
#include "pooler/net/forwarder.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

namespace {
// The SQL of a Query or Parse body (its start, when only that has arrived).
std::string_view statement_start(char type, std::string_view body) {
  if (type == fe::kParse) {
    const size_t name_end = body.find('\0');
    return name_end == std::string_view::npos ? std::string_view() : body.substr(name_end + 1);
  }
  return body;
}
}  // namespace

void Client::refuse_oversized_login_message() {
  const pp::HeaderResult header = channel_.input().peek();
  worker_.refusals().oversized_login_messages.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("{} sent a {} byte message before login (at most {}): refused", who_.log_id,
               header.header.length, channel_.input().max_length());
  protocol_violation(fmt::format("invalid message length {} during authentication (at most {})",
                                 header.header.length, channel_.input().max_length()));
}

void Client::refuse_oversized_message(const pp::MessageHeader& header) {
  worker_.refusals().oversized_messages.fetch_add(1, std::memory_order_relaxed);
  protocol_violation(fmt::format("message too long: {} bytes (max_packet_size = {})", header.length,
                                 channel_.input().max_length()));
}

bool Client::drop_late_copy_messages_now() {
  pp::FrameReader& in = channel_.input();
  while (true) {
    if (late_copy_remaining_ > 0) {
      const size_t n = std::min(late_copy_remaining_, in.unread_size());
      in.skip(n);
      late_copy_remaining_ -= n;
      if (late_copy_remaining_ > 0) return false;
    }
    const pp::HeaderResult header = in.peek();
    if (header.status != pp::FrameStatus::complete) return true;
    const char type = header.header.type;
    if (type != fe::kCopyData && type != fe::kCopyDone && type != fe::kCopyFail) return true;
    if (type != fe::kCopyData) {  // PgBouncer's words
      spdlog::debug("{} discarding late {}, server not linked", who_.log_id,
                    type == fe::kCopyDone ? "CopyDone" : "CopyFail");
    }
    // Skipped as it arrives: a late CopyData may be as large as max_packet_size.
    late_copy_remaining_ = header.header.wire_size();
  }
}

bool Client::may_stream(char type) {
  // After an error the messages up to Sync are dropped, not forwarded.
  if (discard_until_sync_) return false;
  switch (type) {
    case fe::kCopyData:
      return true;
    case fe::kBind:
      // Rewritten (its statement's name), or perhaps answered here (a refused statement's):
      // whole.
      return !server_->rewrites_statements() && prepared_.refused.empty();
    case fe::kParse:
      if (server_->rewrites_statements() || !prepared_.refused.empty()) return false;
      break;
    case fe::kQuery:
      break;
    default:
      return false;
  }
  // A statement streams once its first kPassthroughThreshold bytes are here, if they decide
  // what the pooler must know of it: the session-state prefilter finds nothing there (what lies
  // beyond is not checked: session_state_verify's samples still see state it left), and under
  // statement rewriting it is no DEALLOCATE or DISCARD (which the pooler must follow). Otherwise
  // it waits whole, bounded by max_packet_size, as every message did before.
  const pp::FrameReader& in = channel_.input();
  if (in.unread_size() < kPassthroughThreshold) return false;
  const std::string_view body = in.unread().substr(5, kPassthroughThreshold - 5);
  const std::string_view sql = statement_start(type, body);
  if (sql.empty()) return false;
  if (type == fe::kQuery && server_->rewrites_statements() &&
      pp::starts_like_deallocate_command(sql)) {
    return false;
  }
  return !(session_checks_ && pp::may_change_session_state(sql));
}

}  // namespace pgsluice
