// Whether a statement is DDL that may change what a function name resolves to, or its body: the
// session-state guard drops its function verdicts on it (pooler/session_state/function_verdicts.h).
// A check of the statement's text, run on every Query and Parse the guard sees.
#pragma once

#include <string_view>

namespace pgsluice::protocol {

// Whether `sql` starts with CREATE, ALTER or DROP and names a function, procedure, schema,
// extension or language: what may change what a function name resolves to or its body. Cheap
// for anything else (the first keyword decides).
bool function_ddl(std::string_view sql);

}  // namespace pgsluice::protocol
