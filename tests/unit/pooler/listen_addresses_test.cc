// listen_addr as PgBouncer reads it: names resolved, "*" for every address, lists, each
// address once, a name that does not resolve an error.
#include "pooler/net/listen_addresses.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <set>
#include <string>

namespace pgsluice {
namespace {

std::set<std::string> texts(const ListenAddresses& r) {
  std::set<std::string> out;
  for (const ListenAddress& a : r.addresses) out.insert(a.text);
  return out;
}

TEST(ListenAddresses, AddressTextIsInetNtopAndThePort) {
  // IPv4 is formatted by hand (cheaper than inet_ntop): the same text for every octet width.
  for (const char* ip :
       {"0.0.0.0", "127.0.0.1", "10.0.12.3", "192.168.100.255", "255.255.255.255", "1.22.133.4"}) {
    for (uint16_t port : {0, 9, 5432, 65535}) {
      sockaddr_in in{};
      in.sin_family = AF_INET;
      in.sin_port = htons(port);
      ASSERT_EQ(inet_pton(AF_INET, ip, &in.sin_addr), 1);
      EXPECT_EQ(address_text(reinterpret_cast<const sockaddr*>(&in)),
                std::string(ip) + ":" + std::to_string(port));
    }
  }
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(6432);
  ASSERT_EQ(inet_pton(AF_INET6, "::1", &in6.sin6_addr), 1);
  EXPECT_EQ(address_text(reinterpret_cast<const sockaddr*>(&in6)), "[::1]:6432");
}

TEST(ListenAddresses, SplitTrimsAndSkipsEmptyEntries) {
  EXPECT_EQ(split_listen_addr(" 127.0.0.1 ,, localhost,"),
            (std::vector<std::string>{"127.0.0.1", "localhost"}));
  EXPECT_TRUE(split_listen_addr("").empty());
  EXPECT_TRUE(split_listen_addr(" , ").empty());
}

TEST(ListenAddresses, LiteralsAndTheirText) {
  ListenAddresses r = resolve_listen_addresses("127.0.0.1, ::1", 6432);
  EXPECT_EQ(r.error, "");
  ASSERT_EQ(r.addresses.size(), 2u);
  EXPECT_EQ(r.addresses[0].text, "127.0.0.1:6432");
  EXPECT_EQ(r.addresses[1].text, "[::1]:6432");
}

TEST(ListenAddresses, StarIsEveryIpv4AndIpv6Address) {
  ListenAddresses r = resolve_listen_addresses("*", 7000);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(texts(r).contains("0.0.0.0:7000")) << r.addresses.size();
  EXPECT_TRUE(texts(r).contains("[::]:7000")) << r.addresses.size();
}

TEST(ListenAddresses, NamesResolveAndAnAddressIsListedOnce) {
  ListenAddresses r = resolve_listen_addresses("localhost,127.0.0.1", 6432);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(texts(r).contains("127.0.0.1:6432"));
  EXPECT_EQ(texts(r).size(), r.addresses.size());  // 127.0.0.1 once
}

TEST(ListenAddresses, ANameThatDoesNotResolveIsAnError) {
  ListenAddresses r = resolve_listen_addresses("127.0.0.1,no-such-host.invalid", 6432);
  EXPECT_TRUE(r.addresses.empty());
  EXPECT_EQ(r.error.rfind("getaddrinfo('no-such-host.invalid', '6432') = ", 0), 0u) << r.error;
}

}  // namespace
}  // namespace pgsluice
