// See relay_registry.h.
#include "pooler/core/relay_registry.h"

#include <algorithm>

#include "pooler/session_state/params.h"

namespace pgsluice {

bool RelayRegistry::ready(const std::string& channel) const {
  return listening_.contains(channel) && confirmed_.contains(channel);
}

bool RelayRegistry::update(RelaySubscriber who, const ChannelSet& added,
                           const ChannelSet& removed) {
  for (const std::string& channel : removed) {
    auto it = by_channel_.find(channel);
    if (it == by_channel_.end()) continue;
    it->second.erase(who);
    if (it->second.empty()) by_channel_.erase(it);
  }
  ChannelSet needs;
  for (const std::string& channel : added) {
    by_channel_[channel].insert(who);
    if (!ready(channel)) needs.insert(channel);
  }
  if (needs.empty()) return true;
  pending_.push_back(Pending{.who = who, .needs = std::move(needs)});
  return false;
}

void RelayRegistry::remove(RelaySubscriber who) {
  for (auto it = by_channel_.begin(); it != by_channel_.end();) {
    it->second.erase(who);
    it = it->second.empty() ? by_channel_.erase(it) : std::next(it);
  }
  std::erase_if(pending_, [&](const Pending& p) { return p.who == who; });
}

std::string RelayRegistry::next_listener_query() {
  if (in_flight_) return {};
  std::string sql;
  auto add = [&sql](std::string_view verb, const std::string& channel) {
    if (!sql.empty()) sql += "; ";
    sql.append(verb).append(" ").append(quote_identifier(channel));
  };
  in_flight_listen_.clear();
  in_flight_unlisten_.clear();
  for (const auto& [channel, who] : by_channel_) {
    if (!listening_.contains(channel)) {
      add("LISTEN", channel);
      in_flight_listen_.insert(channel);
    }
  }
  for (const std::string& channel : listening_) {
    if (!by_channel_.contains(channel)) {
      add("UNLISTEN", channel);
      in_flight_unlisten_.insert(channel);
    }
  }
  if (sql.empty()) return sql;
  for (const std::string& channel : in_flight_listen_) listening_.insert(channel);
  for (const std::string& channel : in_flight_unlisten_) listening_.erase(channel);
  in_flight_ = true;
  return sql;
}

std::vector<RelaySubscriber> RelayRegistry::on_listener_query_done() {
  in_flight_ = false;
  for (const std::string& channel : in_flight_listen_) confirmed_.insert(channel);
  for (const std::string& channel : in_flight_unlisten_) confirmed_.erase(channel);
  in_flight_listen_.clear();
  in_flight_unlisten_.clear();
  std::vector<RelaySubscriber> due;
  std::erase_if(pending_, [&](Pending& p) {
    std::erase_if(p.needs, [&](const std::string& channel) { return ready(channel); });
    if (!p.needs.empty()) return false;
    due.push_back(p.who);
    return true;
  });
  return due;
}

void RelayRegistry::on_listener_lost() {
  listening_.clear();
  confirmed_.clear();
  in_flight_ = false;
  in_flight_listen_.clear();
  in_flight_unlisten_.clear();
}

std::vector<RelaySubscriber> RelayRegistry::take_pending() {
  std::vector<RelaySubscriber> due;
  for (const Pending& p : pending_) due.push_back(p.who);
  pending_.clear();
  return due;
}

std::vector<RelaySubscriber> RelayRegistry::subscribers(std::string_view channel) const {
  auto it = by_channel_.find(channel);
  if (it == by_channel_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

std::vector<RelaySubscriber> RelayRegistry::all_subscribers() const {
  std::set<RelaySubscriber> all;
  for (const auto& [channel, who] : by_channel_) all.insert(who.begin(), who.end());
  return {all.begin(), all.end()};
}

}  // namespace pgsluice
