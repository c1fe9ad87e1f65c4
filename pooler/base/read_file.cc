#include "pooler/base/read_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pgsluice {

bool read_whole_file(const std::string& path, std::string& out, std::string& error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    error = std::string("cannot open file: ") + std::strerror(errno);
    return false;
  }
  out.clear();
  char buf[8192];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) {
    error = "cannot read file";
    return false;
  }
  return true;
}

}  // namespace pgsluice
