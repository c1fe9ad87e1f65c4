// Session parameters that travel with a client: the set, startup `options` parsing, quoting and
// the query that brings a server in line with a client.
#include <gtest/gtest.h>

#include "pooler/session_state/params.h"

namespace pgsluice {
namespace {

TEST(ParameterSet, SetGetAndCaseInsensitiveNames) {
  ParameterSet p;
  p.set("TimeZone", "UTC");
  ASSERT_NE(p.get("timezone"), nullptr);
  EXPECT_EQ(*p.get("TIMEZONE"), "UTC");
  p.set("timezone", "Europe/Berlin");
  EXPECT_EQ(p.size(), 1u);
  EXPECT_EQ(*p.get("TimeZone"), "Europe/Berlin");
  EXPECT_EQ(p.items()[0].first, "TimeZone");  // the first spelling is kept
  p.erase("TIMEZONE");
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.get("TimeZone"), nullptr);
}

TEST(ParameterSet, KeepsItemsSortedByFoldedName) {
  ParameterSet p;
  p.set("b", "1");
  p.set("TimeZone", "UTC");
  p.set("a", "2");
  p.set("c", "3");
  p.set("DateStyle", "ISO");
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p.items()[0].first, "a");
  EXPECT_EQ(p.items()[1].first, "b");
  EXPECT_EQ(p.items()[2].first, "c");
  EXPECT_EQ(p.items()[3].first, "DateStyle");
  EXPECT_EQ(p.items()[4].first, "TimeZone");
}

TEST(ParameterSet, AddMissingKeepsOwnValuesAndTheOrder) {
  // A client's startup parameters, then what the server reports: the client's own values stay
  // (its application_name, its DateStyle spelled its way), the rest are added, all sorted; the
  // result equals the same set filled one set() at a time.
  ParameterSet client;
  client.set("application_name", "app");
  client.set("datestyle", "German");
  client.set("zz_custom", "1");
  ParameterSet server;
  for (auto [n, v] : {std::pair{"application_name", ""},
                      {"client_encoding", "UTF8"},
                      {"DateStyle", "ISO, MDY"},
                      {"integer_datetimes", "on"},
                      {"server_version", "15.18 (Debian 15.18-0+deb12u1)"},
                      {"TimeZone", "UTC"}}) {
    server.set(n, v);
  }
  ParameterSet expected = client;
  for (const auto& [n, v] : server.items()) {
    if (expected.get(n) == nullptr) expected.set(n, v);
  }
  client.add_missing(server);
  EXPECT_EQ(client, expected);
  ASSERT_EQ(client.size(), 7u);
  EXPECT_EQ(*client.get("application_name"), "app");
  EXPECT_EQ(*client.get("DateStyle"), "German");
  EXPECT_EQ(client.items()[2].first, "datestyle");  // the client's spelling
  EXPECT_EQ(client.items()[6].first, "zz_custom");
  ParameterSet empty;
  empty.add_missing(server);
  EXPECT_EQ(empty, server);
  server.add_missing(ParameterSet{});
  EXPECT_EQ(server.size(), 6u);
}

TEST(ParameterSet, EqualContentsAreEqualWhateverTheOrderOfFilling) {
  ParameterSet x, y;
  x.set("application_name", "app");
  x.set("TimeZone", "UTC");
  x.set("client_encoding", "UTF8");
  y.set("client_encoding", "UTF8");
  y.set("TimeZone", "UTC");
  y.set("application_name", "app");
  EXPECT_EQ(x, y);
  y.set("timezone", "Europe/Berlin");
  EXPECT_NE(x, y);
}

TEST(ParameterSet, ManyChangesBetweenComparisonsAreComparedExactly) {
  // A server that reports a thousand parameters in a row: each report is a binary search and
  // an insert, the packing is redone once, at the next comparison (issue 23).
  ParameterSet a;
  ParameterSet b;
  for (int i = 0; i < 1000; ++i) a.set("p" + std::to_string(i), std::to_string(i));
  for (int i = 999; i >= 0; --i) b.set("P" + std::to_string(i), std::to_string(i));
  EXPECT_NE(a, b);  // same names, spelled differently: not the same set as spelled
  ParameterSet c = a;
  EXPECT_EQ(a, c);
  c.set("p500", "changed");
  EXPECT_NE(a, c);
  c.set("p500", "500");
  c.erase("p7");
  EXPECT_NE(a, c);
  a.erase("P7");
  EXPECT_EQ(a, c);
}

