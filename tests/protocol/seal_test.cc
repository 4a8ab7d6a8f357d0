#include "protocol/seal.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pollen::protocol {
namespace {

crdt::ClusterSecret SecretFrom(uint8_t seed) {
  crdt::ClusterSecret s;
  for (int i = 0; i < 32; ++i) s.bytes[i] = static_cast<uint8_t>(seed * 31 + i * 7 + 1);
  return s;
}

GossipKey KeyFrom(uint8_t seed) { return DeriveGossipKey(SecretFrom(seed)); }

std::string Payload(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 13 + 5);
  return s;
}

Opened MustOpen(const std::variant<Opened, OpenError>& r) {
  if (const auto* e = std::get_if<OpenError>(&r)) {
    ADD_FAILURE() << "open failed: " << e->message;
    return Opened{};
  }
  return std::get<Opened>(r);
}

RejectReason ReasonOf(const std::variant<Opened, OpenError>& r) {
  EXPECT_TRUE(std::holds_alternative<OpenError>(r)) << "frame unexpectedly opened";
  return std::get<OpenError>(r).reason;
}

TEST(SealTest, RoundTripsPayloadsAndHeader) {
  Keyring ring(KeyFrom(1));
  for (size_t n : {0, 1, 100, 1200, 65536}) {
    for (std::string_view label : {"", "prod-eu"}) {
      const std::string plain = Payload(n);
      const std::string frame = Seal(ring, label, 0xfeedface12345678ull, n + 7, plain);
      ASSERT_EQ(frame.size(), n + kSealOverheadBytes);
      EXPECT_EQ(static_cast<uint8_t>(frame[0]), kProtocolVersion);
      const Opened o = MustOpen(Open(ring, label, frame, kMaxFrameBytes));
      EXPECT_EQ(o.plaintext, plain);
      EXPECT_EQ(o.sender, 0xfeedface12345678ull);
      EXPECT_EQ(o.counter, n + 7);
      EXPECT_EQ(o.key_id, ring.primary_id());
    }
  }
}

TEST(SealTest, CiphertextHidesPlaintextAndDependsOnNonce) {
  Keyring ring(KeyFrom(1));
  const std::string plain = Payload(64);
  const std::string a = Seal(ring, "", 1, 1, plain);
  const std::string b = Seal(ring, "", 1, 2, plain);
  const std::string c = Seal(ring, "", 2, 1, plain);
  EXPECT_EQ(a.find(plain.substr(0, 16)), std::string::npos);
  EXPECT_NE(a.substr(kFrameHeaderBytes), b.substr(kFrameHeaderBytes));
  EXPECT_NE(a.substr(kFrameHeaderBytes), c.substr(kFrameHeaderBytes));
  EXPECT_EQ(a, Seal(ring, "", 1, 1, plain));  // deterministic for the same nonce
}

TEST(SealTest, EverySingleByteTamperIsRejected) {
  Keyring ring(KeyFrom(1));
  const std::string frame = Seal(ring, "label", 42, 7, Payload(200));
  for (size_t i = 0; i < frame.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string bad = frame;
      bad[i] = static_cast<char>(bad[i] ^ flip);
      const RejectReason want = i == 0 ? RejectReason::kVersion : i < 9 ? RejectReason::kUnknownKey : RejectReason::kAuth;
      EXPECT_EQ(ReasonOf(Open(ring, "label", bad, kMaxFrameBytes)), want) << "byte " << i;
    }
  }
}

