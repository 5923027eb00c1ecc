//===- LocalTransport.cpp - ranks as threads of one process ---------------===//
#include "runtime/comm/Transport.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

namespace strata::runtime {

/// A mailbox per (sender, receiver): sends never wait, receives wait for
/// the oldest message from their peer with their tag.
class LocalHub {
public:
  explicit LocalHub(int ranks) : ranks(ranks), boxes(ranks * ranks) {}

  struct Message {
    int tag;
    std::vector<uint8_t> bytes;
  };
  struct Box {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Message> messages;
  };

  Box &box(int from, int to) { return boxes[from * ranks + to]; }
  const int ranks;

private:
  std::vector<Box> boxes;
};

std::shared_ptr<LocalHub> makeLocalHub(int ranks) {
  return std::make_shared<LocalHub>(ranks);
}

namespace {

class LocalTransport : public Transport {
public:
  LocalTransport(std::shared_ptr<LocalHub> hub, int rank)
      : hub(std::move(hub)), me(rank) {}
  int rank() const override { return me; }
  int size() const override { return hub->ranks; }

  void exchange(int to, const void *send, size_t sendBytes, int from,
                void *recv, size_t recvBytes, int tag,
                Clock::time_point deadline, const std::string &what) override {
    this->send(to, send, sendBytes, tag, deadline, what);
    this->recv(from, recv, recvBytes, tag, deadline, what);
  }

  void send(int to, const void *data, size_t bytes, int tag, Clock::time_point,
            const std::string &) override {
    LocalHub::Box &out = hub->box(me, to);
    const auto *begin = static_cast<const uint8_t *>(data);
    std::lock_guard<std::mutex> lock(out.mutex);
    out.messages.push_back({tag, std::vector<uint8_t>(begin, begin + bytes)});
    out.ready.notify_all();
  }

  void recv(int from, void *recv, size_t recvBytes, int tag,
            Clock::time_point deadline, const std::string &what) override {
    LocalHub::Box &in = hub->box(from, me);
    std::unique_lock<std::mutex> lock(in.mutex);
    auto found = in.messages.end();
    auto arrived = [&] {
      found = std::find_if(
          in.messages.begin(), in.messages.end(),
          [&](const LocalHub::Message &m) { return m.tag == tag; });
      return found != in.messages.end();
    };
    if (!in.ready.wait_until(lock, deadline, arrived))
      throw CommTimeout("rank " + std::to_string(me) + ": timed out in " +
                        what + " waiting for rank " + std::to_string(from));
    if (found->bytes.size() != recvBytes)
      throw CommTimeout("rank " + std::to_string(me) + ": in " + what +
                        ", rank " + std::to_string(from) + " sent " +
                        std::to_string(found->bytes.size()) + " bytes where " +
                        std::to_string(recvBytes) +
                        " were expected (the ranks' programs disagree)");
    if (recvBytes) // an empty message may have no buffer (memcpy takes no null)
      std::memcpy(recv, found->bytes.data(), recvBytes);
    in.messages.erase(found);
  }

  void post(int to, const void *data, size_t bytes, int tag) override {
    send(to, data, bytes, tag, Clock::now(), "");
  }
  void flush(Clock::time_point) override {}

private:
  std::shared_ptr<LocalHub> hub;
  int me;
};

} // namespace

std::unique_ptr<Transport> makeLocalTransport(std::shared_ptr<LocalHub> hub,
                                              int rank) {
  return std::make_unique<LocalTransport>(std::move(hub), rank);
}

} // namespace strata::runtime
