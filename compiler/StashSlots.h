//===- StashSlots.h - the stash slot each step of a stage takes -*- C++ -*-===//
//
// A pipeline stage keeps, per chunk of the stage and pool (0: forward
// values B reads, freed at B; 1: forward values W reads, held until W; 2:
// what B computes for W, passed to W), one stash slot per microbatch from
// the step that fills it to the step that frees it. LowerToExec runs a
// stage's order through planStashSlots to give each step its slots and
// the memory plan each pool's slot count. Pools may draw their slots from
// one set (a slot class, as large as its largest member's slot), which
// pays where their busiest times differ: a V's two chunks, the forward's
// pool B frees and the passed one it fills. Plain C++: the unit tests run
// it on the schedules' orders.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_STASHSLOTS_H
#define STRATA_COMPILER_STASHSLOTS_H

#include "runtime/schedule/PipelineSim.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace strata::pipeline {

/// Sums and products of byte counts that saturate at INT64_MAX (sizes can
/// come from a pass's options).
int64_t saturatingAdd(int64_t a, int64_t b);
int64_t saturatingMul(int64_t a, int64_t b);

/// A chunk of the stage (its stash group) and a pool, 0..2.
using StashKey = std::pair<int64_t, int>;

/// What a step does to one slot of `key` for `microbatch`: fills a new
/// one, reads one filled before, or reads it and frees it.
struct StashMove {
  enum class Does { Take, Use, Free };
  StashKey key;
  int64_t microbatch = 0;
  Does does = Does::Take;
};

/// What a step of `phase` does to its chunk's stash (stash group `group`)
/// for `microbatch`: a forward takes a slot kept until B (and, the
/// backward `cut` in two, one held until W); B reads the held one, takes a
/// passed slot and then frees the kept one (it reads one while it fills
/// the other); a whole backward frees the kept one; W frees the held and
/// the passed. The one statement of it, for the lowering and the
/// schedules' memory counts.
std::vector<StashMove> stashMoves(sim::Phase phase, int64_t group,
                                  int64_t microbatch, bool cut);

/// The bytes a slot of a class placed by bytes takes (the arena's
/// alignment, exec::kArenaAlignment; a multiple of it where the places
/// would not fit a slot number): its members lie at multiples of it.
inline constexpr int64_t kStashGranule = 64;

struct StashSlots {
  /// Per step, the slot of each pool it names.
  std::vector<std::map<int, int64_t>> slots;
  /// Each key's class, numbered by the classes' first keys (placed by
  /// bytes: 0 for every key with bytes, one of its own for each without).
  std::map<StashKey, int64_t> classOf;
  /// Per class: the most slots it holds at once, and its slot's bytes.
  std::map<int64_t, int64_t> slotsOfClass, bytesOfClass;
  /// Σ slots × bytes over the classes, and what sharing costs besides.
  int64_t bytes = 0;
  /// Whether any class has two keys.
  bool shared = false;
};

/// Slots for a stage's steps (each step's moves in order: a take before
/// a free within a step gets a slot of its own, so that B never fills the
/// slot it reads), with each key's slot `bytes`. It tries each key alone
/// (as many slots as the key ever holds), keys of equal bytes together,
/// each pool's keys together, and all together, and keeps the grouping
/// whose slots take the fewest bytes (ties: the earlier); and all keys in
/// one class whose slot is kStashGranule bytes, each take placed where
/// its bytes fit best among those free then (its slot number is where, in
/// granules), which pays where slots of unequal sizes would round up. A
/// key of zero bytes stays alone. A use or free of a slot never taken names slot -1.
/// `ifShared`: bytes a key costs besides when it shares its slots (a
/// receive into it then lands in a buffer of its own), counted in the
/// comparison and in `bytes`.
StashSlots planStashSlots(const std::vector<std::vector<StashMove>> &steps,
                          const std::map<StashKey, int64_t> &bytes,
                          const std::map<StashKey, int64_t> &ifShared = {});

} // namespace strata::pipeline

#endif
