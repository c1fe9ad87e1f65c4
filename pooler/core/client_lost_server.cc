// A client that keeps its connection when its server's is lost; see client_lost_server.h.
#include <spdlog/spdlog.h>

#include <string>
#include <string_view>
#include <utility>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/sql_lexer.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

namespace {

// ROLLBACK, ABORT, COMMIT or END, with WORK or TRANSACTION and AND NO CHAIN, and semicolons,
// blanks and comments around (the SQL tokenizer's): what PostgreSQL accepts in a failed
// transaction to end it (IsTransactionExitStmt), as far as the pooler needs to know without a
// server. ROLLBACK TO SAVEPOINT is not among them here: the savepoint went with the server.
enum class BlockEnd { none, rollback, commit };

BlockEnd block_end(std::string_view sql) {
  pp::SqlTokenizer tokenizer(sql);
  pp::SqlToken token;
  const auto next_word = [&]() -> std::string_view {
    while (tokenizer.next(token)) {
      if (token.kind == pp::SqlTokenKind::punct && token.text == ";") continue;
      return token.kind == pp::SqlTokenKind::word ? token.text : std::string_view("?");
    }
    return {};
  };
  std::string_view word = next_word();
  BlockEnd end = BlockEnd::none;
  if (pp::iequals_keyword(word, "rollback") || pp::iequals_keyword(word, "abort")) {
    end = BlockEnd::rollback;
  } else if (pp::iequals_keyword(word, "commit") || pp::iequals_keyword(word, "end")) {
    end = BlockEnd::commit;
  } else {
    return BlockEnd::none;
  }
  word = next_word();
  if (pp::iequals_keyword(word, "work") || pp::iequals_keyword(word, "transaction")) {
    word = next_word();
  }
  if (pp::iequals_keyword(word, "and")) {
    if (!pp::iequals_keyword(next_word(), "no") || !pp::iequals_keyword(next_word(), "chain")) {
      return BlockEnd::none;
    }
    word = next_word();
  }
  return word.empty() ? end : BlockEnd::none;
}

// Whether `sql` ends the failed block here. A client that has not heard of the loss yet may
// roll back (what it asks is what happened: the block is over, nothing of it committed), not
// commit: its COMMIT gets the error of the loss, as it would have from PostgreSQL.
bool ends_lost_block(std::string_view sql, bool untold) {
  const BlockEnd end = block_end(sql);
  return end == BlockEnd::rollback || (end == BlockEnd::commit && !untold);
}

}  // namespace

void Client::keep_after_server_loss(const ServerLoss& loss) {
  server_ = nullptr;
  if (state_ == State::closing) return;
  held_.for_read_back = false;
  lost_ = {};
  pp::write_error_response(lost_.error,
                           {.severity = "ERROR", .code = loss.code, .message = loss.message});
  std::string& out = channel_.output();
  const auto status = loss.in_block ? pp::TransactionStatus::failed : pp::TransactionStatus::idle;
  // Each request in flight ends as PostgreSQL ends a failed one: the error, then its
  // ReadyForQuery.
  for (uint32_t i = 0; i < loss.owed; ++i) {
    out.append(lost_.error);
    pp::write_ready_for_query(out, status);
  }
  if (loss.batch_open) {
    // Messages sent without their Sync yet: the error now, the rest skipped up to the Sync.
    out.append(lost_.error);
    lost_.skipping = true;
  }
  lost_.in_block = loss.in_block;
  // Idle in its transaction block, the client has no request to fail: its next one learns it.
  lost_.untold = loss.in_block && loss.owed == 0 && !loss.batch_open;
  lost_.active = lost_.in_block || lost_.skipping;
  spdlog::info("{} server connection lost ({}: {}): the client keeps its connection{}", who_.log_id,
               loss.code, loss.message,
               loss.in_block ? ", in a failed transaction until it ends it" : "");
  set_state(State::idle);
  channel_.flush();
  if (state_ == State::closing) return;
  channel_.start_reading();
  process_regular_input();
}

