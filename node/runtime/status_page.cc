#include "node/runtime/status_page.h"

#include <cassert>
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "node/core/printable_name.h"

namespace pollen::runtime {

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

const char* StateName(node::MemberState s) {
  switch (s) {
    case node::MemberState::kAlive: return "alive";
    case node::MemberState::kSuspect: return "suspect";
    case node::MemberState::kDead: return "dead";
    case node::MemberState::kLeft: return "left";
  }
  return "?";
}

double Seconds(node::Duration d) { return std::chrono::duration<double>(d).count(); }

std::string Percent(double ratio) { return absl::StrFormat("%.2f%%", 100 * ratio); }

// A false-positive rate: small numbers stay readable ("0.0123%", "3.1e-07").
std::string Rate(double ratio) {
  if (ratio <= 0) return "0";
  return ratio >= 1e-4 ? absl::StrFormat("%.4f%%", 100 * ratio) : absl::StrFormat("%.2g", ratio);
}

std::string Bytes(double b) {
  if (b >= 1 << 30) return absl::StrFormat("%.1f GiB", b / (1 << 30));
  if (b >= 1 << 20) return absl::StrFormat("%.1f MiB", b / (1 << 20));
  if (b >= 1 << 10) return absl::StrFormat("%.1f KiB", b / (1 << 10));
  return absl::StrFormat("%.0f B", b);
}

std::string Cell(const std::string& text) { return absl::StrCat("<td>", text, "</td>"); }
std::string Name(std::string_view raw) { return EscapeHtml(node::PrintableName(raw)); }

constexpr char kStyle[] =
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin-bottom:1.5em}"
    "th,td{border:1px solid #bbb;padding:.25em .6em;text-align:right}"
    "th:first-child,td:first-child{text-align:left}"
    "th{background:#eee}.alive{color:#070}.suspect{color:#a60}.dead,.left{color:#a00}"
    ".note{color:#666;font-size:.9em}";

void Header(const StatusInput& in, std::string& out) {
  absl::StrAppend(&out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
                  "<meta http-equiv=\"refresh\" content=\"", kRefreshSeconds, "\">",
                  "<title>Pollen ", EscapeHtml(in.node_name), "</title><style>", kStyle, "</style></head><body>\n",
                  "<h1>Pollen node ", EscapeHtml(in.node_name), "</h1>\n<p>version ", EscapeHtml(in.version), " &middot; ",
                  in.ready ? "<span class=\"alive\">ready</span>" : "<span class=\"dead\">not ready</span>",
                  " &middot; reloads every ", kRefreshSeconds, " s &middot; also: <a href=\"/metrics\">/metrics</a></p>\n");
}

void RatesSection(const StatusInput& in, std::string& out) {
  if (in.rates == nullptr) return;
  absl::StrAppend(&out, "<h2>Recent rates</h2>\n");
  const std::optional<RecentRates::Rates> r = in.rates->Over();
  if (!r) {
    absl::StrAppend(&out, "<p class=\"note\">measuring: rates appear from the next reload on</p>\n");
    return;
  }
  absl::StrAppend(&out, "<table><tr><th>over the last</th><th>adds/s</th><th>queries/s</th><th>hit rate</th>",
                  "<th>gossip in/s</th><th>gossip out/s</th></tr><tr>", Cell(absl::StrFormat("%.0f s", r->seconds)),
                  Cell(absl::StrFormat("%.1f", r->adds)), Cell(absl::StrFormat("%.1f", r->queries)),
                  Cell(r->queries > 0 ? Percent(r->hits / r->queries) : "-"), Cell(Bytes(r->bytes_in)),
                  Cell(Bytes(r->bytes_out)), "</tr></table>\n");
}

void MembersSection(const Driver::Collected& n, std::string& out) {
  std::map<std::string, const node::PeerStats*> peers;
  for (const node::PeerStats& p : n.peers) peers[p.name] = &p;
  std::map<std::string, int> by_state;
  for (const node::MemberInfo& m : n.members) ++by_state[StateName(m.state)];
  absl::StrAppend(&out, "<h2>Members</h2>\n<p>");
  for (const char* s : {"alive", "suspect", "dead", "left"}) {
    absl::StrAppend(&out, s, " ", by_state[s], s[0] == 'l' ? "" : " &middot; ");
  }
  absl::StrAppend(&out, "</p>\n<table><tr><th>member</th><th>address</th><th>state</th><th>incarnation</th>",
                  "<th>probe round trip</th><th>data last received</th></tr>\n");
  for (const node::MemberInfo& m : n.members) {
    const auto it = peers.find(m.name);
    const node::PeerStats* p = it == peers.end() ? nullptr : it->second;
    std::string rtt = "-", lag = "-";
    if (p != nullptr && p->probe_rtt) rtt = absl::StrFormat("%.2f ms", 1e3 * Seconds(*p->probe_rtt));
    if (p != nullptr) lag = p->since_data ? absl::StrFormat("%.1f s ago", Seconds(*p->since_data)) : "never";
    if (p == nullptr) lag = "(this node)";
    absl::StrAppend(&out, "<tr>", Cell(Name(m.name)), Cell(EscapeHtml(m.address)), "<td class=\"",
                    StateName(m.state), "\">", StateName(m.state), "</td>", Cell(absl::StrCat(m.incarnation)),
                    Cell(rtt), Cell(lag), "</tr>\n");
  }
  absl::StrAppend(&out, "</table>\n");
}

