// The headers every test program parses, compiled once per build and reused
// by all of them (tests/CMakeLists.txt: pollen_test_pch). Only third-party and
// standard headers: Pollen's own headers change often, and a test must still
// include everything it uses itself.
//
// Why: a test file spent 6-7 s of its 10-34 s compile parsing headers
// (g++ 12 -fsyntax-only, 2026-11-29): gmock 3.2 s, Abseil's flat_hash_map
// 3.0 s, protobuf's message.h 2.0 s, Boost.Asio's io_context and tcp ~3 s.
// There are about 80 test files, compiled again in each CI stage.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include <google/protobuf/arena.h>
#include <google/protobuf/generated_message_reflection.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <google/protobuf/repeated_field.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
