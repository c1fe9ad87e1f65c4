// Reading a transaction's setting changes back from the server (kept_settings.h).
#include "pooler/session_state/kept_settings.h"

#include "pgsluice/protocol/backend.h"
#include "pooler/base/text.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {

// RESET ALL leaves these (GUC_NO_RESET_ALL); DISCARD ALL resets them as well.
bool reset_all_skips(std::string_view name) {
  return is_role_setting(name);
}

}  // namespace

void SettingsCapture::Notes::add(std::string_view name, bool released,
                                 std::optional<std::string> literal) {
  // Reported parameters come back by ParameterStatus, whatever the transaction's outcome.
  if (name.empty() || !tracked_parameter_name(name).empty()) return;
  for (Item& item : items) {
    if (iequals(item.name, name)) {
      item.released = released;
      item.literal = std::move(literal);
      return;
    }
  }
  items.push_back(
      Item{.name = ascii_lower(name), .released = released, .literal = std::move(literal)});
}

void SettingsCapture::note(const pp::SessionStateFinding& finding,
                           std::optional<std::string> literal) {
  switch (finding.kind) {
    case pp::SessionStateKind::set:
      if (finding.detail == "all" && finding.effect == pp::SessionStateEffect::release) {
        note_reset_all(false);
        return;
      }
      if (std::string_view reported = tracked_parameter_name(finding.detail); !reported.empty()) {
        note_reported(reported, finding.effect == pp::SessionStateEffect::release);
        return;
      }
      pending_.add(finding.detail, finding.effect == pp::SessionStateEffect::release,
                   std::move(literal));
      return;
    case pp::SessionStateKind::set_config:
    case pp::SessionStateKind::role:
      pending_.add(finding.detail, finding.effect == pp::SessionStateEffect::release);
      // Setting or resetting the session authorization resets the role as well (to none): the
      // role is read back with it, or the client's earlier SET ROLE would be applied again.
      if (iequals(finding.detail, kSessionAuthorization)) pending_.add(kRole, true);
      return;
    default:
      return;
  }
}

void SettingsCapture::forget_literals() {
  for (Notes* notes : {&pending_, &reading_}) {
    for (Item& item : notes->items) item.literal.reset();
  }
}

bool SettingsCapture::settle_known(const SetValueCache& known, std::string_view version,
                                   ParameterSet& client_settings, ParameterSet& server_applied) {
  if (awaiting_ || !pending_.any() || pending_.all || pending_.discard_all) return false;
  for (const Item& item : pending_.items) {
    if (item.released || !item.literal || !known.find(version, item.name, *item.literal)) {
      return false;
    }
  }
  // As finish() takes a set's value: the client's and the server's, whatever it is.
  for (const Item& item : pending_.items) {
    const std::string& value = *known.find(version, item.name, *item.literal);
    client_settings.set(item.name, value);
    server_applied.set(item.name, value);
  }
  pending_ = Notes();
  return true;
}

void SettingsCapture::note_reported(std::string_view name, bool released) {
  for (auto& [n, r] : reported_) {
    if (n == name) {
      r = released;
      return;
    }
  }
  reported_.emplace_back(name, released);
}

std::vector<std::string> SettingsCapture::take_reported_resets(const ParameterSet& startup) {
  std::vector<std::string> names;
  for (const auto& [name, value] : startup.items()) {
    bool released = reported_all_;
    for (const auto& [n, r] : reported_) {
      if (iequals(n, name)) released = r;
    }
    if (released) names.push_back(name);
  }
  reported_.clear();
  reported_all_ = false;
  return names;
}

void SettingsCapture::note_reset_all(bool discard_all) {
  // Every reported parameter is reset too: a SET of one after it is noted after it.
  reported_.clear();
  reported_all_ = true;
  for (Item& item : pending_.items) {
    if (discard_all || !reset_all_skips(item.name)) item.released = true;
  }
  pending_.all = true;
  if (discard_all) {
    pending_.discard_all = true;
    pending_.add(kRole, true);
    pending_.add(kSessionAuthorization, true);
  }
}

