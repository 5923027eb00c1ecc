#!/bin/sh
# A save that finds the disk full: run inside a mount namespace of its own
# (unshare --mount), with a small tmpfs at DIR/disk.
#   full_disk.sh PLAN DIR
# The first save fits; the disk is then filled, and the next save must fail
# with a message naming the disk, leaving the first checkpoint the one the
# marker names and loadable.
set -u
plan=$1 dir=$2
mkdir -p "$dir/disk"
mount -t tmpfs -o size=3m none "$dir/disk" || exit 1
strata-run "$plan" --train-iters 8 --save "$dir/disk/ck" --exit-interval 2 > "$dir/first.log" || exit 1
dd if=/dev/zero of="$dir/disk/filler" bs=64k 2>/dev/null
strata-run "$plan" --train-iters 8 --load "$dir/disk/ck" --save "$dir/disk/ck" \
  --exit-interval 4 > "$dir/second.log" 2>&1
echo "second run: exit status $?"
grep 'error' "$dir/second.log"
echo "marker: $(cat "$dir/disk/ck/latest_checkpointed_iteration.txt")"
rm -f "$dir/disk/filler"
strata-run "$plan" --train-iters 8 --load "$dir/disk/ck" --exit-interval 4 | grep -o 'iteration *4/ *8'
