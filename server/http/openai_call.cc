#include "server/http/openai_call.h"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "microhttpd.h"

namespace flashserve::http {

GenerationCall::GenerationCall(MHD_Connection* connection, int fd, bool stream,
                               ResponseMeta meta)
    : connection_(connection), fd_(fd), stream_(stream), meta_(std::move(meta)) {
  if (stream_) out_ = stream_start(meta_);
}

absl::Status GenerationCall::submit(engine::Engine* engine, engine::GenerationRequest request) {
  engine_ = engine;
  std::shared_ptr<GenerationCall> self = shared_from_this();
  absl::StatusOr<engine::RequestId> id = engine->submit(
      std::move(request), [self](engine::GenerationEvent event) {
        self->on_event(std::move(event));
      });
  if (!id.ok()) return id.status();
  std::unique_lock<std::mutex> lock(mu_);
  submitted_ = true;
  id_ = *id;
  const bool cancel = client_gone_ && !final_;
  lock.unlock();
  if (cancel) engine_->cancel(*id);
  return absl::OkStatus();
}

engine::RequestId GenerationCall::id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return id_;
}

bool GenerationCall::peer_closed() const {
  if (fd_ < 0) return false;
  pollfd p = {fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void GenerationCall::on_event(engine::GenerationEvent event) {
  std::unique_lock<std::mutex> lock(mu_);
  bool cancel = false;
  if (!event.finished && !client_gone_ && open_ && peer_closed()) {
    client_gone_ = true;
    cancel = submitted_;
  }
  if (stream_) {
    if (!event.finished) {
      out_ += stream_event(meta_, event, &text_offset_);
    } else if (absl::Status error = final_error(event); !error.ok()) {
      out_ += stream_error(error);
    } else {
      out_ += stream_event(meta_, event, &text_offset_);
    }
  } else {
    gathered_.text += event.text;
    gathered_.logprobs.insert(gathered_.logprobs.end(),
                              std::make_move_iterator(event.logprobs.begin()),
                              std::make_move_iterator(event.logprobs.end()));
  }
  if (event.finished) {
    event.text.clear();
    event.logprobs.clear();
    final_ = std::move(event);
  }
  const bool resume = open_ && suspended_ && (stream_ || final_);
  if (resume) suspended_ = false;
  lock.unlock();
  if (cancel) engine_->cancel(id_);
  if (resume) MHD_resume_connection(connection_);
}

namespace {
absl::Status shutting_down() {
  return absl::UnavailableError("the server is shutting down; retry elsewhere");
}
}  // namespace

bool GenerationCall::ready_or_suspend() {
  std::lock_guard<std::mutex> lock(mu_);
  if (final_ || released_) return true;
  suspended_ = true;
  MHD_suspend_connection(connection_);
  return false;
}

int GenerationCall::answer_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return http_status(final_ ? final_error(*final_) : shutting_down());
}

std::string GenerationCall::answer_body() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!final_) return error_json(shutting_down());
  const absl::Status error = final_error(*final_);
  if (!error.ok()) return error_json(error);
  return completion_json(meta_, gathered_, *final_);
}

long GenerationCall::read(char* buf, size_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  if (out_pos_ < out_.size()) {
    const size_t n = std::min(max, out_.size() - out_pos_);
    std::memcpy(buf, out_.data() + out_pos_, n);
    out_pos_ += n;
    if (out_pos_ == out_.size()) {
      out_.clear();
      out_pos_ = 0;
    }
    return static_cast<long>(n);
  }
  if (final_) return MHD_CONTENT_READER_END_OF_STREAM;
  if (released_) return MHD_CONTENT_READER_END_WITH_ERROR;
  suspended_ = true;
  MHD_suspend_connection(connection_);
  return 0;
}

void GenerationCall::connection_closed() {
  std::unique_lock<std::mutex> lock(mu_);
  open_ = false;
  suspended_ = false;
  const bool cancel = submitted_ && !final_;
  if (cancel) client_gone_ = true;
  lock.unlock();
  if (cancel) engine_->cancel(id_);
}

void GenerationCall::release() {
  std::unique_lock<std::mutex> lock(mu_);
  released_ = true;
  const bool resume = open_ && suspended_;
  suspended_ = false;
  lock.unlock();
  if (resume) MHD_resume_connection(connection_);
}

void GenerationCall::check_disconnect() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!open_ || client_gone_ || final_ || !submitted_ || !peer_closed()) return;
  client_gone_ = true;
  lock.unlock();
  engine_->cancel(id_);
}

GenerationCall::Outcome GenerationCall::outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  Outcome o;
  o.client_gone = client_gone_;
  if (final_) {
    o.finished = true;
    o.finish_reason = final_->finish_reason;
    o.usage = final_->usage;
    o.timings = final_->timings;
    o.error = final_error(*final_);
  }
  return o;
}

}  // namespace flashserve::http