TEST(SealTest, WrongKeyWrongLabelRejected) {
  Keyring sender(KeyFrom(1));
  Keyring receiver(KeyFrom(2));
  const std::string frame = Seal(sender, "a", 1, 1, "hello");
  EXPECT_EQ(ReasonOf(Open(receiver, "a", frame, kMaxFrameBytes)), RejectReason::kUnknownKey);
  // Same frame relabelled with the receiver's key id: the key is wrong, so authentication fails.
  std::string relabelled = frame;
  const uint64_t id = receiver.primary_id();
  for (int i = 0; i < 8; ++i) relabelled[1 + i] = static_cast<char>(id >> (8 * i));
  EXPECT_EQ(ReasonOf(Open(receiver, "a", relabelled, kMaxFrameBytes)), RejectReason::kAuth);
  EXPECT_EQ(ReasonOf(Open(sender, "b", frame, kMaxFrameBytes)), RejectReason::kAuth);
  EXPECT_EQ(ReasonOf(Open(sender, "", frame, kMaxFrameBytes)), RejectReason::kAuth);
  EXPECT_EQ(ReasonOf(Open(sender, "aa", frame, kMaxFrameBytes)), RejectReason::kAuth);
  MustOpen(Open(sender, "a", frame, kMaxFrameBytes));
}

TEST(SealTest, VersionTruncationAndSizeChecks) {
  Keyring ring(KeyFrom(1));
  const std::string frame = Seal(ring, "", 1, 1, Payload(100));
  std::string v2 = frame;
  v2[0] = 3;  // neither kProtocolVersion nor kCompactVersion
  const auto r = Open(ring, "", v2, kMaxFrameBytes);
  EXPECT_EQ(ReasonOf(r), RejectReason::kVersion);
  EXPECT_EQ(std::get<OpenError>(r).message.rfind("version: ", 0), 0u);
  for (size_t len = 0; len < frame.size(); ++len) {
    const RejectReason want = len < kSealOverheadBytes ? RejectReason::kMalformed : RejectReason::kAuth;
    EXPECT_EQ(ReasonOf(Open(ring, "", frame.substr(0, len), kMaxFrameBytes)), want) << "length " << len;
  }
  // Oversize is checked before anything else in the frame.
  EXPECT_EQ(ReasonOf(Open(ring, "", frame, frame.size() - 1)), RejectReason::kOversize);
  EXPECT_EQ(ReasonOf(Open(ring, "", v2, frame.size() - 1)), RejectReason::kOversize);
  MustOpen(Open(ring, "", frame, frame.size()));
  const std::string huge(kMaxFrameBytes + 1, '\x01');
  EXPECT_EQ(ReasonOf(Open(ring, "", huge, SIZE_MAX)), RejectReason::kOversize);
  // Short frames are malformed whatever their version byte says.
  EXPECT_EQ(ReasonOf(Open(ring, "", std::string(10, '\x09'), kMaxFrameBytes)), RejectReason::kMalformed);
}

// ---------------------------------------------------------------- compact header

// The compact header's length for a counter: 1 + 1 + 8 + its LEB128 length.
size_t CompactHeaderBytes(uint64_t counter) {
  size_t n = 11;
  while (counter >= 0x80) {
    counter >>= 7;
    ++n;
  }
  return n;
}

