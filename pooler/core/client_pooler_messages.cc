// What the pooler itself says to a client, outside any server's reply: its errors (a FATAL one
// closes the client) and refusals of what it sent, and, in PgBouncer's words, the refusal of the
// simple Query protocol under disable_pqexec and the notice to a client queued longer than
// query_wait_notify.
#include <spdlog/spdlog.h>

#include <utility>

#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

void Client::send_error(std::string_view severity, std::string_view code, std::string_view message,
                        std::string_view hint) {
  pp::ErrorNotice error{
      .severity = severity, .code = code, .message = message, .detail = {}, .hint = hint};
  pp::write_error_response(channel_.output(), error);
}

void Client::fail(std::string_view code, std::string_view message, std::string_view log_reason) {
  if (state_ == State::closing) return;
  // PgBouncer's words for log_pooler_errors.
  if (worker_.settings().log_pooler_errors)
    spdlog::warn("{} pooler error: {}", who_.log_id, message);
  send_error("FATAL", code, message);
  close_logged(log_reason.empty() ? message : log_reason, /*log=*/true);
}

void Client::protocol_violation(std::string_view message) {
  fail(sqlstate::kProtocolViolation, message);
}

void Client::refuse_type(char type) {
  if (type == fe::kQuery) {
    // disable_pqexec, in PgBouncer's two lines: what the client did, then why it is closed.
    spdlog::error("{} client used \"Query\" packet type", who_.log_id);
    protocol_violation("PQexec disallowed");
    return;
  }
  protocol_violation(fmt::format("invalid frontend message type {}", static_cast<int>(type)));
}

bool Client::refused_simple_query(char type) {
  if (type != fe::kQuery || !worker_.disable_pqexec()) return false;
  refuse_type(type);
  return true;
}

void Client::refuse_bad_header(const pp::HeaderResult& header) {
  if (header.error == pp::ParseError::too_long) {
    refuse_oversized_message(header.header);
    return;
  }
  protocol_violation(fmt::format("invalid message: {}", pp::to_string(header.error)));
}

void Client::refuse_held_request(std::string error_response) {
  server_ = nullptr;
  held_.for_read_back = false;
  held_.error = std::move(error_response);
  held_.error_sent = false;
  held_.answering = true;
  if (state_ == State::closing) return;
  set_state(State::idle);
  channel_.start_reading();
  process_regular_input();
}

void Client::end_with_startup_error(std::string fatal_response) {
  server_ = nullptr;
  held_.for_read_back = false;
  if (state_ == State::closing) return;
  channel_.output().append(fatal_response);
  close("a startup parameter no server takes");
}

Client::NextOwn Client::take_message_to_answer(pp::Message& message) {
  pp::FrameReader& in = channel_.input();
  pp::HeaderResult header = in.peek();
  if (header.status == pp::FrameStatus::need_more) return NextOwn::wait;
  if (header.status == pp::FrameStatus::error) {
    refuse_bad_header(header);
    return NextOwn::refused;
  }
  if (header.header.type == fe::kTerminate) return NextOwn::terminate;
  if (header.header.wire_size() > in.unread_size()) return NextOwn::wait;  // max_packet_size
  message = in.take(header.header);
  return NextOwn::taken;
}

bool Client::answer_held_request() {
  while (!held_.error.empty()) {
    pp::Message message;
    const NextOwn next = take_message_to_answer(message);
    if (next == NextOwn::wait) break;
    if (next != NextOwn::taken) return next == NextOwn::terminate;  // closed as usual, or now
    const char type = message.type;
    // As PostgreSQL answers a request whose first message fails: the error, then everything
    // up to the Sync skipped (a Query after an extended-protocol error is skipped too).
    const bool first = !std::exchange(held_.error_sent, true);
    if (first) channel_.output().append(held_.error);
    if (type == fe::kSync || (first && (type == fe::kQuery || type == fe::kFunctionCall))) {
      pp::write_ready_for_query(channel_.output(), pp::TransactionStatus::idle);
      held_.error.clear();
      held_.error_sent = false;
      held_.answering = false;
    }
  }
  channel_.flush();
  return held_.error.empty() && state_ != State::closing;
}

void Client::notify_queued() {
  wait.notice_sent = true;
  pp::write_notice_response(
      channel_.output(),
      {.severity = "NOTICE",
       .code = sqlstate::kSuccessfulCompletion,
       .message = "No server connection available in postgres backend, client being queued"});
  channel_.flush();
}

}  // namespace pgsluice
