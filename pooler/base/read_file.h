// Reading a whole configuration-like file (pgsluice.ini, auth_file, auth_hba_file) into memory,
// with an error message fit for "file: message" lines.
#pragma once

#include <string>

namespace pgsluice {

// Returns false and sets `error` ("cannot open file: <strerror>", "cannot read file") on failure.
bool read_whole_file(const std::string& path, std::string& out, std::string& error);

}  // namespace pgsluice