TEST(ParameterSet, EqualityFollowsEveryChange) {
  ParameterSet a;
  ParameterSet b;
  a.set("TimeZone", "UTC");
  b.set("TimeZone", "UTC");
  EXPECT_EQ(a, b);
  b.set("TimeZone", "Europe/Paris");  // a value changes
  EXPECT_NE(a, b);
  b.set("timezone", "UTC");  // and back, through another spelling of the name
  EXPECT_EQ(a, b);
  a.set("search_path", "x");
  EXPECT_NE(a, b);
  a.erase("SEARCH_PATH");
  EXPECT_EQ(a, b);
  // The packing cannot be fooled by a value that looks like the next item.
  ParameterSet c;
  ParameterSet d;
  c.set("a", "b");
  c.set("c", "d");
  d.set("a", std::string("b\0c\0d", 5));
  EXPECT_NE(c, d);
  EXPECT_EQ(*d.get("a"), "b");  // a NUL ends a protocol string: the rest is not kept
  c.clear();
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c, ParameterSet());
}

TEST(ParameterSet, SetsFoundEqualShareOnePackingUntilOneChanges) {
  // The comparison at every link: once two sets were found equal, the next comparison of the
  // two is a pointer comparison, and a third equal set joins the packing they share.
  ParameterSet client;
  ParameterSet server;
  ParameterSet other_client;
  for (ParameterSet* p : {&client, &server, &other_client}) {
    p->set("TimeZone", "UTC");
    p->set("DateStyle", "ISO, MDY");
  }
  EXPECT_FALSE(client.shares_packing_with(server));
  EXPECT_EQ(client, server);
  EXPECT_TRUE(client.shares_packing_with(server));
  EXPECT_EQ(other_client, server);
  EXPECT_TRUE(other_client.shares_packing_with(server));
  EXPECT_TRUE(client.shares_packing_with(other_client));
  // A change leaves the shared packing to the others: they stay equal, the changed one not.
  other_client.set("TimeZone", "Europe/Paris");
  EXPECT_NE(other_client, server);
  EXPECT_FALSE(other_client.shares_packing_with(server));
  EXPECT_EQ(client, server);
  EXPECT_EQ(*client.get("TimeZone"), "UTC");
  // A copy shares its source's packing; empty sets share none and are equal.
  ParameterSet copy = other_client;
  EXPECT_TRUE(copy.shares_packing_with(other_client));
  EXPECT_EQ(copy, other_client);
  EXPECT_EQ(ParameterSet(), ParameterSet());
  EXPECT_NE(ParameterSet(), client);
  // Unequal sets of the same size never share.
  ParameterSet tz_a;
  ParameterSet tz_b;
  tz_a.set("TimeZone", "UTC");
  tz_b.set("TimeZone", "UT0");
  EXPECT_NE(tz_a, tz_b);
  EXPECT_FALSE(tz_a.shares_packing_with(tz_b));
}
TEST(TrackedParameters, CanonicalNames) {
  EXPECT_EQ(tracked_parameter_name("datestyle"), "DateStyle");
  EXPECT_EQ(tracked_parameter_name("CLIENT_ENCODING"), "client_encoding");
  EXPECT_EQ(tracked_parameter_name("intervalstyle"), "IntervalStyle");
  EXPECT_EQ(tracked_parameter_name("timezone"), "TimeZone");
  EXPECT_EQ(tracked_parameter_name("standard_conforming_strings"), "standard_conforming_strings");
  EXPECT_EQ(tracked_parameter_name("application_name"), "application_name");
  EXPECT_EQ(tracked_parameter_name("search_path"), "");
  EXPECT_EQ(tracked_parameter_name("server_version"), "");
}

