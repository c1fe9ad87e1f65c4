// The pooler's own query on a server no client is linked to (auth_query lookups, auth_query.h):
// one extended-protocol exchange whose replies go to a sink instead of a client. The server is
// `resetting` meanwhile (off the idle list), and idle again after the ReadyForQuery.
#pragma once

#include <string_view>

#include "pgsluice/protocol/backend.h"

namespace pgsluice {

class ServerQuerySink {
 public:
  virtual void on_query_row(const protocol::DataRow& row) = 0;
  virtual void on_query_error(std::string_view sqlstate, std::string_view message) = 0;
  // The ReadyForQuery: every reply was delivered.
  virtual void on_query_done() = 0;
  // The server closed before the ReadyForQuery.
  virtual void on_query_lost(std::string_view reason) = 0;

 protected:
  ~ServerQuerySink() = default;
};

}  // namespace pgsluice
