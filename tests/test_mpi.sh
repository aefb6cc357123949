#!/bin/sh
# The MPI tests (built when the MPI floor is, see the Makefile): test_mpi_ring and
# test_mpi_ring_backward under `mpirun --oversubscribe -np P` for P = 1..4, then test_mpi_cli (the CLI under mpirun),
# test_mpi_seq2seq (translate and transcribe under mpirun), then
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
result() { # result NAME RC OUTPUT: prints OUTPUT but its RESULT lines and adds the last one's counts;
  # no RESULT line, or a non-zero exit status with no failed check, is one failure more
  printf '%s\n' "$3" | grep -v '^RESULT '
  line=$(printf '%s\n' "$3" | grep '^RESULT ' | tail -n 1)
  if [ -z "$line" ]; then note FAIL "$1 exited $2 without a RESULT line"; return; fi
  p=$(echo "$line" | sed 's/.*passed=\([0-9]*\).*/\1/'); f=$(echo "$line" | sed 's/.*failed=\([0-9]*\).*/\1/')
  passed=$((passed + p)); failed=$((failed + f))
  [ "$2" -ne 0 ] && [ "$f" -eq 0 ] && note FAIL "$1 exited $2"
}
for t in "$ring" "$build/tests/test_mpi_ring_backward"; do
for P in 1 2 3 4; do
  out=$(timeout 60 $MPIRUN -np $P "$t" 2>&1); rc=$?
  result "$(basename "$t") -np $P" $rc "$out"
done
done
out=$(env $cli_env timeout 300 "$build/tests/test_mpi_cli" 2>&1); rc=$?
result test_mpi_cli $rc "$out"
# data-parallel training (tools/mpi_train.c): P = 2 ranks with --batch 4 against one process with
# --batch 8 (same seed, 100 images, 2 epochs = 26 AdamW steps, the last global batch of 4 images
# all on rank 0; --max-norm 0, since clipping to a fixed norm and AdamW's m/sqrt(v) would both hide
# a wrongly scaled gradient average, which the moments then show): every parameter within 1e-4
# absolute (measured 1.4e-5) and AdamW's moments (exp_avg, exp_avg_sq) within 1e-4 of the largest
# moment of their kind (measured 1.5e-7): the gradients differ only in the order of the float32
# sums (~1e-7 relative); the parameters move further than that because AdamW passes a tiny
# gradient's noise on as lr·m/(sqrt(v) + eps) (the key biases' exact gradient is 0). A run stopped
# after epoch 1 and resumed under mpirun equals the 2-epoch run byte for byte; a rank whose labels
# disagree with the images, and a NaN loss, stop every rank with exit status 1 (the loss message
# printed once) and write no model.
fm=/usr/share/datasets/fashion-mnist
td=$(mktemp -d /tmp/attn_mpi_train_XXXXXX)
TA="train vit --train $fm/train-images-idx3-ubyte.gz $fm/train-labels-idx1-ubyte.gz --limit 100 --hidden 16 --layers 2 --heads 2 --mlp 32 --threads 1 --seed 3 --no-progress --epochs 2"
cat > "$td/cmp.py" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); d = b[8 + n:]
    return {k: struct.unpack('<%df' % ((v['data_offsets'][1] - v['data_offsets'][0]) // 4),
                             d[v['data_offsets'][0]:v['data_offsets'][1]]) for k, v in h.items() if k != '__metadata__'}
def diff(a, b, ks):
    return max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in ks), max(max(abs(x) for x in a[k]) for k in ks)
ok = True
for f, kinds in (('model', ('',)), ('optimizer', ('exp_avg.', 'exp_avg_sq.'))):
    a, b = load(sys.argv[1] + '/' + f + '.safetensors'), load(sys.argv[2] + '/' + f + '.safetensors')
    if a.keys() != b.keys() or any(len(a[k]) != len(b[k]) for k in a): sys.exit(f + ': the tensors differ')
    for kind in kinds:
        d, m = diff(a, b, [k for k in a if k.startswith(kind)])
        e = d if f == 'model' else d / m
        print('mpi train: P=2 x batch 4 vs 1 x batch 8: %s %s max |diff| %.3g%s (tolerance 1e-4)' %
              (f, kind or 'parameters', e, '' if f == 'model' else ' of max |value| %.3g' % m))
        ok = ok and e <= 1e-4
