// Admin console replies encoded as protocol messages and read back with the protocol parsers:
// column names, types, NULLs, tags, notices, errors; simple and extended shapes.
#include <gtest/gtest.h>

#include <vector>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/admin/result.h"

namespace pgsluice {
namespace {

namespace pp = pgsluice::protocol;

struct Msg {
  char type;
  std::string body;
};

std::vector<Msg> split(const std::string& bytes) {
  pp::FrameReader reader(pp::FramePhase::regular, pp::kDefaultMaxMessageLength);
  reader.append(bytes);
  std::vector<Msg> out;
  for (;;) {
    pp::FrameResult f = reader.next();
    if (f.status != pp::FrameStatus::complete) break;
    out.push_back({f.message.type, std::string(f.message.body)});
  }
  EXPECT_EQ(reader.unread_size(), 0u);
  return out;
}

AdminResult sample() {
  AdminResult r;
  r.text("database").int4("cl_active").numeric("total_xact_count");
  r.row().add("app").add(3).add(uint64_t{18446744073709551615ull});
  r.row().add("other").add_null().add(int64_t{0});
  r.set_tag("SHOW");
  return r;
}

TEST(AdminResult, SimpleProtocolRoundTrip) {
  std::string out;
  sample().write_simple(out);
  std::vector<Msg> msgs = split(out);
  ASSERT_EQ(msgs.size(), 4u);
  ASSERT_EQ(msgs[0].type, 'T');
  auto rd = pp::parse_row_description(msgs[0].body);
  ASSERT_TRUE(rd);
  ASSERT_EQ(rd.value.fields.size(), 3u);
  EXPECT_EQ(rd.value.fields[0].name, "database");
  EXPECT_EQ(rd.value.fields[0].type_oid, pp::kOidText);
  EXPECT_EQ(rd.value.fields[1].name, "cl_active");
  EXPECT_EQ(rd.value.fields[1].type_oid, pp::kOidInt4);
  EXPECT_EQ(rd.value.fields[2].type_oid, pp::kOidNumeric);
  ASSERT_EQ(msgs[1].type, 'D');
  auto row = pp::parse_data_row(msgs[1].body);
  ASSERT_TRUE(row);
  ASSERT_EQ(row.value.values.size(), 3u);
  EXPECT_EQ(row.value.values[0], "app");
  EXPECT_EQ(row.value.values[1], "3");
  EXPECT_EQ(row.value.values[2], "18446744073709551615");
  auto row2 = pp::parse_data_row(msgs[2].body);
  ASSERT_TRUE(row2);
  EXPECT_FALSE(row2.value.values[1].has_value());
  EXPECT_EQ(row2.value.values[2], "0");
  ASSERT_EQ(msgs[3].type, 'C');
  auto cc = pp::parse_command_complete(msgs[3].body);
  ASSERT_TRUE(cc);
  EXPECT_EQ(cc.value.tag, "SHOW");
}

TEST(AdminResult, ExtendedProtocolPieces) {
  AdminResult r = sample();
  std::string describe, execute;
  r.write_row_description(describe);
  r.write_execute(execute);
  std::vector<Msg> d = split(describe);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].type, 'T');
  std::vector<Msg> e = split(execute);
  ASSERT_EQ(e.size(), 3u);  // two DataRows and CommandComplete: no RowDescription
  EXPECT_EQ(e[0].type, 'D');
  EXPECT_EQ(e[2].type, 'C');

  AdminResult command;
  command.set_tag("PAUSE");
  std::string nodata;
  command.write_row_description(nodata);
  std::vector<Msg> n = split(nodata);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].type, 'n');
}

TEST(AdminResult, ErrorsAndNotices) {
  std::string out;
  AdminResult::failure("42601", "invalid command 'x', use SHOW HELP;").write_simple(out);
  std::vector<Msg> msgs = split(out);
  ASSERT_EQ(msgs.size(), 1u);
  ASSERT_EQ(msgs[0].type, 'E');
  auto err = pp::parse_error_fields(msgs[0].body);
  ASSERT_TRUE(err);
  EXPECT_EQ(err.value.code, "42601");
  EXPECT_EQ(err.value.severity, "ERROR");
  EXPECT_EQ(err.value.message, "invalid command 'x', use SHOW HELP;");

  AdminResult help;
  help.notice("Console usage", "\tSHOW HELP");
  help.set_tag("SHOW");
  out.clear();
  help.write_simple(out);
  msgs = split(out);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[0].type, 'N');
  auto notice = pp::parse_error_fields(msgs[0].body);
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice.value.message, "Console usage");
  EXPECT_EQ(notice.value.detail, "\tSHOW HELP");
  EXPECT_EQ(msgs[1].type, 'C');
}

TEST(AdminResult, PendingWritesNothingYet) {
  AdminResult p = AdminResult::pending();
  EXPECT_TRUE(p.is_pending());
  EXPECT_FALSE(p.error().has_value());
}

}  // namespace
}  // namespace pgsluice
