#include "protocol/seal.h"

#include <sodium.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pollen::protocol {
namespace {

static_assert(crypto_aead_xchacha20poly1305_ietf_KEYBYTES == 32);
static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == 24);
static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == kSealTagBytes);
static_assert(crypto_kdf_CONTEXTBYTES == 8);

constexpr char kGossipContext[crypto_kdf_CONTEXTBYTES + 1] = "PlnGossp";
constexpr uint64_t kGossipSubkeyId = 1;
constexpr char kKeyIdLabel[] = "pollen gossip key id v1";

void StoreLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "pollen seal: invariant violated: %s\n", what);
    std::abort();
  }
}

void BuildNonce(uint64_t sender, uint64_t counter, uint8_t nonce[24]) {
  StoreLe64(nonce, sender);
  StoreLe64(nonce + 8, counter);
  std::fill(nonce + 16, nonce + 24, uint8_t{0});
}

// Associated data: header bytes then the label (on the stack: no allocation
// per frame). `label` is at most kMaxLabelBytes (checked by the callers).
struct Ad {
  std::array<uint8_t, kFrameHeaderBytes + kMaxLabelBytes> bytes;
  size_t size = 0;
};
Ad BuildAd(const uint8_t* header, size_t header_bytes, std::string_view label) {
  assert(header_bytes <= kFrameHeaderBytes);
  Ad ad;
  std::copy(header, header + header_bytes, ad.bytes.begin());
  std::copy(label.begin(), label.end(), ad.bytes.begin() + header_bytes);
  ad.size = header_bytes + label.size();
  return ad;
}

constexpr size_t kMaxCounterBytes = 10;  // LEB128 of a u64
constexpr size_t kCompactFixedBytes = 1 + 1 + 8;

// The compact header of (key id, sender, counter) into `out` (at least
// kFrameHeaderBytes); returns its length.
size_t StoreCompactHeader(uint64_t key_id, uint64_t sender, uint64_t counter, uint8_t* out) {
  out[0] = kCompactVersion;
  out[1] = static_cast<uint8_t>(key_id);
  StoreLe64(out + 2, sender);
  size_t n = kCompactFixedBytes;
  do {
    const uint8_t low = counter & 0x7f;
    counter >>= 7;
    out[n++] = static_cast<uint8_t>(low | (counter != 0 ? 0x80 : 0));
  } while (counter != 0);
  assert(n <= kFrameHeaderBytes);
  return n;
}

// Reads a minimal LEB128 u64 from [p, end); its length, or 0 if it is
// truncated, longer than kMaxCounterBytes, overflows or is not minimal.
size_t LoadCounter(const uint8_t* p, const uint8_t* end, uint64_t* counter) {
  uint64_t v = 0;
  for (size_t i = 0; i < kMaxCounterBytes && p + i < end; ++i) {
    const uint64_t bits = p[i] & 0x7f;
    if (i == kMaxCounterBytes - 1 && bits > 1) return 0;  // past 64 bits
    v |= bits << (7 * i);
    if ((p[i] & 0x80) == 0) {
      if (i > 0 && p[i] == 0) return 0;  // a zero last byte: not minimal
      *counter = v;
      return i + 1;
    }
  }
  return 0;
}

OpenError Fail(RejectReason reason, std::string_view detail) {
  std::string message(RejectReasonName(reason));
  message.append(": ").append(detail);
  return OpenError{reason, std::move(message)};
}

}  // namespace

std::string_view RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kMalformed: return "malformed";
    case RejectReason::kOversize: return "oversize";
    case RejectReason::kVersion: return "version";
    case RejectReason::kUnknownKey: return "unknown_key";
    case RejectReason::kAuth: return "auth";
    case RejectReason::kReplay: return "replay";
  }
  return "unknown";
}

GossipKey DeriveGossipKey(const crdt::ClusterSecret& secret) {
  crdt::EnsureSodiumInitialized();
  GossipKey key;
  crypto_kdf_derive_from_key(key.data(), key.size(), kGossipSubkeyId, kGossipContext, secret.bytes.data());
  return key;
}

