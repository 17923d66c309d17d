#include "query/cursor.hpp"

#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/private_file.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>

namespace deviceshadow::query {
namespace {

constexpr std::size_t kNonce = 12, kTag = 16, kPad = 32;  // names are padded to a multiple of kPad

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

Error bad_cursor() {
  return Error::invalid_request("cursor: not a cursor of this query (another filter, sort or token, or a server with another key)",
                                "cursor");
}

const unsigned char* bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

CursorKey CursorKey::random() {
  CursorKey k;
  if (RAND_bytes(k.key_.data(), static_cast<int>(k.key_.size())) != 1) throw std::runtime_error("no random bytes for the cursor key");
  return k;
}

CursorKey CursorKey::from_file(const std::string& path) {
  if (int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600); fd >= 0) {
    const CursorKey fresh = random();
    const bool written = ::write(fd, fresh.key_.data(), fresh.key_.size()) == static_cast<ssize_t>(fresh.key_.size());
    const bool synced = ::fsync(fd) == 0;
    ::close(fd);
    if (!written || !synced) throw std::runtime_error("cannot write the cursor key file " + path);
  }
  const std::string contents = read_private_file(path, "the cursor key file");
  if (contents.size() < 16) throw std::runtime_error("cannot read 16 bytes or more from the cursor key file " + path);
  CursorKey k;
  unsigned int size = 0;
  EVP_Digest(contents.data(), contents.size(), k.key_.data(), &size, EVP_sha256(), nullptr);
  return k;
}

std::string CursorKey::seal(const ShadowKey& last, std::string_view binding, std::string_view position) const {
  std::string plain = last.thing + '\0' + last.name;  // neither holds a NUL
  if (!position.empty()) {  // in hex: no NUL, which the padding is made of
    static constexpr char kHex[] = "0123456789abcdef";
    plain += '\0';
    for (unsigned char c : position) plain += {kHex[c >> 4], kHex[c & 15]};
  }
  plain.resize((plain.size() + kPad) / kPad * kPad, '\0');
  std::string out(kNonce + plain.size() + kTag, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  if (RAND_bytes(o, kNonce) != 1) throw Error(ErrorCode::internal, "no random bytes for a cursor");
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0;
  bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), o) == 1 &&
            EVP_EncryptUpdate(ctx.get(), nullptr, &n, bytes(binding), static_cast<int>(binding.size())) == 1 &&
            EVP_EncryptUpdate(ctx.get(), o + kNonce, &n, bytes(plain), static_cast<int>(plain.size())) == 1 &&
            EVP_EncryptFinal_ex(ctx.get(), o + kNonce + n, &n) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTag, o + kNonce + plain.size()) == 1;
  if (!ok) throw Error(ErrorCode::internal, "sealing a cursor failed");
  return encode_cursor(out);
}

ShadowKey CursorKey::open(std::string_view cursor, std::string_view binding, std::string* position) const {
  std::string sealed;
  try {
    sealed = decode_cursor(cursor);
  } catch (const Error&) {
    throw bad_cursor();
  }
  if (sealed.size() < kNonce + kPad + kTag || (sealed.size() - kNonce - kTag) % kPad != 0) throw bad_cursor();
  const std::size_t size = sealed.size() - kNonce - kTag;
  auto* s = reinterpret_cast<unsigned char*>(sealed.data());
  std::string plain(size, '\0');
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0;
  bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), s) == 1 &&
            EVP_DecryptUpdate(ctx.get(), nullptr, &n, bytes(binding), static_cast<int>(binding.size())) == 1 &&
            EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &n, s + kNonce,
                              static_cast<int>(size)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTag, s + kNonce + size) == 1 &&
            EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + n, &n) == 1;
  if (!ok) throw bad_cursor();
  const std::size_t split = plain.find('\0');
  if (split == std::string::npos) throw bad_cursor();
  const std::size_t end = plain.find('\0', split + 1);
  if (position) {
    position->clear();
    const std::size_t hex_end = end == std::string::npos ? end : plain.find('\0', end + 1);
    const std::string hex = end == std::string::npos ? "" : plain.substr(end + 1, hex_end == std::string::npos ? hex_end : hex_end - end - 1);
    if (hex.size() % 2) throw bad_cursor();
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      const std::string byte = hex.substr(i, 2);
      if (byte.find_first_not_of("0123456789abcdef") != std::string::npos) throw bad_cursor();
      position->push_back(static_cast<char>(std::stoi(byte, nullptr, 16)));
    }
  }
  return {plain.substr(0, split), plain.substr(split + 1, end == std::string::npos ? end : end - split - 1)};
}

std::string cursor_binding(std::string_view filter, std::string_view sort, std::string_view token) {
  std::string b;
  for (std::string_view part : {filter, sort, token}) b += std::to_string(part.size()) + ':' + std::string(part) + ';';
  return b;
}

}  // namespace deviceshadow::query