TEST(SealTest, CompactHeaderRoundTripsAndIsShorter) {
  Keyring ring(KeyFrom(1));
  for (uint64_t counter : {uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{300'000}, ~uint64_t{0}}) {
    for (size_t n : {0, 1, 100, 1200}) {
      const std::string plain = Payload(n);
      const std::string frame = Seal(ring, "prod", 0xfeedface12345678ull, counter, plain, SealForm::kCompact);
      ASSERT_EQ(frame.size(), CompactHeaderBytes(counter) + n + kSealTagBytes) << counter;
      EXPECT_LE(frame.size(), n + kSealOverheadBytes);
      EXPECT_EQ(static_cast<uint8_t>(frame[0]), kCompactVersion);
      const Opened o = MustOpen(Open(ring, "prod", frame, kMaxFrameBytes));
      EXPECT_EQ(o.plaintext, plain);
      EXPECT_EQ(o.sender, 0xfeedface12345678ull);
      EXPECT_EQ(o.counter, counter);
      EXPECT_EQ(o.key_id, ring.primary_id());
    }
  }
  // A counter a few hundred thousand frames into a boot: 13 bytes of header instead of 25.
  EXPECT_EQ(CompactHeaderBytes(300'000), 13u);
}

TEST(SealTest, EverySingleByteTamperOfACompactFrameIsRejected) {
  Keyring ring(KeyFrom(1));
  const std::string frame = Seal(ring, "label", 42, 1000, Payload(60), SealForm::kCompact);
  const size_t header = CompactHeaderBytes(1000);
  for (size_t i = 0; i < frame.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string bad = frame;
      bad[i] = static_cast<char>(bad[i] ^ flip);
      const auto r = Open(ring, "label", bad, kMaxFrameBytes);
      ASSERT_TRUE(std::holds_alternative<OpenError>(r)) << "byte " << i << " flip " << int{flip};
      const RejectReason reason = std::get<OpenError>(r).reason;
      if (i == 0) {
        EXPECT_TRUE(reason == RejectReason::kVersion || reason == RejectReason::kMalformed) << "byte " << i;
      } else if (i == 1) {
        EXPECT_EQ(reason, RejectReason::kUnknownKey);
      } else if (i < header) {
        EXPECT_TRUE(reason == RejectReason::kAuth || reason == RejectReason::kMalformed) << "byte " << i;
      } else {
        EXPECT_EQ(reason, RejectReason::kAuth) << "byte " << i;
      }
    }
  }
}

TEST(SealTest, CompactHeaderTruncatedOverlongOrNotMinimalIsMalformed) {
  Keyring ring(KeyFrom(1));
  const std::string frame = Seal(ring, "", 7, 300, Payload(30), SealForm::kCompact);  // counter: 0xac 0x02
  for (size_t len = 0; len < frame.size(); ++len) {
    const RejectReason want = len < 11 + kSealTagBytes + 1 ? RejectReason::kMalformed : RejectReason::kAuth;
    EXPECT_EQ(ReasonOf(Open(ring, "", frame.substr(0, len), kMaxFrameBytes)), want) << "length " << len;
  }
  std::string header = frame.substr(0, 10);
  auto with_counter = [&](const std::string& counter) {
    return header + counter + std::string(kSealTagBytes + 4, '\x00');
  };
  EXPECT_EQ(ReasonOf(Open(ring, "", with_counter("\xac\x82\x00"), kMaxFrameBytes)), RejectReason::kMalformed);  // a zero last byte
  EXPECT_EQ(ReasonOf(Open(ring, "", with_counter(std::string(9, '\xff') + "\x81\x01"), kMaxFrameBytes)),
            RejectReason::kMalformed);  // eleven bytes (the tenth goes on)
  EXPECT_EQ(ReasonOf(Open(ring, "", with_counter(std::string(9, '\xff') + "\x02"), kMaxFrameBytes)),
            RejectReason::kMalformed);  // past 64 bits
  EXPECT_EQ(ReasonOf(Open(ring, "", with_counter(std::string(9, '\xff') + "\x01"), kMaxFrameBytes)),
            RejectReason::kAuth);  // 2^64 - 1 is a counter (the frame is not genuine)
  // Oversize is checked before the header.
  EXPECT_EQ(ReasonOf(Open(ring, "", frame, frame.size() - 1)), RejectReason::kOversize);
}

// A frame read as the other form does not open: the version byte is in the
// associated data, and the two headers differ in length.
TEST(SealTest, SwappingTheHeaderFormByteIsRejected) {
  Keyring ring(KeyFrom(1));
  std::string full = Seal(ring, "", 5, 300, Payload(50));
  full[0] = static_cast<char>(kCompactVersion);
  EXPECT_TRUE(std::holds_alternative<OpenError>(Open(ring, "", full, kMaxFrameBytes)));
  std::string compact = Seal(ring, "", 5, 300, Payload(50), SealForm::kCompact);
  compact[0] = static_cast<char>(kProtocolVersion);
  EXPECT_TRUE(std::holds_alternative<OpenError>(Open(ring, "", compact, kMaxFrameBytes)));
}

// The key hint is one byte, so two installed keys may share it: Open tries
// each, and the frame opens under the one that sealed it.
TEST(SealTest, ACompactFrameOpensUnderWhicheverKeyFitsItsHint) {
  const GossipKey first = KeyFrom(1);
  GossipKey twin{};
  bool found = false;
  for (int seed = 2; seed < 5000 && !found; ++seed) {
    crdt::ClusterSecret s = SecretFrom(1);
    s.bytes[0] = static_cast<uint8_t>(seed);
    s.bytes[1] = static_cast<uint8_t>(seed >> 8);
    twin = DeriveGossipKey(s);
    found = twin != first && static_cast<uint8_t>(Keyring::IdOf(twin)) == static_cast<uint8_t>(Keyring::IdOf(first));
  }
  ASSERT_TRUE(found);
  Keyring sender(twin), receiver(first);
  const std::string frame = Seal(sender, "c", 1, 5, "hello", SealForm::kCompact);
  EXPECT_EQ(ReasonOf(Open(receiver, "c", frame, kMaxFrameBytes)), RejectReason::kAuth);  // the hint fits, the key not
  const uint64_t twin_id = *receiver.Install(twin);
  const Opened o = MustOpen(Open(receiver, "c", frame, kMaxFrameBytes));
  EXPECT_EQ(o.key_id, twin_id);
  EXPECT_EQ(o.plaintext, "hello");
  Keyring stranger(KeyFrom(3));
  if (static_cast<uint8_t>(stranger.primary_id()) != static_cast<uint8_t>(Keyring::IdOf(first))) {
    EXPECT_EQ(ReasonOf(Open(stranger, "c", frame, kMaxFrameBytes)), RejectReason::kUnknownKey);
  }
}

TEST(SealTest, ReasonNames) {
  EXPECT_EQ(RejectReasonName(RejectReason::kMalformed), "malformed");
  EXPECT_EQ(RejectReasonName(RejectReason::kOversize), "oversize");
  EXPECT_EQ(RejectReasonName(RejectReason::kVersion), "version");
  EXPECT_EQ(RejectReasonName(RejectReason::kUnknownKey), "unknown_key");
  EXPECT_EQ(RejectReasonName(RejectReason::kAuth), "auth");
  EXPECT_EQ(RejectReasonName(RejectReason::kReplay), "replay");
}

TEST(SealTest, SecretAndGossipKeyNeverInFrames) {
  const crdt::ClusterSecret secret = SecretFrom(9);
  const GossipKey key = DeriveGossipKey(secret);
  const std::string secret_s(secret.bytes.begin(), secret.bytes.end());
  const std::string key_s(key.begin(), key.end());
  EXPECT_NE(secret_s, key_s);
  EXPECT_EQ(DeriveGossipKey(secret), key);  // deterministic
  EXPECT_NE(DeriveGossipKey(SecretFrom(10)), key);
  Keyring ring(key);
  std::string all;
  for (uint64_t c = 0; c < 64; ++c) {
    all += Seal(ring, "", c * 977, c, std::string(c * 8, '\0'));  // zero plaintext exposes the keystream
    all += Seal(ring, secret_s, c, c, secret_s);                  // even a careless caller's label is not sent
  }
  for (size_t i = 0; i + 8 <= 32; ++i) {
    EXPECT_EQ(all.find(secret_s.substr(i, 8)), std::string::npos) << "secret bytes at " << i;
    EXPECT_EQ(all.find(key_s.substr(i, 8)), std::string::npos) << "key bytes at " << i;
  }
}

// ---------------------------------------------------------------- Keyring

TEST(KeyringTest, InstallUseRemoveAndBounds) {
  const GossipKey k1 = KeyFrom(1), k2 = KeyFrom(2);
  Keyring ring(k1);
  const uint64_t id1 = Keyring::IdOf(k1);
  EXPECT_EQ(ring.primary_id(), id1);
  EXPECT_NE(Keyring::IdOf(k1), Keyring::IdOf(k2));
  auto id2 = ring.Install(k2);
  ASSERT_TRUE(id2.ok());
  EXPECT_EQ(*id2, Keyring::IdOf(k2));
  EXPECT_EQ(*ring.Install(k2), *id2);  // idempotent
  EXPECT_EQ(ring.size(), 2u);
  EXPECT_EQ(ring.ids().front(), id1);
  EXPECT_EQ(ring.Use(12345).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ring.Remove(id1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ring.Use(*id2).ok());
  EXPECT_EQ(ring.ids().front(), *id2);
  ASSERT_TRUE(ring.Remove(id1).ok());
  EXPECT_EQ(ring.Find(id1), nullptr);
  EXPECT_EQ(ring.Remove(id1).code(), absl::StatusCode::kNotFound);
  for (uint8_t s = 10; ring.size() < Keyring::kMaxKeys; ++s) ASSERT_TRUE(ring.Install(KeyFrom(s)).ok());
  EXPECT_EQ(ring.Install(KeyFrom(99)).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ring.Install(k2).ok());  // already there: still fine when full
  const std::vector<uint64_t> ids = ring.ids();
  EXPECT_EQ(ids.size(), Keyring::kMaxKeys);
  EXPECT_TRUE(std::is_sorted(ids.begin() + 1, ids.end()));
}

TEST(KeyringTest, RotationWithoutDowntime) {
  const GossipKey old_key = KeyFrom(1), new_key = KeyFrom(2);
  Keyring sender(old_key), receiver(old_key);
  const std::string before = Seal(sender, "c", 1, 1, "before");
  // Step 1: every receiver installs the new key; old frames still open.
  const uint64_t new_id = *receiver.Install(new_key);
  EXPECT_EQ(MustOpen(Open(receiver, "c", before, kMaxFrameBytes)).plaintext, "before");
  // Step 2: the sender switches; receivers open both old and new frames.
  ASSERT_TRUE(sender.Install(new_key).ok());
  ASSERT_TRUE(sender.Use(new_id).ok());
  const std::string after = Seal(sender, "c", 1, 2, "after");
  EXPECT_EQ(MustOpen(Open(receiver, "c", after, kMaxFrameBytes)).key_id, new_id);
  EXPECT_EQ(MustOpen(Open(receiver, "c", before, kMaxFrameBytes)).plaintext, "before");
  // Step 3: receivers use the new key and remove the old: old frames are refused.
  ASSERT_TRUE(receiver.Use(new_id).ok());
  ASSERT_TRUE(receiver.Remove(Keyring::IdOf(old_key)).ok());
  EXPECT_EQ(ReasonOf(Open(receiver, "c", before, kMaxFrameBytes)), RejectReason::kUnknownKey);
  EXPECT_EQ(MustOpen(Open(receiver, "c", after, kMaxFrameBytes)).plaintext, "after");
}

// ---------------------------------------------------------------- ReplayWindow

TEST(ReplayWindowTest, RejectsRepeatsAndOldCountersAcceptsReorder) {
  ReplayWindow w;
  EXPECT_TRUE(w.Accept(1, 10));
  EXPECT_FALSE(w.Accept(1, 10));
  EXPECT_TRUE(w.Accept(1, 12));
  EXPECT_TRUE(w.Accept(1, 11));  // reordered, inside the window
  EXPECT_FALSE(w.Accept(1, 11));
  EXPECT_TRUE(w.Accept(1, 5));   // older than the first seen but within the window
  EXPECT_TRUE(w.Accept(2, 10));  // senders are independent
  EXPECT_TRUE(w.Accept(1, 12 + ReplayWindow::kWindow));
  EXPECT_FALSE(w.Accept(1, 12));  // now exactly kWindow behind
  EXPECT_TRUE(w.Accept(1, 13));   // kWindow - 1 behind, unseen
  EXPECT_FALSE(w.Accept(1, 13));
  EXPECT_FALSE(w.Accept(1, 0));
  EXPECT_TRUE(w.Accept(1, 1'000'000));
  EXPECT_FALSE(w.Accept(1, 12 + ReplayWindow::kWindow));
}

TEST(ReplayWindowTest, MatchesReferenceModel) {
  std::mt19937_64 rng(7);
  ReplayWindow w;
  std::set<uint64_t> seen;
  uint64_t highest = 0;
  bool any = false;
  for (int i = 0; i < 20000; ++i) {
    uint64_t c;
    switch (rng() % 4) {
      case 0: c = highest + 1 + rng() % 200; break;                 // forward, crossing word boundaries
      case 1: c = highest + rng() % 3000; break;                    // sometimes past the window
      default: c = highest >= 1500 ? highest - rng() % 1500 : rng() % 1500;  // behind
    }
    const bool fresh = !any || c > highest || (highest - c < ReplayWindow::kWindow && !seen.count(c));
    ASSERT_EQ(w.Accept(3, c), fresh) << "step " << i << " counter " << c << " highest " << highest;
    if (fresh) {
      seen.insert(c);
      if (!any || c > highest) highest = c;
      any = true;
    }
  }
}

// Senders that see a few counters each stay without a ring; a burst of
// reordered counters needs one, and a jump past the window drops it again.
// The answers stay the model's throughout (MatchesReferenceModel covers the
// mixed pattern).
TEST(ReplayWindowTest, RingOnlyWhileTheWindowHoldsMoreThanInlineCounters) {
  ReplayWindow w;
  EXPECT_TRUE(w.Accept(1, 100));
  for (uint64_t c = 99; c > 99 - ReplayWindow::kInline; --c) EXPECT_TRUE(w.Accept(1, c));
  EXPECT_EQ(w.rings(), 0u);
  for (uint64_t c = 100; c > 99 - ReplayWindow::kInline; --c) EXPECT_FALSE(w.Accept(1, c));
  EXPECT_TRUE(w.Accept(1, 90));  // one more than fits inline
  EXPECT_EQ(w.rings(), 1u);
  EXPECT_FALSE(w.Accept(1, 90));
  EXPECT_FALSE(w.Accept(1, 97));
  EXPECT_TRUE(w.Accept(1, 100 + ReplayWindow::kWindow));  // nothing seen left in the window
  EXPECT_EQ(w.rings(), 0u);
  EXPECT_FALSE(w.Accept(1, 100));
  EXPECT_TRUE(w.Accept(1, 101));
  // Forward steps that keep every seen counter in the window spill too.
  ReplayWindow f;
  for (uint64_t c = 1; c <= ReplayWindow::kInline + 1; ++c) EXPECT_TRUE(f.Accept(2, c * 10));
  EXPECT_EQ(f.rings(), 0u);  // the highest and kInline below it
  EXPECT_TRUE(f.Accept(2, 1000));
  EXPECT_EQ(f.rings(), 1u);
  for (uint64_t c = 1; c <= ReplayWindow::kInline + 1; ++c) EXPECT_FALSE(f.Accept(2, c * 10));
  EXPECT_TRUE(f.Accept(2, 15));
}

// Exact LRU eviction, however long the table has been full: a resident
// sender refuses a repeat, a forgotten one starts a new window.
TEST(ReplayWindowTest, EvictsTheLeastRecentlyUsedUnderRandomTraffic) {
  constexpr size_t kCapacity = 8;
  ReplayWindow w(kCapacity);
  std::mt19937_64 rng(11);
  std::vector<uint64_t> lru;  // resident senders, least recent first
  std::map<uint64_t, uint64_t> next;  // per sender: the next counter it sends
  for (int i = 0; i < 20000; ++i) {
    const uint64_t sender = rng() % 20;
    const bool repeat = next[sender] > 0 && rng() % 3 == 0;
    const uint64_t counter = repeat ? next[sender] - 1 : next[sender]++;
    const auto pos = std::find(lru.begin(), lru.end(), sender);
    const bool resident = pos != lru.end();
    const bool expected = !(repeat && resident);
    ASSERT_EQ(w.Accept(sender, counter), expected) << "step " << i;
    if (!expected) continue;
    if (resident) lru.erase(pos);
    if (!resident && lru.size() == kCapacity) lru.erase(lru.begin());
    lru.push_back(sender);
    ASSERT_EQ(w.senders(), lru.size());
  }
}

// Windows and eviction together: senders with reordered counters (some
// needing rings), more of them than fit, against a model that forgets the
// least recently accepted sender. A reused record or ring that kept anything
// of its previous sender would answer differently.
TEST(ReplayWindowTest, ManySendersWithReorderAndEvictionMatchTheModel) {
  constexpr size_t kCapacity = 6;
  ReplayWindow w(kCapacity);
  std::mt19937_64 rng(13);
  struct Window {
    std::set<uint64_t> seen;
    uint64_t highest = 0;
  };
  std::map<uint64_t, Window> resident;
  std::vector<uint64_t> lru;  // least recent first
  std::map<uint64_t, uint64_t> sent;  // per sender: the highest counter it has sent
  for (int i = 0; i < 50000; ++i) {
    const uint64_t sender = rng() % 10;
    uint64_t& top = sent[sender];
    uint64_t c;
    switch (rng() % 4) {
      case 0: c = top += 1 + rng() % 40; break;                 // forward
      case 1: c = top += rng() % 2000; break;                   // sometimes past the window
      default: c = top >= 1200 ? top - rng() % 1200 : rng() % 1200;  // behind: repeats, reorder, too old
    }
    const auto found = resident.find(sender);
    const bool fresh = found == resident.end() || c > found->second.highest ||
                       (found->second.highest - c < ReplayWindow::kWindow && !found->second.seen.count(c));
    ASSERT_EQ(w.Accept(sender, c), fresh) << "step " << i << " sender " << sender << " counter " << c;
    if (!fresh) continue;
    if (found == resident.end() && resident.size() == kCapacity) {
      resident.erase(lru.front());
      lru.erase(lru.begin());
    }
    Window& win = resident[sender];
    win.seen.insert(c);
    win.highest = std::max(win.highest, c);
    std::erase(lru, sender);
    lru.push_back(sender);
    ASSERT_EQ(w.senders(), resident.size());
  }
  EXPECT_LE(w.rings(), kCapacity);
}

TEST(ReplayWindowTest, BoundedSendersEvictLeastRecentlyUsed) {
  ReplayWindow w(4);
  for (uint64_t s = 1; s <= 4; ++s) EXPECT_TRUE(w.Accept(s, 100));
  EXPECT_TRUE(w.Accept(1, 101));  // sender 1 is now the most recent
  EXPECT_TRUE(w.Accept(5, 100));  // evicts sender 2, the least recent
  EXPECT_EQ(w.senders(), 4u);
  EXPECT_FALSE(w.Accept(1, 100));  // still remembered
  EXPECT_FALSE(w.Accept(3, 100));
  EXPECT_TRUE(w.Accept(2, 100));   // forgotten: starts a new window, evicting 3
  EXPECT_TRUE(w.Accept(3, 100));   // so 3 was forgotten too
  EXPECT_FALSE(w.Accept(2, 100));
  EXPECT_EQ(w.senders(), 4u);
  for (uint64_t s = 100; s < 200; ++s) w.Accept(s, 1);
  EXPECT_EQ(w.senders(), 4u);
}

}  // namespace
}  // namespace pollen::protocol
