#include "node/runtime/secret.h"

#include <sodium.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

absl::StatusOr<crdt::ClusterSecret> ParseSecret(std::string_view text) {
  text = Strip(text);
  crdt::ClusterSecret secret;
  if (text.size() == 64) {
    bool hex = true;
    for (char c : text) hex &= absl::ascii_isxdigit(static_cast<unsigned char>(c));
    if (hex) {
      const std::string bytes = absl::HexStringToBytes(AV(text));
      std::memcpy(secret.bytes.data(), bytes.data(), 32);
      return secret;
    }
  }
  std::string decoded;
  if ((absl::Base64Unescape(AV(text), &decoded) || absl::WebSafeBase64Unescape(AV(text), &decoded)) && decoded.size() == 32) {
    std::memcpy(secret.bytes.data(), decoded.data(), 32);
    sodium_memzero(decoded.data(), decoded.size());
    return secret;
  }
  sodium_memzero(decoded.data(), decoded.size());
  return absl::InvalidArgumentError("expected 32 bytes as 64 hex digits or base64");
}

absl::StatusOr<crdt::ClusterSecret> LoadSecret(const std::string& secret_file, const char* env_value,
                                               std::string* warning) {
  if (!secret_file.empty()) {
    struct stat st;
    if (::stat(secret_file.c_str(), &st) != 0) {
      return absl::InvalidArgumentError(Cat("option 'secret-file': cannot read '", secret_file, "'"));
    }
    if ((st.st_mode & 077) != 0 && warning != nullptr) {
      *warning = Cat("secret file '", secret_file, "' is readable by group or others; chmod 600 it");
    }
    std::ifstream in(secret_file, std::ios::binary);
    std::string text(256, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    auto s = ParseSecret(text);
    sodium_memzero(text.data(), text.size());
    if (!s.ok()) return absl::InvalidArgumentError(Cat("option 'secret-file': ", s.status().message()));
    return s;
  }
  if (env_value != nullptr) {
    auto s = ParseSecret(env_value);
    if (!s.ok()) return absl::InvalidArgumentError(Cat("POLLEN_SECRET: ", s.status().message()));
    return s;
  }
  return absl::InvalidArgumentError(
      "option 'secret-file': no cluster secret; set --secret-file PATH or POLLEN_SECRET "
      "(32 random bytes as hex, e.g. from: head -c32 /dev/urandom | xxd -p -c64)");
}

}  // namespace pollen::runtime