// ---------------------------------------------------------------- Keyring

Keyring::Keyring(const GossipKey& primary) {
  primary_ = IdOf(primary);
  keys_.emplace(primary_, primary);
}

Keyring::~Keyring() {
  for (auto& [id, key] : keys_) sodium_memzero(key.data(), key.size());
}

uint64_t Keyring::IdOf(const GossipKey& key) {
  crdt::EnsureSodiumInitialized();
  uint8_t out[16];
  crypto_generichash(out, sizeof out, reinterpret_cast<const uint8_t*>(kKeyIdLabel), sizeof kKeyIdLabel - 1,
                     key.data(), key.size());
  return LoadLe64(out);
}

absl::StatusOr<uint64_t> Keyring::Install(const GossipKey& key) {
  const uint64_t id = IdOf(key);
  if (keys_.count(id) != 0) return id;
  if (keys_.size() >= kMaxKeys) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ERR keyring full (", kMaxKeys, " keys): remove a key before installing another"));
  }
  keys_.emplace(id, key);
  return id;
}

absl::Status Keyring::Use(uint64_t key_id) {
  if (keys_.count(key_id) == 0) return absl::NotFoundError(absl::StrCat("ERR no such key ", key_id));
  primary_ = key_id;
  return absl::OkStatus();
}

absl::Status Keyring::Remove(uint64_t key_id) {
  auto it = keys_.find(key_id);
  if (it == keys_.end()) return absl::NotFoundError(absl::StrCat("ERR no such key ", key_id));
  if (key_id == primary_) {
    return absl::FailedPreconditionError("ERR cannot remove the primary key: use another key first");
  }
  sodium_memzero(it->second.data(), it->second.size());
  keys_.erase(it);
  return absl::OkStatus();
}

std::vector<uint64_t> Keyring::ids() const {
  std::vector<uint64_t> out;
  out.reserve(keys_.size());
  out.push_back(primary_);
  for (const auto& [id, key] : keys_) {
    if (id != primary_) out.push_back(id);
  }
  return out;
}

size_t Keyring::IdsWithHint(uint8_t hint, std::array<uint64_t, kMaxKeys>* out) const {
  size_t n = 0;
  for (const auto& [id, key] : keys_) {
    if (static_cast<uint8_t>(id) == hint) (*out)[n++] = id;
  }
  return n;
}

