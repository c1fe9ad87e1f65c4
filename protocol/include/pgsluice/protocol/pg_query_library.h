// Whether libpg_query, which the session-state classifier loads on its first parse rather than at
// startup (protocol/src/pg_query_library.cc says why), can be loaded.
#pragma once

#include <string>

namespace pgsluice::protocol {

// Loads the library and unloads it again: main calls this at startup so that a missing or broken
// libpg_query stops pgsluice there, as it did when the library was linked, and not at the first
// statement that needs the parser. False with `error` set (dlerror's text) when it cannot load.
bool pg_query_library_loadable(std::string& error);

}  // namespace pgsluice::protocol
