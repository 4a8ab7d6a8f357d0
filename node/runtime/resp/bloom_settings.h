// BloomSettings: the settings Redis 8 gives its built-in Bloom filters, and
// how Pollen answers RESP3 clients.
//
//   bf-error-rate        error rate of a filter BF.ADD / BF.MADD / BF.INSERT
//                        create, and BF.INSERT's default ERROR
//   bf-initial-size      capacity of such a filter, and BF.INSERT's default
//                        CAPACITY
//   bf-expansion-factor  EXPANSION of BF.RESERVE, BF.INSERT and created
//                        filters when none is given; 0 makes them NONSCALING
//   resp3-replies        redisbloom-2.4: integers and flat arrays under RESP3
//                        too, as RedisBloom 2.4 (the default); redis-8: RESP3
//                        booleans for BF.ADD / BF.MADD / BF.EXISTS /
//                        BF.MEXISTS / BF.INSERT and a map for BF.INFO, as
//                        Redis 8. RESP2 replies are the same either way.
//
// One parser serves the config file, the environment, flags and CONFIG SET,
// so each accepts exactly the same values. The ranges and messages are
// Redis 8's (RedisBloom's src/config.c); Pollen's default bf-initial-size is
// its own (1,000,000, not 100: see node/runtime/resp/README.md).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"

namespace pollen::resp {

enum class Resp3Replies : uint8_t { kRedisBloom24, kRedis8 };

struct BloomSettings {
  double error_rate = 0.01;           // (0, 1); above 0.25 taken as 0.25, as RedisBloom
  uint64_t initial_size = 1'000'000;  // [1, 2^30]
  uint32_t expansion = 2;             // [0, 32768]; 0 = NONSCALING
  Resp3Replies resp3_replies = Resp3Replies::kRedisBloom24;
};

// Every name above, in that order (CONFIG GET's order).
inline constexpr std::array<std::string_view, 4> kBloomSettingNames = {
    "bf-error-rate", "bf-initial-size", "bf-expansion-factor", "resp3-replies"};

// Sets `name` (lower case, as listed) from `value`. NotFound for another
// name; InvalidArgument, with Redis 8's message and *s unchanged, for a bad
// value.
absl::Status SetBloomSetting(std::string_view name, std::string_view value, BloomSettings* s);

// The value of `name` as CONFIG GET shows it; nullopt for another name.
std::optional<std::string> BloomSettingValue(std::string_view name, const BloomSettings& s);

// The settings of a running server: CONFIG SET changes them on one RESP
// thread while the others read them.
class LiveBloomSettings {
 public:
  void Reset(const BloomSettings& s);
  BloomSettings Get() const;
  // Read on every RESP3 reply to an add or a test: an atomic, no lock.
  bool redis8_resp3() const { return redis8_resp3_.load(std::memory_order_relaxed); }
  // Applies every (name, value) pair or none (Redis 7's CONFIG SET). On an
  // error (SetBloomSetting's), *failed is the index of the pair at fault.
  absl::Status Set(std::span<const std::pair<std::string_view, std::string_view>> pairs, size_t* failed);

 private:
  mutable std::mutex mu_;
  BloomSettings settings_;
  std::atomic<bool> redis8_resp3_{false};
};

}  // namespace pollen::resp
