#include "node/runtime/resp/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <cstring>

#include "node/runtime/resp/fast_clock.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {

namespace {

ParserLimits ToParserLimits(const ServerLimits& l) {
  ParserLimits p;
  p.max_args = l.max_args;
  p.max_bulk_bytes = l.max_bulk_bytes;
  p.max_inline_bytes = l.max_inline_bytes;
  return p;
}

// "ip:port" as Redis prints it (IPv6 without brackets); empty on error.
std::string FormatAddress(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    if (::inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host)) == nullptr) return {};
    port = ntohs(a.sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    if (::inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof(host)) == nullptr) return {};
    port = ntohs(a.sin6_port);
  } else {
    return {};
  }
  return std::string(host) + ":" + std::to_string(port);
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return FormatAddress(ss);
}

std::string LocalAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return FormatAddress(ss);
}

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }
}  // namespace

void ConnectionRegistry::CloseLater(const std::shared_ptr<ConnectionRegistry>& self, size_t loop, uint64_t id) {
  assert(loop < self->loops.size());
  self->loops[loop]->Post([self, loop, id] {
    auto& conns = self->by_loop[loop];
    if (auto it = conns.find(id); it != conns.end()) it->second->Shutdown();
  });
}

void ConnectionRegistry::CloseAll(size_t loop) {
  assert(loop < by_loop.size());
  std::vector<Connection*> conns;
  for (const auto& [id, c] : by_loop[loop]) conns.push_back(c);
  for (Connection* c : conns) c->Shutdown();  // each leaves by_loop[loop]
}

Connection::Connection(int fd, uint64_t id, size_t loop, std::shared_ptr<ConnectionRegistry> registry)
    : fd_(fd),
      loop_index_(loop),
      loop_(registry->loops.at(loop)),
      registry_(std::move(registry)),
      ctx_(registry_->ctx),
      parser_(ToParserLimits(ctx_.limits)) {
  assert(fd_ >= 0);
  session_.id = id;
  session_.peer = PeerAddress(fd_);
  session_.gate_stripe = static_cast<int>(loop % ExecGate::kStripes);
  assert(loop < CommandStats::kShards);
  session_.stats_shard = static_cast<int>(loop);
  record_ = std::make_shared<ClientRecord>(id, session_.peer, LocalAddress(fd_), static_cast<int64_t>(fd_),
                                           loop_->now());
  session_.record = record_.get();
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  last_activity_ = loop_->now();
  ctx_.counters.connections_current.fetch_add(1, std::memory_order_relaxed);
}

Connection::~Connection() {
  if (!closed_) {  // the loop is being destroyed with the connection open
    closed_ = true;
    Leave();
    loop_->Unwatch(fd_);
    ::close(fd_);
  }
  ctx_.counters.connections_current.fetch_sub(1, std::memory_order_relaxed);
}

void Connection::Start() {
  registry_->by_loop[loop_index_].emplace(session_.id, this);
  session_.defer = [this]() -> DeferredReply {
    assert(!session_.deferred);
    session_.deferred = true;
    return [weak = std::weak_ptr<ConnectionRegistry>(registry_), loop = loop_index_, id = session_.id,
            seq = ++defer_seq_, gate = &ctx_.exec_gate](ReplyWriter write) {
      std::shared_ptr<ConnectionRegistry> reg = weak.lock();
      if (reg == nullptr) return;  // the server is gone
      reg->loops[loop]->Post([reg, loop, id, seq, gate, write = std::move(write)] {
        auto& conns = reg->by_loop[loop];
        if (auto it = conns.find(id); it != conns.end() && it->second->OnDeferredReply(seq, write)) return;
        // The client has gone, or was answered by the backstop: the writer
        // still runs, on a scratch session, so the command finishes its side
        // effects (a routed add logs its keys, which the node has taken); the
        // reply goes nowhere.
        ExecGate::SharedScope writing(*gate, loop);
        Session scratch;
        std::string discarded;
        write(scratch, &discarded);
      });
    };
  };
  ctx_.clients.Add(record_, [weak = std::weak_ptr<ConnectionRegistry>(registry_), loop = loop_index_,
                             id = session_.id] {
    if (auto reg = weak.lock()) ConnectionRegistry::CloseLater(reg, loop, id);
  });
  interest_ = EPOLLIN;
  if (!loop_->Watch(fd_, interest_, this).ok()) Shutdown();
}

void Connection::Leave() {
  if (left_) return;
  left_ = true;
  registry_->by_loop[loop_index_].erase(session_.id);
  {
    // Leave the count first, so client_count() never counts a connection
    // its client has already seen closed.
    std::lock_guard<std::mutex> lock(registry_->mu);
    assert(registry_->open > 0);
    --registry_->open;
  }
  ctx_.clients.Remove(session_.id);
}