void FiltersSection(const Driver::Collected& n, std::string& out) {
  absl::StrAppend(&out, "<h2>Filters</h2>\n");
  if (n.filters.empty()) {
    absl::StrAppend(&out, "<p class=\"note\">no filters yet (BF.RESERVE or BF.ADD creates one)</p>\n");
    return;
  }
  absl::StrAppend(&out, "<table><tr><th>filter</th><th>scope</th><th>epoch</th><th>generation</th>",
                  "<th>capacity</th><th>estimated items</th><th>fill</th><th>design FPR</th>",
                  "<th>estimated FPR</th><th>observed FPR</th><th>queries</th><th>memory</th></tr>\n");
  for (const node::FilterInfo& f : n.filters) {
    const node::ObservedFpr observed = node::ObservedFalsePositiveRate(f);
    const std::string scope = f.config.scope == node::Scope::kDigest
                                  ? absl::StrCat("digest of ", Name(f.config.owner))
                                  : std::string(f.config.routed ? "shared, routed" : "shared");
    const size_t rows = std::max<size_t>(1, f.generations.size());
    for (size_t i = 0; i < rows; ++i) {
      absl::StrAppend(&out, "<tr>");
      if (i == 0) {
        const std::string span = absl::StrCat("<td rowspan=\"", rows, "\">");
        absl::StrAppend(&out, span, Name(f.config.name), "</td>", span, scope, "</td>", span, f.epoch, "</td>");
      }
      if (f.generations.empty()) {
        absl::StrAppend(&out, "<td colspan=\"6\">-</td>");
      } else {
        const node::GenerationInfo& g = f.generations[i];
        absl::StrAppend(&out, Cell(absl::StrCat("epoch ", g.epoch, g.layer > 0 ? absl::StrCat(", layer ", g.layer) : "")),
                        Cell(absl::StrCat(g.capacity)), Cell(absl::StrFormat("%.0f", g.estimated_items)),
                        Cell(Percent(g.fill_ratio)), Cell(Rate(f.config.fpr)), Cell(Rate(g.estimated_fpr)));
      }
      if (i == 0) {
        const std::string span = absl::StrCat("<td rowspan=\"", rows, "\">");
        absl::StrAppend(&out, span, Rate(observed.over_negatives), "</td>", span, f.queries, "</td>", span,
                        Bytes(static_cast<double>(f.memory_bytes)), "</td>");
      }
      absl::StrAppend(&out, "</tr>\n");
    }
  }
  absl::StrAppend(&out, "</table>\n<p class=\"note\">design FPR: what the filter was sized for; estimated: from the ",
                  "generation's fill; observed: false positives clients reported (POLLEN.FALSEPOSITIVE) over the "
                  "negatives this node answered, since the filter appeared here.</p>\n");
}

}  // namespace

std::string RenderStatusPage(const StatusInput& in) {
  assert(in.node != nullptr);
  const Driver::Collected& n = *in.node;
  std::string out;
  Header(in, out);
  RatesSection(in, out);
  MembersSection(n, out);
  FiltersSection(n, out);
  const node::NodeCounters& c = n.counters;
  absl::StrAppend(&out, "<h2>Totals since start</h2>\n<table><tr><th>adds</th><th>queries</th><th>hits</th>",
                  "<th>anti-entropy runs</th><th>ranges repaired</th><th>epochs advanced</th></tr><tr>",
                  Cell(absl::StrCat(c.adds)), Cell(absl::StrCat(c.queries)), Cell(absl::StrCat(c.hits)),
                  Cell(absl::StrCat(c.anti_entropy_runs)), Cell(absl::StrCat(c.ranges_repaired)),
                  Cell(absl::StrCat(c.epochs_advanced)), "</tr></table>\n</body></html>\n");
  return out;
}

}  // namespace pollen::runtime
