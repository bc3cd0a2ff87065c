// Writing an output file a user named (-o, --json, --trace, converted models): a regular file
// (or a new one) is replaced atomically through a temporary file beside it, so a reader never
// sees half an output; a character device or FIFO (/dev/null, /dev/stdout, a pipe's name) is
// written straight into, never replaced; a symlink is followed to what it names. Everything
// else (a directory, a socket, a block device) is refused. Write errors (/dev/full) are errors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

// Fails (tessera::Error) unless `path` could be written as above: checked before a long job.
void check_output_path(const std::string& path);
void write_output_file(const std::string& path, const void* data, size_t size);
void write_output_file(const std::string& path, const std::string& text);

// Standard output: fails with one line when a write or flush fails (a full disk, a closed
// descriptor), so a command whose output was lost does not exit 0.
void write_stdout(const void* data, size_t size);
void write_stdout(const std::string& text);
void flush_stdout();
// If descriptor 0, 1 or 2 is closed at start, a later open() would receive it and stdout's
// writes would land in that file: occupy it with /dev/null opened read-only, so writes fail.
void guard_standard_descriptors();

}  // namespace tessera
