//===- TransferGroups.h - a schedule's transfers as the runtime posts them ===//
//
// The runtime posts a stage's pipeline transfers in groups, at the
// schedule's exchange points (`exchange[s][i]`: one before the stage's i-th
// work; the end is one too): the sends of the works since the last point
// and the receives of the works up to the next, all at once, a group on
// each of four transfer streams (activations and gradients, each toward
// higher stages and toward lower), one group after another on each. A send
// waits until its receive is posted, as NCCL's do; a group ends when all
// of its transfers have. Transfers between chunks of one stage are copies
// and never wait.
//
// checkTransferGroups proves an order cannot hang that way; simulateTransfers
// runs it on a clock that way, so that an order whose groups hold a work back
// (a receive grouped with a send the peer takes late) shows it in its time,
// which the data-dependency clock (simulate) does not see.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_SCHEDULE_TRANSFERGROUPS_H
#define STRATA_RUNTIME_SCHEDULE_TRANSFERGROUPS_H

#include "runtime/schedule/PipelineSim.h"

#include <string>
#include <vector>

namespace strata::sim {

/// Exchange points before every work of every order (the zero-bubble
/// schedules': a B's gradient leaves before the W after it runs).
std::vector<std::vector<bool>>
exchangeBeforeEachWork(const std::vector<std::vector<Work>> &orders);

/// "" or where the stages would wait for each other forever.
std::string checkTransferGroups(const std::vector<std::vector<Work>> &orders,
                                const std::vector<std::vector<bool>> &exchange,
                                int chunks,
                                Placement placement = Placement::Looped);

/// Runs `orders` with `costs` as the executor does: a group starts on its
/// transfer stream when the one before it there has ended, the works
/// whose outputs it sends have ended, the last run of each program it
/// receives for has (the receive overwrites that run's input), and so has
/// the last work issued before it that frees a stash slot of the kind each
/// receive lands in (a forward's input: the chunk's last B; a B's gradient,
/// the backward cut in two: its last W), as the plan's `freed` events make
/// it wait; each transfer ends `costs.transfer` after both of its groups
/// have started; a work starts once the stage is free, the group holding
/// its receives has ended, and the group that sent its program's last run's
/// outputs has (it overwrites them). A hang is reported in `deadlock`.
SimResult simulateTransfers(const std::vector<std::vector<Work>> &orders,
                            const std::vector<std::vector<bool>> &exchange,
                            int chunks, int microbatches, const Costs &costs,
                            Placement placement = Placement::Looped);

} // namespace strata::sim

#endif