void Connection::Shutdown() {
  if (closed_) return;
  closed_ = true;
  Leave();
  loop_->Unwatch(fd_);
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
  loop_->Retire(this);
}

void Connection::OnEvents(uint32_t events) {
  if (closed_) return;  // retired earlier in this iteration
  if (!lingering_ && (events & EPOLLOUT) != 0) Flush();  // may start lingering
  if (closed_) return;
  if (lingering_) {
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) DrainLinger();
    return;
  }
  if (awaiting_reply_ && (events & (EPOLLERR | EPOLLHUP)) != 0) {
    Shutdown();  // reset while waiting for a deferred reply: nobody to answer
    return;
  }
  if (awaiting_reply_ && (events & EPOLLRDHUP) != 0) {
    // The client stopped sending. A routed add is still answered: a
    // half-close (`nc -N`, shutdown(SHUT_WR)) reads its replies, as Redis
    // answers an add that came before an EOF, within the add's route
    // timeouts; a client that closed altogether makes that write fail,
    // which closes the connection. A WAIT or QEXISTS (a blocking read, up to
    // 60 s) is not: like Redis' blocked clients, the connection closes now.
    peer_shut_write_ = true;
    if (!session_.deferred_answers_half_closed) {
      EndWaitingAtEof();
      Flush();
    }
    if (!closed_) UpdateInterest();
    return;
  }
  if ((interest_ & EPOLLIN) != 0 && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
    ReadAndProcess();  // a read reports the error or EOF
  } else if ((events & (EPOLLERR | EPOLLHUP)) != 0) {
    Shutdown();
    return;
  }
  if (!closed_) UpdateInterest();
}

void Connection::StopAwaitingReply() {
  assert(awaiting_reply_);
  ++defer_seq_;  // its answer, if it comes, runs on a scratch session
  awaiting_reply_ = false;
  session_.deferred = false;
  session_.deferred_answers_half_closed = false;
  session_.stats_outcome = CommandStats::Outcome::kFailed;  // timed to now
  const uint64_t ended = FastNanos();
  CountCommand(ctx_, session_, ended > deferred_started_ ? ended - deferred_started_ : 0);
}

void Connection::EndWaitingAtEof() {
  assert(awaiting_reply_ && peer_shut_write_);
  // The replies queued before it are still sent, then the connection closes.
  StopAwaitingReply();
  closing_ = true;
  pending_input_ = false;
}

bool Connection::OnDeferredReply(uint64_t seq, const ReplyWriter& write) {
  if (closed_ || !awaiting_reply_ || seq != defer_seq_) return false;
  awaiting_reply_ = false;
  session_.deferred = false;
  session_.deferred_answers_half_closed = false;
  const size_t before = out_.size();
  const int slot = session_.stats_slot;  // what the writer does cannot change what is counted
  {
    // The writer may finish a command (a routed add logs its keys, and may
    // create a filter deleted meanwhile): like a batch, it runs inside the
    // gate's shared side, never during another thread's EXEC.
    ExecGate::SharedScope writing(ctx_.exec_gate, loop_index_);
    write(session_, &out_);
  }
  assert(out_.size() > before);
  const bool error = out_.size() > before && out_[before] == '-';
  if (error) ctx_.counters.error_replies.fetch_add(1, std::memory_order_relaxed);
  session_.stats_slot = slot;
  session_.stats_outcome = error ? CommandStats::Outcome::kFailed : CommandStats::Outcome::kOk;
  const uint64_t ended = FastNanos();
  CountCommand(ctx_, session_, ended > deferred_started_ ? ended - deferred_started_ : 0);
  last_activity_ = loop_->now();
  Process();  // the requests that came after it
  if (!closed_) Flush();
  if (!closed_) UpdateInterest();
  return true;
}

void Connection::OnTick(Clock::time_point now) {
  if (closed_) return;
  if (lingering_) {
    if (now >= linger_deadline_) Shutdown();
    return;
  }
  if (awaiting_reply_ && now >= deferred_since_ + ctx_.limits.deferred_backstop) {
    // The node never answered (a bug, or a driver stuck): answer the client
    // rather than hold it forever. The late answer, if any, is dropped.
    StopAwaitingReply();
    AppendError(&out_, "ERR timeout: the node did not answer in time (the command may have taken effect)");
    ctx_.counters.error_replies.fetch_add(1, std::memory_order_relaxed);
    last_activity_ = now;
    Process();
    if (!closed_) Flush();
    if (!closed_) UpdateInterest();
    return;
  }
  if (!awaiting_reply_ && ctx_.limits.idle_timeout.count() > 0 && now >= last_activity_ + ctx_.limits.idle_timeout) {
    ctx_.counters.idle_disconnects.fetch_add(1, std::memory_order_relaxed);
    Shutdown();
  }
}

