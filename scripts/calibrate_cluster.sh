#!/usr/bin/env bash
# Calibrates the communication of a whole cluster into one calibration file that a cluster file
# can point to:
#   1. each node kind once: a single-node sweep on one of its hosts (one process drives all GPUs);
#   2. the network between node kinds: a two-node run per pair of kinds (and per kind with two or
#      more hosts), one process per node, measuring one GPU per node, whole nodes and the NIC p2p;
#   3. `hetplan merge` of all of them (rules in docs/formats.md).
# Launches through mpirun (OpenMPI; needs passwordless ssh between hosts) or srun (inside a Slurm
# allocation). The hetplan binary needs no MPI library: ranks meet through HETPLAN_MASTER_ADDR.
#
# usage: scripts/calibrate_cluster.sh --nodes KIND=HOST[,HOST...] [--nodes KIND=HOST...]
#          --out FILE [--launcher mpirun|srun] [--quick] [--resume] [--workdir DIR]
#          [--hetplan PATH] [--dry-run] [-- extra calibrate-collectives options]
# example: scripts/calibrate_cluster.sh --nodes a100x8=gpu01,gpu02 --nodes h100x8=gpu11 \
#          --out calibration_data/mycluster_comm.json
set -euo pipefail

launcher=mpirun
out=""
workdir=""
hetplan=${HETPLAN_BINARY:-$(cd "$(dirname "$0")/.." && pwd)/build/cli/hetplan}
dry=0
common=()
kinds=()
declare -A hosts_of
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) kind=${2%%=*}; hosts=${2#*=}
             [ -n "$kind" ] && [ -n "$hosts" ] && [ "$kind" != "$2" ] ||
               { echo "calibrate_cluster: --nodes expects KIND=HOST[,HOST...], got '$2'" >&2; exit 2; }
             kinds+=("$kind"); hosts_of[$kind]=$hosts; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --launcher) launcher=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --hetplan) hetplan=$2; shift 2 ;;
    --quick) common+=(--quick); shift ;;
    --resume) common+=(--resume); shift ;;
    --dry-run) dry=1; shift ;;
    --) shift; common+=("$@"); break ;;
    *) echo "calibrate_cluster: unknown argument '$1' (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "calibrate_cluster: --out FILE is required" >&2; exit 2; }
[ ${#kinds[@]} -gt 0 ] || { echo "calibrate_cluster: give at least one --nodes KIND=HOST" >&2; exit 2; }
case "$launcher" in mpirun|srun) ;; *) echo "calibrate_cluster: --launcher mpirun or srun" >&2; exit 2 ;; esac
workdir=${workdir:-$(dirname "$out")/$(basename "$out" .json)_parts}
mkdir -p "$workdir"
port=${HETPLAN_MASTER_PORT:-29611}

# run HOSTS OUTFILE: one process per host, rank 0 on the first host.
run() {
  local hosts=$1 file=$2 n first
  n=$(echo "$hosts" | tr ',' '\n' | wc -l)
  first=${hosts%%,*}
  local cmd
  if [ "$launcher" = mpirun ]; then
    cmd=(mpirun --allow-run-as-root -np "$n" -H "$hosts" --map-by node --bind-to none
         -x HETPLAN_MASTER_ADDR="$first" -x HETPLAN_MASTER_PORT="$port" -x PATH -x LD_LIBRARY_PATH
         "$hetplan" calibrate-collectives --out "$file" "${common[@]}")
  else
    cmd=(env HETPLAN_MASTER_ADDR="$first" HETPLAN_MASTER_PORT="$port"
         srun --nodes="$n" --ntasks="$n" --ntasks-per-node=1 --nodelist="$hosts"
         "$hetplan" calibrate-collectives --out "$file" "${common[@]}")
  fi
  echo "+ ${cmd[*]}"
  [ "$dry" = 1 ] || "${cmd[@]}"
}

parts=()
# 1. Each node kind once, on its first host.
for kind in "${kinds[@]}"; do
  host=${hosts_of[$kind]%%,*}
  run "$host" "$workdir/node_$kind.json"
  parts+=("$workdir/node_$kind.json")
done
# 2. The network: every pair of kinds (first host of each), and within a kind with 2+ hosts.
for ((i = 0; i < ${#kinds[@]}; i++)); do
  a=${kinds[$i]}
  ha=${hosts_of[$a]%%,*}
  rest=${hosts_of[$a]#*,}
  if [ "$rest" != "${hosts_of[$a]}" ]; then
    run "$ha,${rest%%,*}" "$workdir/net_${a}_${a}.json"
    parts+=("$workdir/net_${a}_${a}.json")
  fi
  for ((j = i + 1; j < ${#kinds[@]}; j++)); do
    b=${kinds[$j]}
    run "$ha,${hosts_of[$b]%%,*}" "$workdir/net_${a}_${b}.json"
    parts+=("$workdir/net_${a}_${b}.json")
  done
done
# 3. One cluster calibration.
echo "+ $hetplan merge ${parts[*]} --out $out"
[ "$dry" = 1 ] || "$hetplan" merge "${parts[@]}" --out "$out"
