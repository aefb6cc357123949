#!/bin/sh
# Two test hosts on one machine: network namespaces A (10.213.77.1) and B (10.213.77.2) joined by
# a veth pair, made here and removed on exit (also on failure or Ctrl-C). mpirun runs in A; Open
# MPI's rsh launcher starts B's daemon through `ip netns exec` (an agent script), and the ranks
# talk over Open MPI's TCP transport (btl tcp, oob tcp) restricted to the veth subnet: the ring
# (test_mpi_ring, -np 2 and -np 4: two ranks per host) and a data-parallel job (attn embed -np 2,
# compared byte for byte with one process) cross the veth, whose byte counters must grow by at
# least the key/value bytes the ring moves. Needs root and iproute2's `ip`; otherwise it says why
# and counts nothing. Prints "RESULT test_mpi_netns passed=N failed=M".
bin=${ATTN_BIN:-build/attn}
build=$(dirname "$bin")
passed=0; failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL test_mpi_netns: $1"; }
finish() { echo "RESULT test_mpi_netns passed=$passed failed=$failed"; [ "$failed" -eq 0 ]; exit $?; }
skip() { echo "test_mpi_netns: SKIPPED (nothing checked): $1"; finish; }

[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need CAP_NET_ADMIN)"
command -v ip >/dev/null 2>&1 || skip "iproute2's ip is not installed (apt-get install iproute2)"
command -v mpirun >/dev/null 2>&1 || skip "mpirun is not installed (openmpi-bin)"

A=attn_mpi_a_$$; B=attn_mpi_b_$$; VA=amv$$a; VB=amv$$b
tmp=$(mktemp -d /tmp/attn_netns_XXXXXX)
cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM
ip netns add "$A" 2>"$tmp/err" || skip "cannot create a network namespace: $(cat "$tmp/err")"
ip netns add "$B" && ip link add "$VA" type veth peer name "$VB" &&
  ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" &&
  ip -n "$A" addr add 10.213.77.1/24 dev "$VA" && ip -n "$B" addr add 10.213.77.2/24 dev "$VB" &&
  ip -n "$A" link set "$VA" up && ip -n "$B" link set "$VB" up &&
  ip -n "$A" link set lo up && ip -n "$B" link set lo up || skip "cannot set up the veth pair"

# the launcher's "remote shell": AGENT [options] HOST COMMAND... -> the command inside B's namespace
cat > "$tmp/agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
[ "\$host" = 10.213.77.2 ] || { echo "agent: unknown host \$host" >&2; exit 1; }
exec ip netns exec $B /bin/sh -c "\$*"
AGENT
chmod +x "$tmp/agent"
printf '10.213.77.1 slots=2\n10.213.77.2 slots=2\n' > "$tmp/hosts"
MPIRUN="mpirun --allow-run-as-root --hostfile $tmp/hosts --mca plm_rsh_agent $tmp/agent \
  --mca btl self,tcp --mca btl_tcp_if_include 10.213.77.0/24 --mca oob_tcp_if_include 10.213.77.0/24 \
  -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1"
txb() { ip netns exec "$B" cat /sys/class/net/"$VB"/statistics/tx_bytes; }
rxb() { ip netns exec "$B" cat /sys/class/net/"$VB"/statistics/rx_bytes; }

for np in 2 4; do
  t0=$(txb); r0=$(rxb)
  out=$(cd "$(pwd)" && timeout 90 ip netns exec "$A" $MPIRUN --map-by node -np $np "$build/tests/test_mpi_ring" 2>&1); rc=$?
  t1=$(txb); r1=$(rxb)
  line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
  f=$(echo "$line" | sed -n 's/.*failed=\([0-9]*\).*/\1/p'); p=$(echo "$line" | sed -n 's/.*passed=\([0-9]*\).*/\1/p')
  if [ $rc -eq 0 ] && [ -n "$p" ] && [ "$f" = 0 ]; then ok; echo "test_mpi_netns: ring -np $np across 2 namespaces: $p checks passed"
  else bad "ring -np $np across namespaces: exit $rc: $(printf '%s\n' "$out" | tail -n 15)"; fi
  # the ring cases move about 270 KB each way at -np 2 (the large-D case alone 100 KB)
  sent=$((t1 - t0)); recv=$((r1 - r0))
  echo "test_mpi_netns: -np $np: the veth in $B sent $sent and received $recv bytes"
  if [ $sent -gt 100000 ] && [ $recv -gt 100000 ]; then ok; else bad "-np $np: too little traffic over the veth ($sent / $recv bytes): not TCP between the namespaces?"; fi
done

# a data-parallel job across the two hosts: attn embed -np 2 = one process, byte for byte
model=models/all-MiniLM-L6-v2
if [ -d "$model" ]; then
  i=0; while [ $i -lt 24 ]; do echo "sentence $i of the netns test with $(printf '%*s' $((i % 9)) '' | tr ' ' 'x') words"; i=$((i + 1)); done > "$tmp/texts"
  "$bin" embed --model "$model" --threads 1 --batch 4 -o "$tmp/one.npy" < "$tmp/texts" || bad "attn embed (one process) failed"
  out=$(timeout 90 ip netns exec "$A" $MPIRUN --map-by node -np 2 "$bin" embed --model "$model" --threads 1 --batch 4 \
        -o "$tmp/two.npy" < "$tmp/texts" 2>&1); rc=$?
  if [ $rc -eq 0 ] && cmp -s "$tmp/one.npy" "$tmp/two.npy"; then ok; echo "test_mpi_netns: embed -np 2 across namespaces: identical output"
  else bad "embed -np 2 across namespaces: exit $rc, outputs differ or missing: $out"; fi
else
  echo "test_mpi_netns: $model missing: the data-parallel job across namespaces is not tested"
fi
finish
