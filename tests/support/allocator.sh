#!/bin/sh
# CTest unit/allocator (tests/cmake/allocator.cmake): checks which allocator the evald
# binary runs on and whether it imports glibc's malloc_trim.
# Usage: allocator.sh EVALD_BINARY jemalloc|glibc
set -u
bin=$1
want=$2
command -v readelf >/dev/null 2>&1 || { echo "SKIPPED: readelf (binutils) is not installed"; exit 77; }
needed=$(readelf -d "$bin" | grep NEEDED)
imports=$(readelf --dyn-syms -W "$bin" | awk '$7 == "UND" { print $8 }' | sed 's/@.*//')
has_jemalloc=no
echo "$needed" | grep -q 'libjemalloc' && has_jemalloc=yes
has_trim=no
echo "$imports" | grep -qx 'malloc_trim' && has_trim=yes
echo "allocator: $bin links jemalloc: $has_jemalloc; imports malloc_trim: $has_trim (want $want)"
case $want in
jemalloc)
    [ "$has_jemalloc" = yes ] || { echo "allocator: evald does not link libjemalloc"; exit 1; }
    [ "$has_trim" = no ] || { echo "allocator: evald links jemalloc and still calls glibc's malloc_trim"; exit 1; }
    ;;
glibc)
    [ "$has_jemalloc" = no ] || { echo "allocator: evald links libjemalloc in a build that should not"; exit 1; }
    ;;
*)
    echo "allocator: unknown allocator $want" >&2
    exit 2
    ;;
esac
