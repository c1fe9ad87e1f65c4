// See listen_channels.h.
#include "pooler/session_state/listen_channels.h"

#include "pgsluice/protocol/backend.h"
#include "pooler/session_state/params.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

void ListenCapture::note(const pp::SessionStateFinding& finding) {
  if (finding.kind != pp::SessionStateKind::listen) return;
  noted_ = true;
  if (finding.effect != pp::SessionStateEffect::release) return;
  if (finding.detail == "*" || finding.detail.empty()) {
    unlistened_all_ = true;
  } else {
    unlistened_.insert(finding.detail);
  }
}

void ListenCapture::note_discard_all() {
  noted_ = true;
  unlistened_all_ = true;
}

std::string ListenCapture::sync_query(const ChannelSet& client_channels, bool in_block) {
  if (synced_) return {};
  synced_ = true;
  synced_in_block_ = in_block;
  std::string sql;
  for (const std::string& channel : client_channels) {
    if (!sql.empty()) sql += "; ";
    sql += "LISTEN " + quote_identifier(channel);
  }
  return sql;
}

void ListenCapture::on_client_command_complete(std::string_view body) {
  // The tag is a C string: "ROLLBACK" for ROLLBACK, ABORT and a COMMIT that could not commit.
  rolled_back_ = body == std::string_view("ROLLBACK\0", 9);
}

std::string ListenCapture::begin_query() {
  reading_synced_ = synced_;
  reading_synced_in_block_ = synced_in_block_;
  reading_rolled_back_ = rolled_back_;
  synced_in_block_ = rolled_back_ = false;
  reading_unlistened_ = std::move(unlistened_);
  reading_unlistened_all_ = unlistened_all_;
  noted_ = synced_ = unlistened_all_ = false;
  unlistened_.clear();
  awaiting_ = true;
  row_failed_ = answered_ = false;
  rows_.clear();
  return "SELECT pg_catalog.pg_listening_channels(); UNLISTEN *";
}

void ListenCapture::on_row(std::string_view data_row_body) {
  auto row = pp::parse_data_row(data_row_body);
  if (!row || row.value.values.size() != 1 || !row.value.values[0]) {
    row_failed_ = true;
    return;
  }
  rows_.emplace_back(*row.value.values[0]);
}

bool ListenCapture::finish(const ChannelSet& before, ChannelSet& after) {
  awaiting_ = false;
  if (!answered_ || row_failed_) {
    after = before;
    return false;
  }
  ChannelSet result(rows_.begin(), rows_.end());
  if (reading_rolled_back_ && (!reading_synced_ || reading_synced_in_block_)) {
    // Nothing of the transaction stuck (its sync neither): the client keeps what it had.
    after = before;
    rows_.clear();
    return true;
  }
  if (reading_synced_in_block_) {
    // Committed with the sync: exact, but for a savepoint rolled back past the sync.
    for (const std::string& channel : before) {
      if (!reading_unlistened_all_ && !reading_unlistened_.contains(channel))
        result.insert(channel);
    }
  } else if (!reading_synced_ && !reading_unlistened_all_) {
    // The server began without the client's channels: those it kept are the ones it did not
    // UNLISTEN.
    for (const std::string& channel : before) {
      if (!reading_unlistened_.contains(channel)) result.insert(channel);
    }
  }
  after = std::move(result);
  rows_.clear();
  return true;
}

}  // namespace pgsluice
