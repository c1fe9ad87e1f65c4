// The SQL that ends protocol-level prepared statements, recognised without a parser: PHP's PDO and
// psycopg send DEALLOCATE [PREPARE] name | ALL and DISCARD ALL as plain statements, and a pooler
// that renames statements per server must answer or follow them.
#pragma once

#include <string>
#include <string_view>

namespace pgsluice::protocol {

// What a SQL string does to a client's protocol-level statements, for the statements PHP's PDO
// and others send: DEALLOCATE [PREPARE] name | ALL, and DISCARD ALL.
struct DeallocateCommand {
  enum class Kind { none, deallocate_name, deallocate_all, discard_all };
  Kind kind = Kind::none;
  std::string name;
};
DeallocateCommand parse_deallocate_command(std::string_view sql);
// Whether `sql` (or a statement it is the start of) begins with DEALLOCATE or DISCARD: the
// first-word test of parse_deallocate_command, for a statement that has not fully arrived.
bool starts_like_deallocate_command(std::string_view sql);

}  // namespace pgsluice::protocol
