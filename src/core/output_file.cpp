#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace tessera {

namespace {

bool is_descriptor_path(const std::string& p) { return p.rfind("/proc/", 0) == 0 || p.rfind("/dev/fd/", 0) == 0; }

// `path` with its symlinks followed (up to 40, as the kernel allows); a dangling link resolves
// to the path it names, which will be created. `via_descriptor`: a hop went through an open
// descriptor's name (/dev/stdout -> /proc/self/fd/1): the file behind it is another
// program's open file, to be appended to, never replaced.
std::string resolve_links(std::string path, bool* via_descriptor) {
  for (int hops = 0; hops < 40; ++hops) {
    if (is_descriptor_path(path)) {  // the kernel's own links (pipe:[N], deleted files): stat follows them
      *via_descriptor = true;
      return path;
    }
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    char buf[4096];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (n < 0) fail("cannot write output file '%s': %s", path.c_str(), std::strerror(errno));
    buf[n] = '\0';
    if (buf[0] == '/') {
      path = buf;
    } else {
      const size_t slash = path.rfind('/');
      path = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + buf;
    }
  }
  fail("cannot write output file '%s': too many levels of symbolic links", path.c_str());
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

enum class Target { Replace, Stream };

// What writing `path` (links already followed) means, or an error.
Target classify(const std::string& shown, const std::string& path, bool via_descriptor) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISREG(st.st_mode)) {
      if (::access(path.c_str(), W_OK) != 0) fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(errno));
      if (via_descriptor) return Target::Stream;
    } else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      if (::access(path.c_str(), W_OK) != 0) fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(errno));
      return Target::Stream;
    } else {
      fail("cannot write output file '%s': it is %s", shown.c_str(),
           S_ISDIR(st.st_mode) ? "a directory" : "not a regular file, character device or FIFO");
    }
  } else if (errno != ENOENT) {
    fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(errno));
  }
  const std::string dir = dir_of(path);
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
    fail("cannot write output file '%s': no directory '%s'", shown.c_str(), dir.c_str());
  if (::access(dir.c_str(), W_OK) != 0) fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(errno));
  return Target::Replace;
}

bool write_fd(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void stream_into(const std::string& shown, const std::string& path, const uint8_t* p, size_t n) {
  // O_NONBLOCK for the open only: a FIFO with no reader is an error, not a hang
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) fail("cannot write output file '%s': it is a FIFO with no reader", shown.c_str());
    fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(errno));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const bool ok = write_fd(fd, p, n);
  const int e = errno;
  ::close(fd);
  if (!ok) fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(e));
}

void replace_atomically(const std::string& shown, const std::string& path, const uint8_t* p, size_t n) {
  // mkstemp: a fresh name opened exclusively, never a file or link an attacker placed there
  std::string tmp = dir_of(path) + "/.tessera-out-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(errno));
  struct stat st {};
  mode_t mode = 0666;
  if (::stat(path.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;  // keep an existing file's permissions
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode &= ~mask;
  }
  ::fchmod(fd, mode);
  bool ok = write_fd(fd, p, n);
  int e = errno;
  if (::close(fd) != 0 && ok) ok = false, e = errno;
  if (!ok) {
    ::unlink(tmp.c_str());
    fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    e = errno;
    ::unlink(tmp.c_str());
    fail("cannot write output file '%s': %s", shown.c_str(), std::strerror(e));
  }
}

}  // namespace

void check_output_path(const std::string& path) {
  if (path.empty()) return;
  bool via_descriptor = false;
  const std::string target = resolve_links(path, &via_descriptor);
  classify(path, target, via_descriptor);
}

void write_output_file(const std::string& path, const void* data, size_t size) {
  if (path.empty()) fail("no output file named");
  bool via_descriptor = false;
  const std::string target = resolve_links(path, &via_descriptor);
  const auto* p = static_cast<const uint8_t*>(data);
  if (classify(path, target, via_descriptor) == Target::Stream) stream_into(path, target, p, size);
  else replace_atomically(path, target, p, size);
}

void write_output_file(const std::string& path, const std::string& text) { write_output_file(path, text.data(), text.size()); }

void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int e = errno;
    std::clearerr(stdout);
    fail("cannot write to standard output: %s", e ? std::strerror(e) : "write error");
  }
}

void write_stdout(const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, stdout) != size) {
    const int e = errno;
    std::clearerr(stdout);
    fail("cannot write to standard output: %s", e ? std::strerror(e) : "write error");
  }
  flush_stdout();
}

void write_stdout(const std::string& text) { write_stdout(text.data(), text.size()); }

void guard_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int n = ::open("/dev/null", fd == 0 ? O_RDONLY : O_RDONLY | O_NOCTTY);  // read-only: writes fail with EBADF
    if (n >= 0 && n != fd) {
      ::dup2(n, fd);
      ::close(n);
    }
  }
}

}  // namespace tessera
