#include "node/runtime/resp/bloom_settings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>


namespace pollen::resp {
namespace {

// RedisBloom's ranges (src/config.c): the rate open at both ends, the
// integers closed; a rate above 0.25 is stored as 0.25 (BF_ERROR_RATE_CAP).
constexpr double kMaxErrorRate = 0.25;
constexpr int64_t kMaxInitialSize = int64_t{1} << 30;
constexpr int64_t kMaxExpansionFactor = 32768;

// Whole-string parses, as Redis' string-to-number helpers: no spaces, no
// trailing bytes, no "+".
bool ParseDouble(std::string_view v, double* out) {
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  return ec == std::errc() && end == v.data() + v.size() && !v.empty() && std::isfinite(*out);
}

bool ParseInt(std::string_view v, int64_t* out) {
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  return ec == std::errc() && end == v.data() + v.size() && !v.empty();
}

absl::Status InvalidValue(std::string_view name) {
  return absl::InvalidArgumentError("Invalid value for `" + std::string(name) + "`");
}

absl::Status SetInteger(std::string_view name, std::string_view value, int64_t min, int64_t max, int64_t* out) {
  int64_t v = 0;
  if (!ParseInt(value, &v)) return InvalidValue(name);
  if (v < min || v > max) {
    return absl::InvalidArgumentError("Value for `" + std::string(name) + "` must be in the range [" +
                                      std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  *out = v;
  return absl::OkStatus();
}

std::string FormatDouble(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

}  // namespace

absl::Status SetBloomSetting(std::string_view name, std::string_view value, BloomSettings* s) {
  if (name == "bf-error-rate") {
    double rate = 0;
    if (!ParseDouble(value, &rate)) return InvalidValue(name);
    if (!(rate > 0 && rate < 1)) {
      return absl::InvalidArgumentError("Value for `" + std::string(name) + "` must be in the range (0.000000, 1.000000)");
    }
    s->error_rate = std::min(rate, kMaxErrorRate);
    return absl::OkStatus();
  }
  if (name == "bf-initial-size") {
    int64_t v = 0;
    if (absl::Status st = SetInteger(name, value, 1, kMaxInitialSize, &v); !st.ok()) return st;
    s->initial_size = static_cast<uint64_t>(v);
    return absl::OkStatus();
  }
  if (name == "bf-expansion-factor") {
    int64_t v = 0;
    if (absl::Status st = SetInteger(name, value, 0, kMaxExpansionFactor, &v); !st.ok()) return st;
    s->expansion = static_cast<uint32_t>(v);
    return absl::OkStatus();
  }
  if (name == "resp3-replies") {
    if (value == "redisbloom-2.4") {
      s->resp3_replies = Resp3Replies::kRedisBloom24;
    } else if (value == "redis-8") {
      s->resp3_replies = Resp3Replies::kRedis8;
    } else {
      return absl::InvalidArgumentError("argument(s) must be one of the following: redisbloom-2.4, redis-8");
    }
    return absl::OkStatus();
  }
  return absl::NotFoundError(std::string(name));
}

std::optional<std::string> BloomSettingValue(std::string_view name, const BloomSettings& s) {
  if (name == "bf-error-rate") return FormatDouble(s.error_rate);
  if (name == "bf-initial-size") return std::to_string(s.initial_size);
  if (name == "bf-expansion-factor") return std::to_string(s.expansion);
  if (name == "resp3-replies") {
    return std::string(s.resp3_replies == Resp3Replies::kRedis8 ? "redis-8" : "redisbloom-2.4");
  }
  return std::nullopt;
}

void LiveBloomSettings::Reset(const BloomSettings& s) {
  std::lock_guard lock(mu_);
  settings_ = s;
  redis8_resp3_.store(s.resp3_replies == Resp3Replies::kRedis8, std::memory_order_relaxed);
}

BloomSettings LiveBloomSettings::Get() const {
  std::lock_guard lock(mu_);
  return settings_;
}

absl::Status LiveBloomSettings::Set(std::span<const std::pair<std::string_view, std::string_view>> pairs,
                                    size_t* failed) {
  std::lock_guard lock(mu_);
  BloomSettings next = settings_;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (absl::Status s = SetBloomSetting(pairs[i].first, pairs[i].second, &next); !s.ok()) {
      *failed = i;
      return s;
    }
  }
  settings_ = next;
  redis8_resp3_.store(next.resp3_replies == Resp3Replies::kRedis8, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace pollen::resp