TEST(Quoting, Literal) {
  EXPECT_EQ(quote_literal("abc"), "'abc'");
  EXPECT_EQ(quote_literal("it's"), "'it''s'");
  EXPECT_EQ(quote_literal(R"(a\b)"), R"(E'a\\b')");
  EXPECT_EQ(quote_literal(""), "''");
}

TEST(Quoting, Identifier) {
  EXPECT_EQ(quote_identifier("search_path"), "search_path");
  EXPECT_EQ(quote_identifier("myapp.tenant"), "myapp.tenant");
  EXPECT_EQ(quote_identifier("DateStyle"), "\"DateStyle\"");
  EXPECT_EQ(quote_identifier("we\"ird"), "\"we\"\"ird\"");
}

TEST(SyncQuery, NothingWhenEqual) {
  ParameterSet client, server, extras, server_extras;
  client.set("TimeZone", "UTC");
  server.set("TimeZone", "UTC");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras), "");
}

TEST(SyncQuery, NothingWhenEqualButFilledInAnotherOrder) {
  ParameterSet client, server, extras, server_extras;
  client.set("application_name", "pgbench");
  client.set("client_encoding", "UTF8");
  client.set("server_version", "15.18");
  server.set("server_version", "15.18");
  server.set("client_encoding", "UTF8");
  server.set("application_name", "pgbench");
  extras.set("search_path", "app");
  extras.set("extra_float_digits", "3");
  server_extras.set("extra_float_digits", "3");
  server_extras.set("search_path", "app");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras), "");
}

TEST(SyncQuery, SetsDifferingTrackedValue) {
  ParameterSet client, server, extras, server_extras;
  client.set("TimeZone", "Europe/Berlin");
  client.set("application_name", "app");
  server.set("TimeZone", "UTC");
  server.set("application_name", "app");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "SET TimeZone='Europe/Berlin';");
}

TEST(SyncQuery, IgnoresReportedParametersClientsCannotSet) {
  ParameterSet client, server, extras, server_extras;
  client.set("server_version", "15.0");
  server.set("server_version", "15.18");
  client.set("is_superuser", "on");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras), "");
}

TEST(SyncQuery, AppliesExtrasAndRemembersThem) {
  ParameterSet client, server, extras, server_extras;
  extras.set("search_path", "foo,bar");
  extras.set("extra_float_digits", "3");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "SELECT pg_catalog.set_config('extra_float_digits', '3', false), "
            "pg_catalog.set_config('search_path', 'foo,bar', false);");
  EXPECT_EQ(server_extras, extras);
  // Applied once: the same client on the same server needs nothing.
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras), "");
}

TEST(SyncQuery, ResetsExtrasTheNextClientDoesNotHave) {
  ParameterSet client, server, extras, server_extras;
  server_extras.set("search_path", "foo");
  server_extras.set("DateStyle", "ISO");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "RESET \"DateStyle\";RESET search_path;");
  EXPECT_TRUE(server_extras.empty());
}

TEST(SyncQuery, SetsAndResetsTogether) {
  ParameterSet client, server, extras, server_extras;
  server_extras.set("geqo", "off");
  extras.set("search_path", "x");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "SELECT pg_catalog.set_config('search_path', 'x', false);RESET geqo;");
}

TEST(SyncQuery, TrackedParametersBySetInTheCanonicalSpellingThenExtras) {
  ParameterSet client, server, extras, server_extras;
  client.set("datestyle", "ISO");
  client.set("application_name", "a\\b");
  server.set("DateStyle", "ISO, MDY");
  extras.set("search_path", "x");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "SET application_name=E'a\\\\b';SET DateStyle='ISO';"
            "SELECT pg_catalog.set_config('search_path', 'x', false);");
}

TEST(SyncQuery, QuotesValuesSafely) {
  ParameterSet client, server, extras, server_extras;
  client.set("application_name", "x'); DROP TABLE t; --");
  server.set("application_name", "");
  EXPECT_EQ(build_parameter_sync_query(client, server, extras, server_extras),
            "SET application_name='x''); DROP TABLE t; --';");
}

}  // namespace
}  // namespace pgsluice
