#include "server/http/body_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace flashserve::http {
namespace {

size_t page_rounded(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

bool BodyBuffer::reserve(size_t bytes) {
  if (bytes < kMapBytes) {
    if (mapped_ != nullptr) return true;  // a mapping is never smaller than kMapBytes
    try {
      heap_.reserve(bytes);
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }
  return (mapped_ != nullptr && bytes <= mapped_capacity_) || map(bytes);
}

bool BodyBuffer::append(const char* data, size_t size) {
  const size_t total = this->size() + size;
  if (mapped_ == nullptr && total < kMapBytes) {
    try {
      heap_.append(data, size);
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }
  // Growing a mapping doubles it, as a string would grow: a chunked body of n bytes moves
  // O(n) bytes in all (mremap moves page tables, not bytes, where it can).
  if (mapped_ == nullptr || total > mapped_capacity_) {
    if (!map(std::max(total, 2 * mapped_capacity_))) return false;
  }
  std::memcpy(mapped_ + mapped_size_, data, size);
  mapped_size_ = total;
  return true;
}

std::string_view BodyBuffer::view() const {
  return mapped_ != nullptr ? std::string_view(mapped_, mapped_size_) : std::string_view(heap_);
}

void BodyBuffer::release() {
  if (mapped_ != nullptr) ::munmap(mapped_, mapped_capacity_);
  mapped_ = nullptr;
  mapped_size_ = mapped_capacity_ = 0;
  std::string().swap(heap_);
}

bool BodyBuffer::map(size_t capacity) {
  const size_t length = page_rounded(std::max(capacity, kMapBytes));
  if (mapped_ != nullptr) {
    void* moved = ::mremap(mapped_, mapped_capacity_, length, MREMAP_MAYMOVE);
    if (moved == MAP_FAILED) return false;
    mapped_ = static_cast<char*>(moved);
    mapped_capacity_ = length;
    return true;
  }
  void* fresh = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh == MAP_FAILED) return false;
  mapped_ = static_cast<char*>(fresh);
  mapped_capacity_ = length;
  mapped_size_ = heap_.size();
  std::memcpy(mapped_, heap_.data(), heap_.size());
  std::string().swap(heap_);
  return true;
}

}  // namespace flashserve::http