void Connection::ReadAndProcess() {
  if (in_.size() < in_len_ + kReadChunk) in_.resize(in_len_ + kReadChunk);
  const ssize_t n = ::recv(fd_, in_.data() + in_len_, kReadChunk, 0);
  if (n == 0) {  // EOF: send the replies still queued, then close
    closing_ = true;
    Flush();
    return;
  }
  if (n < 0) {
    if (WouldBlock(errno) || errno == EINTR) return;
    Shutdown();  // reset
    return;
  }
  in_len_ += static_cast<size_t>(n);
  ctx_.counters.bytes_in.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  last_activity_ = loop_->now();
  record_->touch(last_activity_);
  Process();
  if (!closed_) Flush();
}

void Connection::CompactInput(size_t consumed) {
  if (consumed == 0) return;
  std::memmove(in_.data(), in_.data() + consumed, in_len_ - consumed);
  in_len_ -= consumed;
  // Give back memory after a large request.
  if (in_.size() > (1u << 20) && in_len_ < (64u << 10)) {
    std::string smaller(in_.data(), in_len_);
    in_.swap(smaller);
  }
}

void Connection::Process() {
  if (awaiting_reply_) return;  // resumed by OnDeferredReply
  size_t start = 0;
  size_t executed = 0;
  pending_input_ = false;
  // The whole batch runs inside the gate's shared side, so an EXEC on another
  // thread never interleaves with it (exec_gate.h).
  ExecGate::SharedScope batch(ctx_.exec_gate, loop_index_);
  // One clock read per command: each command's end is the next one's start.
  // None with latency tracking off (resp-latency-tracking).
  const bool timed = ctx_.latency_tracking;
  uint64_t started = timed ? FastNanos() : 0;
  while (!closing_) {
    if (out_.size() - out_pos_ >= kHighWaterBytes || executed >= ctx_.limits.max_batch_replies) {
      pending_input_ = start < in_len_;  // resume once the replies are sent
      break;
    }
    const std::string_view buf(in_.data() + start, in_len_ - start);
    const RequestParser::Status st = parser_.Parse(buf);
    if (st == RequestParser::Status::kIncomplete) break;
    if (st == RequestParser::Status::kError) {
      ctx_.counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
      ctx_.counters.error_replies.fetch_add(1, std::memory_order_relaxed);
      AppendError(&out_, parser_.error().message);
      if (parser_.error().fatal) {
        closing_ = true;
        start = in_len_;
      } else {
        start += parser_.error().skip;
      }
      parser_.Reset();
      if (timed) started = FastNanos();
      continue;
    }
    const size_t consumed = parser_.consumed();
    if (!parser_.args().empty()) {
      const RunKind kind =
          parser_.args_in_buffer() ? RunKindOf(ctx_, session_, parser_.args()) : RunKind::kNone;
      if (kind == RunKind::kNone) {
        Dispatch(ctx_, session_, parser_.args(), &out_);
      } else {
        // Views into in_, valid after the parser moves on (args_in_buffer).
        const std::array<std::string_view, 3> first = {parser_.args()[0], parser_.args()[1], parser_.args()[2]};
        parser_.Reset();
        size_t next = start + consumed;
        const size_t limit = std::min(kMaxRunRequests, ctx_.limits.max_batch_replies - executed);
        CollectRun(kind, first, start, limit, &next);
        const std::optional<RunResult> run =
            run_items_.size() > 1 ? DispatchRun(ctx_, session_, kind, first[1], run_items_, &out_) : std::nullopt;
        if (run.has_value()) {
          executed += run->requests;
          if (timed) {
            const uint64_t ended = FastNanos();
            CountRun(ctx_, session_, kind, *run, ended > started ? ended - started : 0);
            started = ended;
          }
          start = next;
          continue;
        }
        Dispatch(ctx_, session_, first, &out_);  // alone; what followed it is parsed again
      }
      ++executed;
      if (session_.close_after_reply) closing_ = true;
      if (session_.deferred) {
        deferred_started_ = started;  // timed until its reply is written
        deferred_since_ = loop_->now();
      } else if (timed) {
        const uint64_t ended = FastNanos();
        CountCommand(ctx_, session_, ended > started ? ended - started : 0);
        started = ended;
      }
    }
    start += consumed;
    parser_.Reset();
    if (session_.deferred) {
      // Its reply comes later: what follows waits for it, in order.
      awaiting_reply_ = true;
      pending_input_ = start < in_len_;
      break;
    }
  }
  if (closing_) start = in_len_;
  CompactInput(start);
  record_->set_query_buffer(in_len_);
  if (!closing_ && in_len_ > ctx_.limits.max_query_bytes) {
    ctx_.counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    AppendError(&out_, "ERR Protocol error: query buffer limit exceeded");
    closing_ = true;
  }
  // The client stopped sending while an earlier routed add waited, and now
  // a WAIT or QEXISTS would wait: the rule of OnEvents applies (the caller
  // flushes).
  if (awaiting_reply_ && peer_shut_write_ && !session_.deferred_answers_half_closed) EndWaitingAtEof();
  if (out_.size() - out_pos_ > ctx_.limits.max_output_bytes) {
    ctx_.counters.output_limit_disconnects.fetch_add(1, std::memory_order_relaxed);
    Shutdown();
  }
}

