#pragma once
// The bytes of one HTTP request body while it arrives (server/http/http_server.cc).
//
// Why not a std::string: the server holds up to HttpOptions::max_buffered_body_bytes of
// bodies (256 MiB) for clients that may stall mid-upload, and that memory must go back to
// the system when they leave. A std::string of a large body comes from glibc's malloc, which
// maps blocks of 128 KiB and more on their own only until the first such block is freed;
// from then on (its dynamic mmap threshold rises to the freed size, up to 32 MiB) blocks of
// a few MiB come from its arenas, and what they leave free there stays resident unless
// malloc_trim finds it (HttpAbuseE2E.StalledBodiesAreBounded, 128 stalled 2 MiB uploads,
// three runs each on a busy 2-core machine: the server's resident memory once they closed
// was +1.9, +3.9 and +27.7 MB above its baseline with std::string bodies, +5.1 MB every time
// with this class). So a body of kMapBytes or more lives in an anonymous mapping of its
// own: its pages are touched only as bytes arrive, and release() (or the destructor) unmaps
// them at once. Smaller bodies, the usual request of a few KB, stay on the heap.
//
// Thread-safety: none; a request's buffer is used by the libmicrohttpd thread serving it.
#include <cstddef>
#include <string>
#include <string_view>

namespace flashserve::http {

class BodyBuffer {
 public:
  // Bodies (reserved or grown) from this size on get a mapping of their own.
  static constexpr size_t kMapBytes = size_t{64} << 10;

  BodyBuffer() = default;
  ~BodyBuffer() { release(); }
  BodyBuffer(const BodyBuffer&) = delete;
  BodyBuffer& operator=(const BodyBuffer&) = delete;

  // Room for `bytes` in all without moving (a declared Content-Length). False, with the
  // buffer unchanged, if the system refuses the memory.
  bool reserve(size_t bytes);
  // Appends; grows as needed (a chunked body). False, unchanged, if the memory is refused.
  bool append(const char* data, size_t size);
  std::string_view view() const;
  size_t size() const { return mapped_ != nullptr ? mapped_size_ : heap_.size(); }
  // Whether the bytes live in a mapping of their own (tests).
  bool mapped() const { return mapped_ != nullptr; }
  // Frees everything (unmaps a mapping); the buffer is empty and usable again.
  void release();

 private:
  // Moves the bytes into a mapping of at least `capacity` bytes (or grows the one there).
  bool map(size_t capacity);

  std::string heap_;            // the bytes while mapped_ is null
  char* mapped_ = nullptr;      // else the mapping
  size_t mapped_size_ = 0;      // bytes in it
  size_t mapped_capacity_ = 0;  // its length, a multiple of the page size
};

}  // namespace flashserve::http
