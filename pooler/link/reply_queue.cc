// ReplyQueue's replies from the server; see reply_queue.h.
#include "pooler/link/reply_queue.h"

#include <bit>

namespace pgsluice {

namespace be = pgsluice::protocol::backend;

protocol::TransactionStatus ReplyQueue::status_of(const protocol::Message& ready) {
  auto rfq = protocol::parse_ready_for_query(ready.body);
  return rfq ? rfq.value.transaction_status() : protocol::TransactionStatus::failed;
}

void ReplyQueue::on_client_ready(protocol::TransactionStatus status) {
  tx_status_ = status;
  if (client_ready_owed_ > 0) {
    --client_ready_owed_;
    owed_syncs_ >>= 1;
  }
  // A ReadyForQuery ends any COPY (an error inside one, or a CopyFail the server answered).
  copy_ = Copy::none;
}

bool ReplyQueue::on_internal_ready(protocol::TransactionStatus status) {
  tx_status_ = status;
  if (internal_.empty()) return false;
  internal_.erase(internal_.begin());
  return true;
}

void ReplyQueue::copy_in_started() {
  // Owed beyond the tracked ones count as no Sync: at worst the server is kept, as before.
  client_ready_owed_ -= static_cast<uint32_t>(std::popcount(owed_syncs_));
  owed_syncs_ = 0;
}

void ReplyQueue::on_copy_reply(char type) {
  // The two directions are kept apart, as the two sides end them apart (CopyDone from the
  // client ends COPY IN, from the server COPY OUT).
  const bool in = copy_in();
  const bool out = copy_out();
  switch (type) {
    case be::kCopyInResponse:
      copy_ = out ? Copy::both : Copy::in;
      copy_in_started();
      return;
    case be::kCopyOutResponse:
      copy_ = in ? Copy::both : Copy::out;
      return;
    case be::kCopyBothResponse:
      copy_ = Copy::both;
      return;
    case be::kCopyDone:
      copy_ = in ? Copy::in : Copy::none;
      return;
    default:
      return;
  }
}

}  // namespace pgsluice