void SettingsCapture::mark_for_reset(DirtyState& dirty) const {
  auto mark = [&dirty](pp::SessionStateKind kind, std::string_view name) {
    pp::SessionStateFinding f;
    f.kind = kind;
    f.detail = std::string(name);
    dirty.add(f);
  };
  for (const Notes* notes : {&pending_, &reading_}) {
    if (notes->discard_all) dirty.add_unknown();
    if (notes->all) mark(pp::SessionStateKind::set, "all");
    for (const Item& item : notes->items) {
      mark(reset_all_skips(item.name) ? pp::SessionStateKind::role : pp::SessionStateKind::set,
           item.name);
    }
  }
}

std::string SettingsCapture::begin_query(const ParameterSet& client_settings,
                                         const ParameterSet& server_applied) {
  reading_ = std::move(pending_);
  pending_ = Notes();
  row_.reset();
  if (reading_.all) {
    // Names noted after the RESET ALL keep their own state; the rest were reset by it.
    auto add_known = [&](const ParameterSet& set) {
      for (const auto& [name, value] : set.items()) {
        if (!reading_.discard_all && reset_all_skips(name)) continue;
        bool noted = false;
        for (const Item& item : reading_.items) noted = noted || iequals(item.name, name);
        if (!noted) reading_.add(name, true);
      }
    };
    add_known(client_settings);
    add_known(server_applied);
  }
  if (reading_.items.empty()) {
    reading_ = Notes();
    return {};
  }
  // current_setting only: pg_settings (reset_val) would tell the server's default too, but it
  // builds every setting's row, which made a SET-per-transaction client 5 times slower; the
  // pooler knows what it applied before the transaction, which is enough (finish()).
  std::string query;
  for (const Item& item : reading_.items) {
    query += query.empty() ? "SELECT " : ", ";
    query += "pg_catalog.current_setting(" + quote_literal(item.name) + ", true)";
  }
  awaiting_ = true;
  return query;
}

void SettingsCapture::on_row(std::string_view data_row_body) {
  if (!awaiting_) return;
  auto row = pp::parse_data_row(data_row_body);
  if (!row || row.value.values.size() != reading_.items.size()) return;
  std::vector<std::optional<std::string>> values;
  values.reserve(row.value.values.size());
  for (const auto& v : row.value.values) {
    values.push_back(v ? std::optional<std::string>(std::string(*v)) : std::nullopt);
  }
  row_ = std::move(values);
}

bool SettingsCapture::finish(const ParameterSet& startup, const std::string& login_user,
                             ParameterSet& client_settings, ParameterSet& server_applied,
                             SetValueCache* learned, std::string_view version) {
  const bool answered = row_.has_value();
  if (answered) {
    const size_t n = reading_.items.size();
    for (size_t i = 0; i < n; ++i) {
      const Item& item = reading_.items[i];
      const std::optional<std::string>& value = (*row_)[i];
      if (!value) {  // a placeholder that is gone, or a name the server does not know
        client_settings.erase(item.name);
        server_applied.erase(item.name);
        continue;
      }
      if (learned != nullptr && item.literal && !item.released) {
        learned->learn(version, item.name, *item.literal, *value);
      }
      // Whether the server is at its own default for the name. A reset whose value is not what
      // the pooler had applied stuck (a rolled-back or failed one leaves that value); with
      // nothing applied the server was and is at its default. A set: its value, whatever it is.
      bool at_default = false;
      if (item.name == kRole) {
        at_default = *value == "none";
      } else if (item.name == kSessionAuthorization) {
        at_default = *value == login_user;
      } else if (item.released) {
        const std::string* before = server_applied.get(item.name);
        at_default = before == nullptr || *before != *value;
      }
      if (!at_default) {
        client_settings.set(item.name, *value);
        server_applied.set(item.name, *value);
        continue;
      }
      // The server is at its own default: nothing of the pooler's applies there any more. The
      // client has its startup value after a reset (as on a direct connection, where the
      // startup packet sets the defaults), and what it set otherwise.
      server_applied.erase(item.name);
      const std::string* own = startup.get(item.name);
      if (own == nullptr) {
        client_settings.erase(item.name);
      } else {
        client_settings.set(item.name, item.released ? *own : *value);
      }
    }
  }
  reading_ = Notes();
  awaiting_ = false;
  row_.reset();
  return answered;
}

}  // namespace pgsluice