bool Client::answer_after_server_loss() {
  while (lost_.active && state_ != State::closing) {
    pp::Message message;
    const NextOwn next = take_message_to_answer(message);
    if (next == NextOwn::wait) break;
    if (next != NextOwn::taken) return next == NextOwn::terminate;  // closed as usual, or now
    answer_lost_message(message.type, message.body);
  }
  channel_.flush();
  return !lost_.active && state_ != State::closing;
}

void Client::end_lost_block() {
  // PostgreSQL answers ROLLBACK (to COMMIT too) in a failed transaction.
  pp::write_command_complete(channel_.output(), "ROLLBACK");
  lost_.ended = true;
  lost_.untold = false;
}

void Client::answer_lost_message(char type, std::string_view body) {
  std::string& out = channel_.output();
  const auto failed = [&] {
    // The loss itself, if the client has not heard of it; else PostgreSQL's answer to anything
    // but the block's end in a failed transaction.
    if (std::exchange(lost_.untold, false)) {
      out.append(lost_.error);
    } else {
      send_error("ERROR", sqlstate::kInFailedSqlTransaction,
                 "current transaction is aborted, commands ignored until end of transaction "
                 "block");
    }
  };
  const auto ready = [&] {
    const bool over = lost_.ended || !lost_.in_block;
    pp::write_ready_for_query(out,
                              over ? pp::TransactionStatus::idle : pp::TransactionStatus::failed);
    lost_.skipping = false;
    lost_.exit_statement = lost_.exit_portal = false;
    if (over) lost_ = {};
  };
  if (type == fe::kSync) {
    ready();
    return;
  }
  if (lost_.skipping) return;  // after an error, up to the Sync, as PostgreSQL skips
  const bool untold = lost_.untold;
  switch (type) {
    case fe::kQuery: {
      auto query = pp::parse_query(body);
      if (query && ends_lost_block(query.value.sql, untold)) {
        end_lost_block();
      } else {
        failed();
      }
      ready();
      return;
    }
    case fe::kParse: {
      auto parse = pp::parse_parse(body);
      if (parse && parse.value.statement.empty() && ends_lost_block(parse.value.query, untold)) {
        lost_.exit_statement = true;
        pp::write_parse_complete(out);
        return;
      }
      break;
    }
    case fe::kBind: {
      auto bind = pp::parse_bind(body);
      if (bind && lost_.exit_statement && bind.value.statement.empty() &&
          bind.value.portal.empty()) {
        lost_.exit_portal = true;
        pp::write_bind_complete(out);
        return;
      }
      break;
    }
    case fe::kDescribe: {
      auto describe = pp::parse_describe(body);
      if (describe && describe.value.name.empty() &&
          (describe.value.target() == pp::DescribeTarget::portal ? lost_.exit_portal
                                                                 : lost_.exit_statement)) {
        if (describe.value.target() == pp::DescribeTarget::statement) {
          pp::MessageWriter(out, pp::backend::kParameterDescription).i16(0).end();  // none
        }
        pp::write_no_data(out);
        return;
      }
      break;
    }
    case fe::kExecute: {
      auto execute = pp::parse_execute(body);
      if (execute && execute.value.portal.empty() && lost_.exit_portal) {
        end_lost_block();
        return;
      }
      break;
    }
    case fe::kClose:
      pp::write_close_complete(out);
      return;
    case fe::kFlush:
    case fe::kCopyData:
    case fe::kCopyDone:
    case fe::kCopyFail:
      return;  // nothing to flush; COPY data outside a COPY is dropped, as PostgreSQL does
    default:
      break;
  }
  // Anything else in a failed transaction: PostgreSQL's 25P02 (or the loss, untold), and the
  // rest of the batch skipped. A FunctionCall is a request of its own.
  failed();
  lost_.skipping = true;
  if (type == fe::kFunctionCall) ready();
}

}  // namespace pgsluice
