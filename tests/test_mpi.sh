#!/bin/sh
# The MPI tests (built when the MPI floor is, see the Makefile): test_mpi_ring and
# test_mpi_ring_backward under `mpirun --oversubscribe -np P` for P = 1..4, then test_mpi_cli (the CLI under mpirun), then
# tests/test_mpi_netns.sh (two network namespaces over TCP); every mpirun bounded by `timeout`. Prints the
# tests' output and one summary line "RESULT test_mpi passed=N failed=M" for tests/run_tests.sh.
# ATTN_BIN (the CLI under test) locates the build directory.
bin=${ATTN_BIN:-build/attn}
build=$(dirname "$bin")
ring="$build/tests/test_mpi_ring"
MPIRUN="mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
passed=0; failed=0
# under `make SAN=1`: Open MPI's own allocations at exit are not ours (they are allocated inside
# libmpi / libopen-pal / its plugins): add them to the suppressions, and unwind malloc stacks
# slowly so that the frames below a plugin (which has no frame pointers) reach libmpi
cli_env=""
case "${LSAN_OPTIONS:-}" in *suppressions=*)
  # test_mpi_cli starts the CLI under mpirun some 30 times (models loaded under ASan): slow unwinding
  # there would take many minutes, so its processes run without leak checks (ASan and UBSan stay on;
  # the MPI code's leaks are checked by test_mpi_ring and the netns test)
  cli_env="LSAN_OPTIONS=$LSAN_OPTIONS:detect_leaks=0 ASAN_OPTIONS=${ASAN_OPTIONS:-}"
  supp=$(printf '%s' "$LSAN_OPTIONS" | sed 's/.*suppressions=\([^:]*\).*/\1/')
  mpisupp=$(mktemp /tmp/attn_mpi_lsan_XXXXXX)
  printf 'leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libpmix.so\nleak:libevent\nleak:libhwloc.so\nleak:mca_\n' > "$mpisupp"
  cat "$supp" >> "$mpisupp" 2>/dev/null
  trap 'rm -f "$mpisupp"' EXIT
  export LSAN_OPTIONS=$(printf '%s' "$LSAN_OPTIONS" | sed "s|suppressions=[^:]*|suppressions=$mpisupp|")
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
esac
note() { # note OK|FAIL message
  if [ "$1" = OK ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL test_mpi: $2"; fi
}
for t in "$ring" "$build/tests/test_mpi_ring_backward"; do
for P in 1 2 3 4; do
  out=$(timeout 60 $MPIRUN -np $P "$t" 2>&1); rc=$?
  printf '%s\n' "$out" | grep -v '^RESULT '
  line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
  if [ -z "$line" ]; then note FAIL "$(basename "$t") -np $P exited $rc without a RESULT line"; continue; fi
  p=$(echo "$line" | sed 's/.*passed=\([0-9]*\).*/\1/'); f=$(echo "$line" | sed 's/.*failed=\([0-9]*\).*/\1/')
  passed=$((passed + p)); failed=$((failed + f))
  [ $rc -ne 0 ] && [ "$f" -eq 0 ] && note FAIL "$(basename "$t") -np $P exited $rc"
done
done
out=$(env $cli_env timeout 300 "$build/tests/test_mpi_cli" 2>&1); rc=$?
printf '%s\n' "$out" | grep -v '^RESULT '
line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
if [ -z "$line" ]; then note FAIL "test_mpi_cli exited $rc without a RESULT line"
else
  p=$(echo "$line" | sed 's/.*passed=\([0-9]*\).*/\1/'); f=$(echo "$line" | sed 's/.*failed=\([0-9]*\).*/\1/')
  passed=$((passed + p)); failed=$((failed + f))
  [ $rc -ne 0 ] && [ "$f" -eq 0 ] && note FAIL "test_mpi_cli exited $rc"
fi
# the same ring and a data-parallel job between two network namespaces over TCP (needs root)
out=$(timeout 240 sh tests/test_mpi_netns.sh 2>&1); rc=$?
printf '%s\n' "$out" | grep -v '^RESULT '
line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
if [ -z "$line" ]; then note FAIL "test_mpi_netns.sh exited $rc without a RESULT line"
else
  p=$(echo "$line" | sed 's/.*passed=\([0-9]*\).*/\1/'); f=$(echo "$line" | sed 's/.*failed=\([0-9]*\).*/\1/')
  passed=$((passed + p)); failed=$((failed + f))
  [ $rc -ne 0 ] && [ "$f" -eq 0 ] && note FAIL "test_mpi_netns.sh exited $rc"
fi
echo "RESULT test_mpi passed=$passed failed=$failed"
[ "$failed" -eq 0 ]
