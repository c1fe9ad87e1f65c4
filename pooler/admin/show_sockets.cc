// SHOW CLIENTS, SERVERS, SOCKETS, ACTIVE_SOCKETS, DNS_HOSTS and DNS_ZONES; see show_sockets.h.
// Column lists follow PgBouncer 1.25.2 (integration/data/pgbouncer-1.25-show-columns.txt).
#include "pooler/admin/show_sockets.h"

#include <fmt/format.h>

#include "pgsluice/protocol/startup.h"
#include "pooler/admin/views.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"
#include "pooler/net/tls_session.h"

namespace pgsluice {

namespace {

std::string ptr_text(const void* p) {
  return p == nullptr ? "" : fmt::format("{}", p);
}

void socket_columns(AdminResult& r) {
  r.text("type").text("user").text("database").text("replication").text("state").text("addr");
  r.int4("port").text("local_addr").int4("local_port").text("connect_time").text("request_time");
  r.int4("wait").int4("wait_us").int4("close_needed").text("ptr").text("link");
  r.int4("remote_pid").text("tls").text("application_name").int4("prepared_statements");
  r.int8("id");
}

// SHOW SOCKETS' columns after the common ones: PgBouncer's positions in its own I/O buffer.
void buffer_columns(AdminResult& r) {
  for (const char* c : {"recv_pos", "pkt_pos", "pkt_remain", "send_pos", "send_remain", "pkt_avail",
                        "send_avail"}) {
    r.int4(c);
  }
}

// pgsluice's buffers are not PgBouncer's (one input buffer read up to whole messages, one output
// buffer): recv_pos and pkt_avail are the bytes received and not yet handled, send_avail the
// bytes queued to send; pkt_pos, pkt_remain, send_pos and send_remain have no counterpart and
// are 0 (send_remain is 0 in PgBouncer too). docs/admin.md says so.
void add_buffers(AdminResult& r, Channel& channel) {
  const auto unread = static_cast<int64_t>(channel.input().unread_size());
  r.add(unread).add(0).add(0).add(0).add(0).add(unread);
  r.add(static_cast<int64_t>(channel.queued_output()));
}

bool buffers_busy(Channel& channel) {
  return channel.input().unread_size() != 0 || channel.queued_output() != 0;
}

// PgBouncer's tls column: empty for a plain connection or one still connecting.
std::string tls_info(const Channel& channel) {
  const TlsSession* tls = channel.tls();
  return tls != nullptr && tls->handshake_done() ? tls->connection_info() : std::string();
}

struct Endpoint {
  std::string addr;
  int port = 0;
};

Endpoint endpoint(Channel& channel, bool peer) {
  Endpoint e;
  if (!channel.is_tcp()) {
    e.addr = "unix";
    return e;
  }
  sockaddr_storage ss{};
  int len = sizeof(ss);
  int rc = peer ? uv_tcp_getpeername(channel.tcp(), reinterpret_cast<sockaddr*>(&ss), &len)
                : uv_tcp_getsockname(channel.tcp(), reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) return e;
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    uv_ip4_name(in, host, sizeof(host));
    e.port = ntohs(in->sin_port);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    uv_ip6_name(in6, host, sizeof(host));
    e.port = ntohs(in6->sin6_port);
  }
  e.addr = host;
  return e;
}

// The list PgBouncer would keep the client on: SHOW CLIENTS' state, and SHOW SOCKETS' (cl_*).
struct ClientList {
  const char* clients = nullptr;  // nullptr: not in SHOW CLIENTS
  const char* sockets = nullptr;  // nullptr: in neither (closing)
};

ClientList client_list(const Client& c) {
  switch (c.state()) {
    case Client::State::active:
      return {"active", "cl_active"};
    case Client::State::idle:
      return {"idle", "cl_active"};
    case Client::State::waiting:
    case Client::State::welcome_wait:
      return {"waiting", "cl_waiting"};
    case Client::State::startup:
    case Client::State::auth:
      return {nullptr, "cl_login"};  // SHOW CLIENTS shows logged-in clients only, as PgBouncer
    case Client::State::closing:
      return {};
  }
  return {};
}

// The columns SHOW CLIENTS and SHOW SOCKETS share; the caller adds its own after them.
void add_client(AdminResult& r, Worker& worker, Client& c, const char* state, uint64_t now) {
  const bool waiting = c.state() == Client::State::waiting && c.wait.started_us != 0;
  const uint64_t wait = waiting && now > c.wait.started_us ? now - c.wait.started_us : 0;
  const Endpoint remote = endpoint(c.channel(), true);
  const Endpoint local = endpoint(c.channel(), false);
  const std::string* app = c.tracked_parameters().get("application_name");
  r.row()
      .add("C")
      .add(c.user().empty() ? std::string("(nouser)") : c.user())
      .add(c.database().empty() ? std::string("(nodb)") : c.database())
      .add(protocol::to_string(c.replication()))
      .add(state)
      .add(remote.addr)
      .add(remote.port)
      .add(local.addr)
      .add(local.port)
      .add(format_loop_time(worker, c.connected_ms()))
      .add(format_loop_time(worker,
                            c.wait_started_ms() != 0 ? c.wait_started_ms() : c.connected_ms()))
      .add(static_cast<int64_t>(wait / 1'000'000))
      .add(static_cast<int64_t>(wait % 1'000'000))
      .add(0)
      .add(ptr_text(&c))
      .add(ptr_text(c.server()))
      .add(0)
      .add(tls_info(c.channel()))
      .add(app != nullptr ? *app : std::string())
      .add(static_cast<int64_t>(c.prepared_statement_count()))
      .add(c.id());
}

// SHOW SERVERS' state, and SHOW SOCKETS' (sv_*).
struct ServerList {
  const char* servers = nullptr;
  const char* sockets = nullptr;
};

ServerList server_list(Server::State s) {
  switch (s) {
    case Server::State::connecting:
    case Server::State::login:
      return {"new", "sv_login"};
    case Server::State::idle:
      return {"idle", "sv_idle"};
    case Server::State::active:
    case Server::State::draining:  // PgBouncer has no such state: busy, as active
      return {"active", "sv_active"};
    case Server::State::resetting:
      return {"used", "sv_used"};
    case Server::State::being_canceled:
      return {"being_canceled", "sv_being_canceled"};
    case Server::State::listening:
    case Server::State::replicating:  // PgBouncer keeps them on its active list
      return {"active", "sv_active"};
    case Server::State::closing:
    case Server::State::moving:
      return {};
  }
  return {};
}

bool connected(const Server& s) {
  return s.state() != Server::State::connecting;
}

void add_server(AdminResult& r, Worker& worker, Pool& p, Server& s, const char* state) {
  const Endpoint remote = connected(s) ? endpoint(s.channel(), true) : Endpoint{};
  const Endpoint local = connected(s) ? endpoint(s.channel(), false) : Endpoint{};
  const std::string* app = s.parameters().get("application_name");
  r.row()
      .add("S")
      .add(p.credentials().user)
      .add(p.database().name)
      .add(protocol::to_string(s.replication()))
      .add(state)
      .add(remote.addr.empty() ? s.address().to_string() : remote.addr)
      .add(remote.port != 0 ? remote.port : s.address().port)
      .add(local.addr)
      .add(local.port)
      .add(format_loop_time(worker, s.timing.connect_ms))
      .add(format_loop_time(worker, s.linked_at_ms() != 0 ? s.linked_at_ms() : s.timing.connect_ms))
      .add(0)
      .add(0)
      .add(s.timing.close_needed)
      .add(ptr_text(&s))
      .add(ptr_text(s.client()))
      .add(s.backend_pid())
      .add(tls_info(s.channel()))
      .add(app != nullptr ? *app : std::string())
      .add(static_cast<int64_t>(s.prepared_statement_count()))
      .add(s.id());
}

}  // namespace

