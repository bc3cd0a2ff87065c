// A read-only memory map of a whole file. Model weights are used in place from the map.
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
};

}  // namespace tessera
