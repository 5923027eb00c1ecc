//===- StagedCollectives.cpp - GPU collectives through host memory --------===//
#include "runtime/comm/StagedCollectives.h"

namespace strata::runtime {

StagedCollectives::StagedCollectives(Transport &transport, Backend &device,
                                     std::chrono::milliseconds timeout)
    // The ring's work runs as it is submitted: the stream was made idle
    // and the operands are host copies.
    : RingCollectives(transport, runNow, timeout), device(device) {}

std::vector<uint8_t> StagedCollectives::fetch(Stream stream, Operand operand) {
  // Stream-ordered: the copy sees the stream's earlier work; waiting for
  // it makes the host bytes readable.
  std::vector<uint8_t> host(operand.buffer->bytes);
  device.copyOut(stream, host.data(), operand.data, host.size());
  device.synchronizeStream(stream);
  return host;
}

void StagedCollectives::collective(Stream stream, const CollectiveOp &op,
                                   Operand in, Operand out,
                                   const std::string &where) {
  // An operand that lies inside the other (an in-place all-reduce, a
  // gather whose input is its own block of the output, a scatter whose
  // output is its block of the input) is a view of the one host copy, as
  // it is on the device: the ring sees what the CPU backend would.
  auto *inBegin = static_cast<uint8_t *>(in.data);
  auto *outBegin = static_cast<uint8_t *>(out.data);
  size_t inBytes = in.buffer->bytes, outBytes = out.buffer->bytes;
  auto within = [](uint8_t *inner, size_t innerBytes, uint8_t *outer,
                   size_t outerBytes) {
    return inner >= outer && inner + innerBytes <= outer + outerBytes;
  };
  std::vector<uint8_t> staged, separate;
  uint8_t *hostIn = nullptr, *hostOut = nullptr;
  if (within(inBegin, inBytes, outBegin, outBytes)) {
    staged = fetch(stream, out);
    hostOut = staged.data();
    hostIn = hostOut + (inBegin - outBegin);
  } else if (within(outBegin, outBytes, inBegin, inBytes)) {
    staged = fetch(stream, in);
    hostIn = staged.data();
    hostOut = hostIn + (outBegin - inBegin);
  } else {
    staged = fetch(stream, in);
    separate.resize(outBytes);
    hostIn = staged.data();
    hostOut = separate.data();
  }
  RingCollectives::collective(stream, op, {hostIn, in.buffer},
                              {hostOut, out.buffer}, where);
  device.copyIn(stream, out.data, hostOut, outBytes);
}

void StagedCollectives::exchange(Stream stream, std::vector<Transfer> sends,
                                 std::vector<Transfer> receives) {
  if (sends.empty() && receives.empty())
    return;
  std::vector<std::vector<uint8_t>> staged;
  staged.reserve(sends.size() + receives.size());
  std::vector<Transfer> hostSends = std::move(sends), hostReceives = receives;
  for (Transfer &t : hostSends) {
    staged.push_back(fetch(stream, t.buffer));
    t.buffer.data = staged.back().data();
  }
  for (Transfer &t : hostReceives) {
    staged.emplace_back(t.buffer.buffer->bytes);
    t.buffer.data = staged.back().data();
  }
  RingCollectives::exchange(stream, std::move(hostSends), hostReceives);
  for (size_t i = 0; i < receives.size(); ++i)
    device.copyIn(stream, receives[i].buffer.data, hostReceives[i].buffer.data,
                  receives[i].buffer.buffer->bytes);
}

} // namespace strata::runtime
