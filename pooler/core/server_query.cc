// Server::run_query and its replies; see server_query.h.
#include "pooler/core/server_query.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "pgsluice/protocol/message_types.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/server.h"

namespace pgsluice {

namespace be = pgsluice::protocol::backend;

bool Server::run_query(std::string_view messages, ServerQuerySink& sink) {
  if (state_ != State::idle || client_ != nullptr || query_sink_ != nullptr) return false;
  query_sink_ = &sink;
  internal_failed_ = false;
  set_state(State::resetting);
  channel_.output().append(messages);
  replies_.on_internal_query();  // the replies take the internal path (handle_internal_reply)
  channel_.flush();
  return true;
}

bool Server::deliver_query_reply(const protocol::Message& message) {
  switch (message.type) {
    case be::kDataRow: {
      auto row = protocol::parse_data_row(message.body);
      if (row) {
        query_sink_->on_query_row(row.value);
      } else {
        query_sink_->on_query_error(sqlstate::kProtocolViolation, "malformed DataRow");
      }
      return true;
    }
    case be::kErrorResponse: {
      // The query's own error (no permission on pg_authid, a bad auth_query): the sink's to
      // report; the server is fine and stays.
      auto error = protocol::parse_error_fields(message.body);
      query_sink_->on_query_error(
          error ? error.value.code : std::string_view(sqlstate::kInternalError),
          error ? error.value.message : std::string_view("malformed ErrorResponse"));
      return true;
    }
    case be::kParseComplete:
    case be::kBindComplete:
    case be::kNoData:
    case be::kRowDescription:
    case be::kCommandComplete:
    case be::kEmptyQueryResponse:
    case be::kPortalSuspended:
      return true;
    default:
      return false;  // ReadyForQuery, ParameterStatus, notices: as for any internal query
  }
}

void Server::finish_query() {
  ServerQuerySink* sink = std::exchange(query_sink_, nullptr);
  if (sink != nullptr) sink->on_query_done();
}

void Server::abandon_query(std::string_view reason) {
  ServerQuerySink* sink = std::exchange(query_sink_, nullptr);
  if (sink != nullptr) sink->on_query_lost(reason);
}

}  // namespace pgsluice
