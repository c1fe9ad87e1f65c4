// The relay action for LISTEN at the byte level: the channel tracking of a pooled server
// (listen_channels.h: the sync query, the read-back's rows and how the answer, with PostgreSQL's
// transaction outcomes, becomes the client's channels) and the relay's registry
// (relay_registry.h: routing by channel, the listener's queries, the confirmations that let a
// client's ReadyForQuery go, a lost listener), and the reconnect back-off.
#include "pooler/core/listen_relay.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "pgsluice/protocol/writer.h"
#include "pooler/core/relay_registry.h"
#include "pooler/session_state/listen_channels.h"

namespace pgsluice {
namespace {

namespace pp = pgsluice::protocol;

pp::SessionStateFinding listen(std::string channel) {
  pp::SessionStateFinding f;
  f.kind = pp::SessionStateKind::listen;
  f.detail = std::move(channel);
  f.effect = pp::SessionStateEffect::acquire;
  return f;
}

pp::SessionStateFinding unlisten(std::string channel) {
  pp::SessionStateFinding f = listen(std::move(channel));
  f.effect = pp::SessionStateEffect::release;
  return f;
}

std::string row(std::string_view channel) {
  std::string wire;
  const std::vector<std::optional<std::string_view>> values{channel};
  pp::write_data_row(wire, values);
  return wire.substr(5);
}

// A CommandComplete body: the tag as a C string.
std::string tag(std::string_view text) {
  return std::string(text) + '\0';
}

// Runs the read-back with the server's answer `rows`.
ChannelSet answer(ListenCapture& c, const ChannelSet& before,
                  const std::vector<std::string>& rows) {
  EXPECT_EQ(c.begin_query(), "SELECT pg_catalog.pg_listening_channels(); UNLISTEN *");
  EXPECT_TRUE(c.awaiting());
  for (const std::string& r : rows) c.on_row(row(r));
  c.on_select_complete();
  ChannelSet after;
  EXPECT_TRUE(c.finish(before, after));
  EXPECT_FALSE(c.awaiting());
  EXPECT_FALSE(c.any());
  return after;
}

TEST(ListenCapture, TheSyncQueryListensTheClientsChannelsOnce) {
  ListenCapture c;
  c.note(listen("jobs"));
  EXPECT_TRUE(c.any());
  EXPECT_EQ(c.sync_query({"Mixed Case", "jobs", "x\"y"}, false),
            "LISTEN \"Mixed Case\"; LISTEN jobs; LISTEN \"x\"\"y\"");
  EXPECT_TRUE(c.synced());
  EXPECT_EQ(c.sync_query({"jobs"}, false), "");  // once per stretch
}

TEST(ListenCapture, SyncedTheAnswerIsTheClientsSet) {
  ListenCapture c;
  c.note(unlisten("a"));
  (void)c.sync_query({"a", "b"}, false);
  // PostgreSQL ran UNLISTEN a (or rolled it back): its answer is the truth either way.
  EXPECT_EQ(answer(c, {"a", "b"}, {"b"}), (ChannelSet{"b"}));
  c.note(unlisten("b"));
  (void)c.sync_query({"b"}, false);
  EXPECT_EQ(answer(c, {"b"}, {"b"}), (ChannelSet{"b"}));  // the UNLISTEN rolled back
}

TEST(ListenCapture, ARolledBackListenOnACleanServerLeavesNothing) {
  ListenCapture c;
  c.note(listen("x"));
  (void)c.sync_query({}, false);  // the client had nothing: nothing to put first
  EXPECT_EQ(answer(c, {}, {}), ChannelSet{});
}

TEST(ListenCapture, DiscardAllUnlistensEverything) {
  ListenCapture c;
  c.note_discard_all();
  (void)c.sync_query({"a"}, false);
  EXPECT_EQ(answer(c, {"a"}, {}), ChannelSet{});
}

TEST(ListenCapture, InsideABlockARollbackKeepsWhatTheClientHad) {
  // BEGIN came in an earlier Query: the sync LISTEN is part of the client's transaction.
  ListenCapture c;
  c.note(unlisten("two"));
  EXPECT_EQ(c.sync_query({"two"}, true), "LISTEN two");
  c.on_client_command_complete(tag("UNLISTEN"));
  c.on_client_command_complete(tag("ROLLBACK"));
  EXPECT_EQ(answer(c, {"two"}, {}), (ChannelSet{"two"}));
  // Committed, the answer is exact.
  c.note(unlisten("two"));
  (void)c.sync_query({"two"}, true);
  c.on_client_command_complete(tag("COMMIT"));
  EXPECT_EQ(answer(c, {"two"}, {}), ChannelSet{});
}

TEST(ListenCapture, UnsyncedUnlistensAreTakenToStickAndListensAreRead) {
  ListenCapture c;
  c.note(unlisten("a"));
  c.note(listen("c"));
  // No sync (a pipeline): the server began with nothing and read back what the client added.
  EXPECT_EQ(answer(c, {"a", "b"}, {"c"}), (ChannelSet{"b", "c"}));
  c.note(unlisten("*"));
  EXPECT_EQ(answer(c, {"b", "c"}, {}), ChannelSet{});
}

TEST(ListenCapture, AFailedReadBackKnowsNothing) {
  ListenCapture c;
  c.note(listen("a"));
  (void)c.begin_query();
  ChannelSet after;
  EXPECT_FALSE(c.finish({"z"}, after));  // no CommandComplete of the SELECT came
  EXPECT_EQ(after, (ChannelSet{"z"}));
}

constexpr RelaySubscriber kA{.worker = 0, .client = 1};
constexpr RelaySubscriber kB{.worker = 1, .client = 2};

TEST(RelayRegistry, AClientWaitsForTheListenersListen) {
  RelayRegistry r;
  EXPECT_FALSE(r.update(kA, {"jobs"}, {}));  // nobody listened on jobs yet
  EXPECT_EQ(r.next_listener_query(), "LISTEN jobs");
  EXPECT_EQ(r.next_listener_query(), "");  // one query in flight at a time
  EXPECT_EQ(r.on_listener_query_done(), std::vector<RelaySubscriber>{kA});
  // The channel is listened on now: the next client's ReadyForQuery goes at once.
  EXPECT_TRUE(r.update(kB, {"jobs"}, {}));
  EXPECT_EQ(r.next_listener_query(), "");
  EXPECT_EQ(r.subscribers("jobs"), (std::vector<RelaySubscriber>{kA, kB}));
  EXPECT_TRUE(r.subscribers("other").empty());
}

TEST(RelayRegistry, ChannelsNobodyListensOnAreUnlistened) {
  RelayRegistry r;
  (void)r.update(kA, {"a", "b"}, {});
  EXPECT_EQ(r.next_listener_query(), "LISTEN a; LISTEN b");
  (void)r.on_listener_query_done();
  EXPECT_TRUE(r.update(kA, {}, {"a"}));
  EXPECT_EQ(r.subscribers("a"), std::vector<RelaySubscriber>{});
  EXPECT_EQ(r.next_listener_query(), "UNLISTEN a");
  // While the UNLISTEN is in flight a new listener of a must wait for the LISTEN after it.
  EXPECT_FALSE(r.update(kB, {"a"}, {}));
  EXPECT_TRUE(r.on_listener_query_done().empty());
  EXPECT_EQ(r.next_listener_query(), "LISTEN a");
  EXPECT_EQ(r.on_listener_query_done(), std::vector<RelaySubscriber>{kB});
}

TEST(RelayRegistry, AClosedClientIsOwedNothingAndRoutedNothing) {
  RelayRegistry r;
  (void)r.update(kA, {"a"}, {});
  (void)r.update(kB, {"a", "b"}, {});
  r.remove(kA);
  EXPECT_EQ(r.subscribers("a"), std::vector<RelaySubscriber>{kB});
  EXPECT_EQ(r.next_listener_query(), "LISTEN a; LISTEN b");
  EXPECT_EQ(r.on_listener_query_done(), std::vector<RelaySubscriber>{kB});
  r.remove(kB);
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.next_listener_query(), "UNLISTEN a; UNLISTEN b");
}

TEST(RelayRegistry, ALostListenerListensOnEverythingAgain) {
  RelayRegistry r;
  (void)r.update(kA, {"a"}, {});
  (void)r.update(kB, {"b"}, {});
  (void)r.next_listener_query();
  (void)r.on_listener_query_done();
  r.on_listener_lost();
  EXPECT_FALSE(r.update(kB, {"c"}, {}));  // nothing is confirmed until the listener is back
  EXPECT_EQ(r.next_listener_query(), "LISTEN a; LISTEN b; LISTEN c");
  EXPECT_EQ(r.on_listener_query_done(), std::vector<RelaySubscriber>{kB});
  EXPECT_EQ(r.all_subscribers(), (std::vector<RelaySubscriber>{kA, kB}));
}

TEST(RelayRegistry, PendingClientsAreLetGoWhenNoListenerCanLogIn) {
  RelayRegistry r;
  (void)r.update(kA, {"a"}, {});
  EXPECT_EQ(r.take_pending(), std::vector<RelaySubscriber>{kA});
  EXPECT_TRUE(r.take_pending().empty());
}

TEST(ListenRelay, ReconnectsAtOnceThenBacksOff) {
  EXPECT_EQ(ListenRelay::backoff_ms(1), 0u);
  EXPECT_EQ(ListenRelay::backoff_ms(2), 200u);
  EXPECT_EQ(ListenRelay::backoff_ms(3), 400u);
  EXPECT_EQ(ListenRelay::backoff_ms(6), 3200u);
  EXPECT_EQ(ListenRelay::backoff_ms(7), 5000u);
  EXPECT_EQ(ListenRelay::backoff_ms(50), 5000u);
}

}  // namespace
}  // namespace pgsluice
