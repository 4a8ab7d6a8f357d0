#include "ops/pollenctl/output.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "node/core/printable_name.h"

namespace pollen::ctl {
namespace {

bool LooksNumeric(std::string_view s) {
  if (s.empty() || s.size() > 40) return false;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(v);
}

}  // namespace

// Valid UTF-8 passes through; a byte that is not part of valid UTF-8 (filter
// names are binary-safe) is written as the code point of the same value,
// \u0080..\u00ff, so the output is always valid JSON.
std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const size_t n = node::Utf8SequenceLength(s, i); n > 0) {
        out.append(s.substr(i, n));
        i += n - 1;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

std::string ToJson(const resp::Reply& r) {
  using T = resp::Reply::Type;
  switch (r.type) {
    case T::kInteger: return std::to_string(r.integer);
    case T::kNull: return "null";
    case T::kSimple:
    case T::kBulk: return JsonString(r.str);
    case T::kError: return "{\"error\":" + JsonString(r.str) + "}";
    case T::kVerbatim: return JsonString(r.str);
    case T::kBool: return r.integer != 0 ? "true" : "false";
    // RESP3 doubles and big numbers as strings: exact, and valid JSON even
    // for "inf", "nan" or 40 digits.
    case T::kDouble:
    case T::kBigNumber: return JsonString(r.str);
    case T::kArray:
    case T::kSet:
    case T::kPush: {
      std::string s = "[";
      for (size_t i = 0; i < r.elements.size(); ++i) {
        if (i) s += ",";
        s += ToJson(r.elements[i]);
      }
      return s + "]";
    }
    case T::kMap: {  // elements alternate key, value; a key that is not a string is written as its JSON
      std::string s = "{";
      for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
        if (i) s += ",";
        const resp::Reply& k = r.elements[i];
        const bool text = k.type == T::kSimple || k.type == T::kBulk || k.type == T::kVerbatim;
        s += JsonString(text ? k.str : ToJson(k)) + ":" + ToJson(r.elements[i + 1]);
      }
      return s + "}";
    }
  }
  return "null";
}

std::string FieldsToJson(const resp::Reply& r) {
  std::string s = "{";
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (i) s += ",";
    s += JsonString(r.elements[i].str) + ":";
    const resp::Reply& v = r.elements[i + 1];
    const bool number_field = v.type == resp::Reply::Type::kBulk && LooksNumeric(v.str) &&
                              r.elements[i].str != "name" && r.elements[i].str != "owner" &&
                              r.elements[i].str != "node" && r.elements[i].str != "address" &&
                              r.elements[i].str != "version";
    s += number_field ? v.str : ToJson(v);
  }
  return s + "}";
}

std::vector<std::pair<std::string, std::string>> Fields(const resp::Reply& r) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) out.emplace_back(r.elements[i].str, Text(r.elements[i + 1]));
  return out;
}

std::string Text(const resp::Reply& r) {
  using T = resp::Reply::Type;
  switch (r.type) {
    case T::kInteger: return std::to_string(r.integer);
    case T::kNull: return "-";
    case T::kSimple:
    case T::kBulk:
    case T::kError: return r.str;
    default: return r.DebugString();  // arrays, and RESP3 types (pollenctl speaks RESP2; shown, not dropped)
  }
}

std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      out += cell;
      if (c + 1 < header.size()) out += std::string(width[c] - cell.size() + 2, ' ');
    }
    out += "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

}  // namespace pollen::ctl
