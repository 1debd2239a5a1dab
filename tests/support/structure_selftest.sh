#!/bin/sh
# Shows that tests/support/structure.py can fail: a loop of calls planted between three
# compiled files (a -> b -> c -> a) is named with the calls that close it, the same files
# without the loop pass, a source file of 1,001 lines is named, one of 1,000 is not.
# Usage: structure_selftest.sh <structure.py> <C compiler> <scratch dir>
set -eu
check=$1 cc=$2 work=$3
rm -rf "$work" && mkdir -p "$work/src" "$work/obj" "$work/tree/build-x" "$work/tree/lib"
fail() { echo "structure_selftest: $*" >&2; exit 1; }

printf 'void b_fn(void);\nvoid a_fn(void) { b_fn(); }\n' > "$work/src/a.c"
printf 'void c_fn(void);\nvoid b_fn(void) { c_fn(); }\n' > "$work/src/b.c"
printf 'void a_fn(void);\nvoid c_fn(void) { a_fn(); }\n' > "$work/src/c.c"
printf 'void a_fn(void);\nvoid d_fn(void) { a_fn(); }\n' > "$work/src/d.c"
for f in a b c d; do "$cc" -c "$work/src/$f.c" -o "$work/obj/$f.c.o"; done
# A stale object (its source gone) takes no part.
printf 'void a_fn(void);\nvoid gone_fn(void) { a_fn(); }\n' > "$work/gone.c"
"$cc" -c "$work/gone.c" -o "$work/obj/gone.c.o"

if out=$(python3 "$check" calls "$work/obj" "$work/src"); then
  fail "a planted loop passed: $out"
fi
echo "$out" | grep -q 'in a loop: a.c, b.c, c.c$' || fail "the loop is not named: $out"
echo "$out" | grep -q 'c.c -> a.c: a_fn' || fail "the closing call is not named: $out"
echo "$out" | grep -q 'd.c' && fail "a file outside the loop is named: $out"

printf 'void c_fn(void) { }\n' > "$work/src/c.c"
"$cc" -c "$work/src/c.c" -o "$work/obj/c.c.o"
out=$(python3 "$check" calls "$work/obj" "$work/src") || fail "no loop, but the check fails: $out"

seq 1 1001 | sed 's/^/# /' > "$work/tree/lib/long.py"
seq 1 1000 | sed 's/^/# /' > "$work/tree/lib/edge.c"
seq 1 2000 | sed 's/^/# /' > "$work/tree/build-x/generated.c"
if out=$(python3 "$check" lengths "$work/tree"); then
  fail "a file of 1,001 lines passed: $out"
fi
[ "$out" = "lib/long.py: 1001 lines (at most 1000)" ] || fail "unexpected report: $out"
rm "$work/tree/lib/long.py"
out=$(python3 "$check" lengths "$work/tree") || fail "nothing over 1,000 lines, but: $out"
echo "structure_selftest: the checks fail on planted loops and long files"
