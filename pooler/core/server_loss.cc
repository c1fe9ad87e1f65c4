// A server connection lost after its login (the backend terminated, PostgreSQL crashed or shut
// down). Kept apart from the forwarding in server.cc, which only hands its loss here.
#include <spdlog/spdlog.h>

#include <string>

#include "pooler/core/server.h"

namespace pgsluice {

void Server::lose(int status) {
  close(status == UV_EOF ? std::string("server closed the connection")
                         : fmt::format("server connection failed: {}", uv_strerror(status)));
}

}  // namespace pgsluice