void Connection::CollectRun(RunKind kind, std::span<const std::string_view> first, size_t first_at, size_t limit,
                            size_t* next) {
  run_items_.assign(1, first[2]);
  // A request that continues the run starts with the same bytes as its first
  // one, up to the item ("*3\r\n$6\r\nBF.ADD\r\n$10\r\ncrawl:seen\r\n"):
  // comparing them first ends a run without parsing the request after it
  // (which the main loop parses anyway).
  const char* const head_begin = in_.data() + first_at;
  const std::string_view head(head_begin, static_cast<size_t>(first[1].data() + first[1].size() + 2 - head_begin));
  // Bounded by `limit` and by the input: every round takes a whole request.
  while (run_items_.size() < limit) {
    const std::string_view rest(in_.data() + *next, in_len_ - *next);
    if (rest.substr(0, head.size()) != head) break;
    const RequestParser::Status st = parser_.Parse(rest);
    const bool continues =
        st == RequestParser::Status::kComplete && parser_.args_in_buffer() && ContinuesRun(first, parser_.args());
    if (!continues || (run_items_.size() == 1 && !RunMayBatch(ctx_, kind, first[1]))) break;
    run_items_.push_back(parser_.args()[2]);
    *next += parser_.consumed();
    parser_.Reset();
  }
  parser_.Reset();  // a request that does not continue the run is parsed again, on its own
}

void Connection::Flush() {
  // Bounded: every round either sends, stops on EAGAIN, or executes more of
  // the (bounded) input.
  while (!closed_) {
    while (out_pos_ < out_.size()) {
      const ssize_t n = ::send(fd_, out_.data() + out_pos_, out_.size() - out_pos_, MSG_NOSIGNAL);
      if (n > 0) {
        out_pos_ += static_cast<size_t>(n);
        ctx_.counters.bytes_out.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
        last_activity_ = loop_->now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && WouldBlock(errno)) {  // the rest goes out on EPOLLOUT
        out_.erase(0, out_pos_);
        out_pos_ = 0;
        return;
      }
      Shutdown();
      return;
    }
    out_.clear();
    out_pos_ = 0;
    if (out_.capacity() > (1u << 20)) std::string().swap(out_);
    if (!pending_input_) break;
    Process();  // paused input: execute the next batch
    if (out_.empty()) break;
  }
  if (!closed_ && closing_ && out_.empty()) StartLinger();
}

void Connection::UpdateInterest() {
  uint32_t want = 0;
  if (lingering_ || (!pending_input_ && !closing_ && !awaiting_reply_)) want |= EPOLLIN;
  if (awaiting_reply_ && !peer_shut_write_) want |= EPOLLRDHUP;  // noticed once (level-triggered)
  if (out_pos_ < out_.size()) want |= EPOLLOUT;
  if (want == interest_) return;
  interest_ = want;
  if (!loop_->Modify(fd_, want, this).ok()) Shutdown();
}

void Connection::StartLinger() {
  if (closed_ || lingering_) return;
  lingering_ = true;
  if (::shutdown(fd_, SHUT_WR) != 0) {
    Shutdown();
    return;
  }
  linger_deadline_ = loop_->now() + kLingerTime;
  UpdateInterest();
}

void Connection::DrainLinger() {
  char buf[kReadChunk];
  const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
  if (n < 0 && (WouldBlock(errno) || errno == EINTR)) return;
  if (n <= 0 || static_cast<size_t>(n) >= linger_budget_) {
    Shutdown();
    return;
  }
  linger_budget_ -= static_cast<size_t>(n);
}

}  // namespace pollen::resp