const GossipKey* Keyring::Find(uint64_t key_id) const {
  auto it = keys_.find(key_id);
  return it == keys_.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------- Seal / Open

std::string Seal(const Keyring& keys, std::string_view label, uint64_t sender, uint64_t counter,
                 std::string_view plaintext, SealForm form) {
  crdt::EnsureSodiumInitialized();
  Check(label.size() <= kMaxLabelBytes, "label too long");
  Check(plaintext.size() + kSealOverheadBytes <= kMaxFrameBytes, "plaintext too large for one frame");
  const GossipKey* key = keys.Find(keys.primary_id());
  Check(key != nullptr, "primary key installed");

  uint8_t header[kFrameHeaderBytes];
  size_t header_bytes = kFrameHeaderBytes;
  if (form == SealForm::kCompact) {
    header_bytes = StoreCompactHeader(keys.primary_id(), sender, counter, header);
  } else {
    header[0] = kProtocolVersion;
    StoreLe64(header + 1, keys.primary_id());
    StoreLe64(header + 9, sender);
    StoreLe64(header + 17, counter);
  }
  std::string frame(header_bytes + plaintext.size() + kSealTagBytes, '\0');
  auto* out = reinterpret_cast<uint8_t*>(frame.data());
  std::copy(header, header + header_bytes, out);
  uint8_t nonce[24];
  BuildNonce(sender, counter, nonce);
  const Ad ad = BuildAd(out, header_bytes, label);
  unsigned long long written = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(out + header_bytes, &written,
                                             reinterpret_cast<const uint8_t*>(plaintext.data()), plaintext.size(),
                                             ad.bytes.data(), ad.size, nullptr, nonce,
                                             key->data());
  Check(written == plaintext.size() + kSealTagBytes, "ciphertext length");
  return frame;
}

std::optional<OpenError> OpenInto(const Keyring& keys, std::string_view label, std::string_view frame,
                                  size_t max_bytes, Opened* out) {
  crdt::EnsureSodiumInitialized();
  const size_t limit = std::min(max_bytes, kMaxFrameBytes);
  // The shortest header and tag, then the header the version byte says.
  const size_t shortest = frame.empty() || frame[0] != kCompactVersion ? kSealOverheadBytes
                                                                       : kCompactFixedBytes + 1 + kSealTagBytes;
  if (frame.size() < shortest) {
    return Fail(RejectReason::kMalformed, absl::StrCat("frame of ", frame.size(), " bytes is shorter than ",
                                                       shortest));
  }
  if (frame.size() > limit) {
    return Fail(RejectReason::kOversize, absl::StrCat("frame of ", frame.size(), " bytes exceeds ", limit));
  }
  if (label.size() > kMaxLabelBytes) return Fail(RejectReason::kMalformed, "cluster label too long");
  const auto* in = reinterpret_cast<const uint8_t*>(frame.data());
  if (in[0] != kProtocolVersion && in[0] != kCompactVersion) {
    return Fail(RejectReason::kVersion, absl::StrCat("protocol version ", in[0], " not supported (speak ",
                                                     kProtocolVersion, " and ", kCompactVersion, ")"));
  }
  Opened& opened = *out;
  // The keys to try: the one the header names, or every key the compact
  // header's hint fits.
  std::array<uint64_t, Keyring::kMaxKeys> candidates{};
  size_t tries = 0;
  size_t header_bytes = kFrameHeaderBytes;
  if (in[0] == kCompactVersion) {
    const size_t counter_bytes = LoadCounter(in + kCompactFixedBytes, in + frame.size(), &opened.counter);
    if (counter_bytes == 0 || kCompactFixedBytes + counter_bytes + kSealTagBytes > frame.size()) {
      return Fail(RejectReason::kMalformed, "compact header truncated or not minimal");
    }
    header_bytes = kCompactFixedBytes + counter_bytes;
    opened.sender = LoadLe64(in + 2);
    tries = keys.IdsWithHint(in[1], &candidates);
    if (tries == 0) return Fail(RejectReason::kUnknownKey, absl::StrCat("no key id ends in ", in[1]));
  } else {
    opened.sender = LoadLe64(in + 9);
    opened.counter = LoadLe64(in + 17);
    candidates[tries++] = LoadLe64(in + 1);
    if (keys.Find(candidates[0]) == nullptr) {
      return Fail(RejectReason::kUnknownKey, absl::StrCat("key id ", candidates[0], " not installed"));
    }
  }

  uint8_t nonce[24];
  BuildNonce(opened.sender, opened.counter, nonce);
  const Ad ad = BuildAd(in, header_bytes, label);
  const size_t cipher_len = frame.size() - header_bytes;
  opened.plaintext.resize(cipher_len - kSealTagBytes);
  for (size_t i = 0; i < tries; ++i) {
    const GossipKey* key = keys.Find(candidates[i]);
    assert(key != nullptr);
    unsigned long long written = 0;
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(reinterpret_cast<uint8_t*>(opened.plaintext.data()), &written,
                                                   nullptr, in + header_bytes, cipher_len, ad.bytes.data(), ad.size,
                                                   nonce, key->data()) == 0) {
      Check(written == opened.plaintext.size(), "plaintext length");
      opened.key_id = candidates[i];
      return std::nullopt;
    }
  }
  return Fail(RejectReason::kAuth, "frame failed authentication");
}

std::variant<Opened, OpenError> Open(const Keyring& keys, std::string_view label, std::string_view frame,
                                     size_t max_bytes) {
  Opened opened;
  if (std::optional<OpenError> err = OpenInto(keys, label, frame, max_bytes, &opened)) return *std::move(err);
  return opened;
}

}  // namespace pollen::protocol
