// Snapshot files: one file holds one filter's parameters and live generations.
//
// Format v3 (all integers little-endian):
//   magic "PLNSNAP\0" (8) | version u32 | header_len u32
//   header: name_len u16, name, filter_id u64, blocks u64, k u32,
//           generations u32, hash_scheme u32, key_id u64,
//           expansion u32, capacity u64, fpr f64 (IEEE bits), sub_count u32
//           (name_len 0xFFFF: the name is 0xFFFF bytes or longer, and its
//           length is header_len minus the other header fields)
//   per sub-filter, by ascending (epoch, layer), layers of an epoch from 0:
//     epoch u64, layer u32, then LayerShape(layer).blocks * 8 words u64
//   trailer: CRC-32C of every byte before it, u32 (crdt/crc32c.h says why
//            and what it detects)
// Version 2 still loads: the same layout, its trailer a BLAKE2b-256 of every
// byte before it (32 bytes). BLAKE2b took 4.2 s of a 20 s restart at 4 GiB;
// CRC-32C takes 0.5 s (docs/web-scale.md, "Restart"). Version 1 (before
// scaling filters) still loads too: no expansion, capacity or fpr in the
// header and no layer per entry (every entry is a layer 0), BLAKE2b trailer.
// No key and no secret is ever written: the reader re-derives keys from its own
// secret and checks key_id.
//
// Writing goes to "<path>.tmp", fsyncs it, renames it over <path> and fsyncs the
// directory. Reading verifies size, magic, version, checksum and parameters
// before building anything, so a bad file yields an error and no filter.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/generations.h"