sys.exit(0 if ok else 1)
PY
env $cli_env timeout 120 $bin $TA --max-norm 0 --batch 8 -o "$td/one" >/dev/null 2>&1 \
  && env $cli_env timeout 120 $MPIRUN -np 2 $bin $TA --max-norm 0 --batch 4 -o "$td/two" >/dev/null 2>&1 && python3 "$td/cmp.py" "$td/one" "$td/two" \
  && note OK || note FAIL "mpi train: 2 ranks x batch 4 vs 1 process x batch 8"
env $cli_env timeout 120 $MPIRUN -np 2 $bin $TA --max-norm 0 --batch 4 --stop-after 1 -o "$td/res" >/dev/null 2>&1 \
  && env $cli_env timeout 120 $MPIRUN -np 2 $bin train vit --train $fm/train-images-idx3-ubyte.gz $fm/train-labels-idx1-ubyte.gz --limit 100 \
       --threads 1 --no-progress --resume "$td/res" -o "$td/res" >/dev/null 2>&1 \
  && cmp -s "$td/res/model.safetensors" "$td/two/model.safetensors" && cmp -s "$td/res/optimizer.safetensors" "$td/two/optimizer.safetensors" \
  && note OK || note FAIL "mpi train: --resume under mpirun is not bit for bit"
TB="train vit --limit 100 --hidden 16 --layers 2 --heads 2 --mlp 32 --threads 1 --no-progress --batch 4 --epochs 1 -o $td/bad"
out=$(env $cli_env timeout 120 $MPIRUN -np 1 $bin $TB --train $fm/train-images-idx3-ubyte.gz $fm/train-labels-idx1-ubyte.gz \
      : -np 1 $bin $TB --train $fm/train-images-idx3-ubyte.gz $fm/t10k-labels-idx1-ubyte.gz 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "has 10000 labels" && printf '%s' "$out" | grep -q "another rank failed" \
   && [ ! -e "$td/bad/model.safetensors" ]; then note OK; else note FAIL "mpi train: a failing rank (rc $rc): $out"; fi
out=$(env $cli_env timeout 120 $MPIRUN -np 2 $bin $TB --train $fm/train-images-idx3-ubyte.gz $fm/train-labels-idx1-ubyte.gz --lr 1e9 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$out" | grep -c 'loss turned NaN')" -eq 1 ] && [ ! -e "$td/bad/model.safetensors" ]; then note OK
else note FAIL "mpi train: NaN loss (rc $rc): $out"; fi
rm -rf "$td"
# a verb that does not split its work (generate) under mpirun with 2 ranks is refused, said once
# (by rank 0: every rank finds the same usage error), exit 2, nothing on stdout; with one rank it runs
out=$(env $cli_env timeout 120 $MPIRUN -np 2 $bin generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf -p Hi -n 2 --threads 1 2>/dev/null); rc=$?
err=$(env $cli_env timeout 120 $MPIRUN -np 2 $bin generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf -p Hi -n 2 --threads 1 2>&1 >/dev/null)
if [ $rc -ne 0 ] && [ -z "$out" ] && [ "$(printf '%s\n' "$err" | grep -c 'does not split its work across ranks')" -eq 1 ]; then note OK
else note FAIL "generate under mpirun -np 2 (rc $rc, stdout '$out'): $err"; fi
out=$(env $cli_env timeout 120 $MPIRUN -np 1 $bin generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf -p Hi -n 2 --threads 1 2>/dev/null); rc=$?
if [ $rc -eq 0 ] && [ -n "$out" ]; then note OK; else note FAIL "generate under mpirun -np 1 (rc $rc)"; fi
# translate and transcribe under mpirun (tests/test_mpi_seq2seq.c)
out=$(env $cli_env timeout 500 "$build/tests/test_mpi_seq2seq" 2>&1); rc=$?
result test_mpi_seq2seq $rc "$out"
# the same ring and a data-parallel job between two network namespaces over TCP (needs root)
out=$(timeout 240 sh tests/test_mpi_netns.sh 2>&1); rc=$?
result test_mpi_netns.sh $rc "$out"
echo "RESULT test_mpi passed=$passed failed=$failed"
[ "$failed" -eq 0 ]
