#include "deviceshadow/private_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace deviceshadow {

std::string read_private_file(const std::string& path, std::string_view what, OthersMay others) {
  const std::string named = std::string(what) + " " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // (a FIFO: refused below, not waited on)
  if (fd < 0) throw std::runtime_error("cannot read " + named + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::runtime_error("cannot stat " + named + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(named + " is not a regular file");
  const bool secret = others == OthersMay::nothing;
  if ((st.st_mode & (S_IWGRP | S_IWOTH | (secret ? S_IRGRP | S_IROTH : 0))) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw std::runtime_error(named + " has mode " + mode +
                             (secret ? ": it holds a secret, so group and others must not be able to read or write it (chmod 600 "
                                     : ": group and others must not be able to write it (chmod 644 or 600 ") +
                             path + ")");
  }
  std::string contents;
  char buffer[8192];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error("cannot read " + named + ": " + std::strerror(errno));
    contents.append(buffer, static_cast<std::size_t>(n));
  }
  return contents;
}

}  // namespace deviceshadow
