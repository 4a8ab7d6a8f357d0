// Rendering of server replies for pollenctl: JSON (machine) and aligned
// tables / "key: value" lines (human).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "node/runtime/resp/reply_reader.h"

namespace pollen::ctl {

// A quoted JSON string with RFC 8259 escapes (bytes >= 0x80 pass through).
std::string JsonString(std::string_view s);

// A reply as a JSON value: integers as numbers, strings as strings, nil as
// null, arrays as arrays.
std::string ToJson(const resp::Reply& r);

// A flat field/value array (POLLEN.STATUS, one member, one filter) as a JSON
// object. Bulk values that are decimal numbers (fpr, fill_ratio, ...) become
// JSON numbers.
std::string FieldsToJson(const resp::Reply& r);

// The same array as (field, text) pairs.
std::vector<std::pair<std::string, std::string>> Fields(const resp::Reply& r);

// Human text of a scalar reply.
std::string Text(const resp::Reply& r);

// Columns padded to the widest cell, two spaces apart.
std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace pollen::ctl
