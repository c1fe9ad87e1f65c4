// The text of a TCP connection's addresses, as the log prints them: "127.0.0.1:5432",
// "[::1]:5432" (PgBouncer's shape, which its log readers parse).
#pragma once

#include <uv.h>

#include <string>

namespace pgsluice {

// The far end of a connected TCP socket; "?" when the kernel cannot say.
std::string tcp_peer_name(const uv_tcp_t* tcp);
// This end of a connected TCP socket (the pooler's own address and port); "?" likewise.
std::string tcp_local_name(const uv_tcp_t* tcp);

}  // namespace pgsluice