namespace pollen::crdt {

inline constexpr uint32_t kSnapshotVersion = 3;

// `body` (a snapshot without its trailer) followed by the trailer its
// preamble's version calls for: for tests and fuzz targets that edit a
// snapshot, and for writing an older version's file.
std::string SealSnapshot(std::string body);

// Serializes to bytes / parses bytes (the file functions wrap these).
// EncodeSnapshot returns `prefix` followed by the snapshot, built in one
// buffer: a caller that frames the snapshot (Node::ExportSnapshots) holds one
// copy of the filter, not two. Measured with tests/soak/soak.sh (a 50M-key
// filter, 112 MiB resident): snapshot peaks of 300 MiB with a separate
// concatenation, 208 MiB without.
std::string EncodeSnapshot(const GenerationSet& set, std::string prefix = {});

// The same bytes (without a prefix) handed to `sink` in pieces of at most
// `piece_bytes` (at least 4 KiB), read from the live sub-filters as it goes:
// the whole snapshot is never in memory, only one piece. Sub-filters must be
// the set's live ones in ascending slot order (GenerationSet::Sub of each of
// slots()); holding them keeps them alive if the set drops them meanwhile.
// Adds that run concurrently may or may not be in the output: since a filter
// only grows, what is written is at least the state when the call began
// (Persistence relies on that, persistence.h). Stops at the first error the
// sink returns, and returns it.
using SnapshotSink = std::function<absl::Status(std::string_view)>;
absl::Status StreamSnapshot(const FilterParams& params, std::span<const std::shared_ptr<const SubFilter>> subs,
                            size_t piece_bytes, const SnapshotSink& sink);

// The same bytes (after `prefix`) from raw contents: `subs` are (slot, words) in ascending
// slot order, each with its layer's LayerShape(...).blocks * kWordsPerBlock
// words (asserted). For assembling a filter that is not live (BF.LOADCHUNK); needs
// no secret, as a snapshot holds no key.
std::string EncodeSnapshotWords(const FilterParams& params,
                                std::span<const std::pair<uint64_t, std::span<const uint64_t>>> subs,
                                std::string prefix = {});
// `expected` (if non-null) must equal the file's parameters.
absl::StatusOr<std::unique_ptr<GenerationSet>> DecodeSnapshot(std::string_view bytes,
                                                              const ClusterSecret& secret,
                                                              const FilterParams* expected);

// A validated snapshot (magic, checksum, version, parameters, every
// sub-filter's place and size), its payloads views into the bytes parsed.
struct ParsedSnapshot {
  FilterParams params;
  std::vector<uint64_t> slots;             // ascending
  std::vector<std::string_view> payloads;  // per slot: its words, little-endian
  std::map<uint64_t, uint32_t> layers;     // epoch -> layer count
  uint64_t newest = 0;                     // the newest epoch
};
absl::StatusOr<ParsedSnapshot> ParseSnapshot(std::string_view bytes, const ClusterSecret& secret,
                                             const FilterParams* expected);
// A new set holding a parsed snapshot (DecodeSnapshot is Parse + Build).
absl::StatusOr<std::unique_ptr<GenerationSet>> BuildSnapshot(const ParsedSnapshot& parsed,
                                                             const ClusterSecret& secret);
// ORs a parsed snapshot into a live set of the same parameters, word by
// word in bounded chunks (no second copy of the filter, as DecodeSnapshot
// makes); sub-filters not live in `into` are skipped. The caller opens the
// snapshot's epochs and layers first (GenerationSet::Advance and Grow).
// Sets (*set_bits)[slot], if set_bits is non-null, to the bits each loaded
// sub-filter holds after (a count made on the way, not another scan).
absl::Status OrSnapshotInto(const ParsedSnapshot& parsed, GenerationSet& into,
                            std::map<uint64_t, uint64_t>* set_bits = nullptr);

// Recovery's one pass over a snapshot file (format v3), for sub-filters that
// hold nothing yet. ParseSnapshotUnverified checks everything but the
// checksum; OrSnapshotIntoEmpty then ORs each piece of `bytes` in as it
// extends the checksum over it, so the file is read once and the piece is
// still in the cache for the OR. If the checksum fails at the end, every
// sub-filter it wrote is cleared back to empty and the error is DataLoss, as
// ParseSnapshot's: nothing is half-loaded. Preconditions (the caller's; Node
// checks them): `parsed` comes from `bytes`, every slot is live in `into`
// and has no bit set, and no other thread uses those sub-filters until this
// returns. Measured on a 4 GiB restart: docs/web-scale.md, "Restart".
// `consumed`, if set, is called as the pass goes with n: the pass will not
// read bytes [0, n) again, so a caller that mapped the file can drop those
// pages (recovery does, so that a restart does not hold the file and the
// filter resident at once).
absl::StatusOr<ParsedSnapshot> ParseSnapshotUnverified(std::string_view bytes, const ClusterSecret& secret,
                                                       const FilterParams* expected, uint32_t* version);
absl::Status OrSnapshotIntoEmpty(std::string_view bytes, const ParsedSnapshot& parsed, GenerationSet& into,
                                 std::map<uint64_t, uint64_t>* set_bits,
                                 const std::function<void(size_t)>& consumed = nullptr);
// The checksum of a file ParseSnapshotUnverified accepted.
absl::Status VerifySnapshotChecksum(std::string_view bytes);

absl::Status WriteSnapshotFile(const GenerationSet& set, const std::string& path);
absl::StatusOr<std::unique_ptr<GenerationSet>> ReadSnapshotFile(const std::string& path,
                                                                const ClusterSecret& secret,
                                                                const FilterParams* expected);

// Atomic file replacement used by snapshots and other state files: writes
// `contents` to path + ".tmp", fsyncs, renames, fsyncs the directory.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);
// The same, with the contents produced piece by piece: `fill` calls its
// argument for each piece (which writes it) and returns its first error; on
// any error the temporary file is removed and `path` is untouched. Returns
// the bytes written in *bytes if non-null.
absl::Status WriteFileAtomically(const std::string& path, const std::function<absl::Status(const SnapshotSink&)>& fill,
                                 uint64_t* bytes = nullptr);

}  // namespace pollen::crdt