AdminResult show_clients(Worker& worker) {
  AdminResult r;
  socket_columns(r);
  // pgsluice's own, after PgBouncer's: what pins the server (session state under `pin`).
  r.text("pinned_for");
  const uint64_t now = now_us();
  worker.for_each_client([&](Client& c) {
    const char* state = client_list(c).clients;
    if (state == nullptr) return;
    if (c.is_admin_console()) state = "active";
    add_client(r, worker, c, state, now);
    r.add(c.server() != nullptr ? c.server()->pinned_for() : std::string());
  });
  r.set_tag("SHOW");
  return r;
}

AdminResult show_servers(Worker& worker) {
  AdminResult r;
  socket_columns(r);
  // pgsluice's own (#20): what pins the server; the [databases] host the server logged in to,
  // as the entry names it (addr and port are the address it reached), and the role it last
  // told; the protocol version the login settled on (3.2 with PostgreSQL 18, #21), empty until
  // then; 1 for a pool's LISTEN relay connection (listen_relay.h).
  r.text("pinned_for").text("host").text("role").text("protocol").int4("listener");
  worker.for_each_pool([&](Pool& p) {
    auto row = [&](Server& s) {
      const char* state = server_list(s.state()).servers;
      if (state == nullptr) return;
      add_server(r, worker, p, s, state);
      r.add(s.pinned_for())
          .add(s.address().to_string())
          .add(server_role_name(s))
          .add(connected(s) && s.state() != Server::State::login
                   ? fmt::format("3.{}", s.protocol_version() & 0xffff)
                   : std::string())
          .add(s.is_listener() ? 1 : 0);
    };
    p.for_each_server(row);
    p.for_each_listener(row);
  });
  r.set_tag("SHOW");
  return r;
}

AdminResult show_sockets(Worker& worker, bool active_only) {
  AdminResult r;
  socket_columns(r);
  buffer_columns(r);
  const uint64_t now = now_us();
  // PgBouncer's order: logged-in clients and the servers, then the clients still logging in.
  auto clients = [&](bool logging_in) {
    worker.for_each_client([&](Client& c) {
      const char* state = client_list(c).sockets;
      if (state == nullptr || (std::string_view(state) == "cl_login") != logging_in) return;
      if (active_only && !buffers_busy(c.channel())) return;
      add_client(r, worker, c, state, now);
      add_buffers(r, c.channel());
    });
  };
  clients(false);
  worker.for_each_pool([&](Pool& p) {
    auto row = [&](Server& s) {
      const char* state = server_list(s.state()).sockets;
      if (state == nullptr || (active_only && !buffers_busy(s.channel()))) return;
      add_server(r, worker, p, s, state);
      add_buffers(r, s.channel());
    };
    p.for_each_server(row);
    p.for_each_listener(row);
  });
  clients(true);
  r.set_tag("SHOW");
  return r;
}

AdminResult show_dns_hosts() {
  // PgBouncer's cache of resolved names; pgsluice has none, so no name is ever cached.
  AdminResult r;
  r.text("hostname").int8("ttl").text("addrs");
  r.set_tag("SHOW");
  return r;
}

AdminResult show_dns_zones() {
  // PgBouncer's zone serials (dns_zone_check_period), which need its c-ares cache: none here.
  AdminResult r;
  r.text("zonename").int8("serial").int4("count");
  r.set_tag("SHOW");
  return r;
}

}  // namespace pgsluice
