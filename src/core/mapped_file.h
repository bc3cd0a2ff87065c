// A read-only memory map of a whole file. Model weights are used in place from the map.
// Only regular files are mapped: a FIFO, device or socket is refused at open (opened
// non-blocking, so a FIFO with no writer cannot hang the caller).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws tessera::Error
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the whole pages inside [p, p + n) from this process's memory (madvise DONTNEED): for
  // bytes a loader has copied elsewhere (repacked weights). They stay valid: a later read faults
  // them back in from the file. Ranges outside the map are ignored. Returns the bytes dropped.
  size_t release(const uint8_t* p, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int slot_ = -1;  // this map's entry in the SIGBUS report's table
};

// A file that is truncated (or replaced in place) while mapped makes the next read of a lost
// page raise SIGBUS. Installs a handler that names the mapped file, prints one line
// ("tessera: error: ...") and exits with status 1; a SIGBUS outside every map keeps the
// default action. For programs (the CLI); a library never installs signal handlers itself.
void report_sigbus_in_mapped_files();

// Reads a whole regular file of at most `max_bytes` (e.g. a frame list) into memory.
std::string read_small_file(const std::string& path, size_t max_bytes, const char* what);

}  // namespace tessera
