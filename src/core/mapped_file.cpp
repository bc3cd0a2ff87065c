#include "core/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "core/error.h"

namespace tessera {

namespace {

// The maps alive now, for the SIGBUS handler: it may read only what is async-signal-safe, so
// the table is fixed-size and each entry's path is written before its address is published.
struct MapEntry {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};
  size_t size = 0;
  char path[480] = {};
};
constexpr int kMapSlots = 64;
MapEntry g_maps[kMapSlots];

int register_map(const void* p, size_t n, const std::string& path) {
  for (int i = 0; i < kMapSlots; ++i) {
    bool expected = false;
    if (!g_maps[i].used.compare_exchange_strong(expected, true)) continue;
    g_maps[i].size = n;
    const size_t len = std::min(path.size(), sizeof g_maps[i].path - 1);
    std::memcpy(g_maps[i].path, path.data(), len);
    g_maps[i].path[len] = '\0';
    g_maps[i].begin.store(reinterpret_cast<uintptr_t>(p), std::memory_order_release);
    return i;
  }
  return -1;  // more maps than slots: such a file's SIGBUS keeps the default action
}

void unregister_map(int slot) {
  if (slot < 0) return;
  g_maps[slot].begin.store(0, std::memory_order_release);
  g_maps[slot].used.store(false, std::memory_order_release);
}

void write_all(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void on_sigbus(int sig, siginfo_t* info, void*) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  for (int i = 0; i < kMapSlots; ++i) {
    const uintptr_t b = g_maps[i].begin.load(std::memory_order_acquire);
    if (b == 0 || a < b || a - b >= g_maps[i].size) continue;
    write_all("tessera: error: '");
    write_all(g_maps[i].path);
    write_all("' was truncated or rewritten while in use (a mapped page is gone): leave model files unchanged while tessera runs\n");
    ::_exit(1);
  }
  ::signal(sig, SIG_DFL);  // not one of ours: the faulting access repeats and gets the default action
}

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a pipe or FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

void report_sigbus_in_mapped_files() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting forever
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) fail("cannot open '%s': %s", path.c_str(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail("cannot stat '%s': %s", path.c_str(), std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail("'%s' is a directory, not a file", path.c_str());
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'%s' is %s, not a regular file (save it to a file first)", path.c_str(), file_kind(st.st_mode));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) {
    ::close(fd);
    fail("'%s' is empty", path.c_str());
  }
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) fail("cannot map '%s': %s", path.c_str(), std::strerror(e));
  data_ = static_cast<const uint8_t*>(p);
  slot_ = register_map(data_, size_, path_);
}

size_t MappedFile::release(const uint8_t* p, size_t n) const {
  if (!data_ || p < data_ || n > size_ || p - data_ > static_cast<ptrdiff_t>(size_ - n)) return 0;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (b <= a) return 0;
  if (::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED) != 0) return 0;  // only a hint
  return b - a;
}

MappedFile::~MappedFile() {
  unregister_map(slot_);
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

std::string read_small_file(const std::string& path, size_t max_bytes, const char* what) {
  MappedFile f(path);
  if (f.size() > max_bytes)
    fail("%s '%s' is %zu bytes, over the limit of %zu", what, path.c_str(), f.size(), max_bytes);
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

}  // namespace tessera
