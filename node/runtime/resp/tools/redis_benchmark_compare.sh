#!/bin/bash
# redis-benchmark: pollend BF.ADD / BF.EXISTS on random items next to redis-server SET / GET,
# same machine, same run, pipeline 1 and 16, 1 and 8 clients; prints rates and ratios.
#   usage: [THREADS=<resp threads>] [N=<requests>] redis_benchmark_compare.sh <path to pollend>
# Uses ports 16380 (pollend RESP), 17946 (gossip), 16390 (redis-server) on 127.0.0.1.
set -u
POLLEND=${1:?pollend path}
N=${N:-50000}
LOGDIR=$(mktemp -d)
SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
POLLEN_SECRET=$SECRET timeout 600 "$POLLEND" --node-name bench --gossip-bind 127.0.0.1:17946 --resp-bind 127.0.0.1:16380 \
  --http-bind "" --log-level warn --resp-threads ${THREADS:-1} > "$LOGDIR/pollend.log" 2>&1 &
PP=$!
timeout 600 redis-server --port 16390 --save '' --appendonly no > "$LOGDIR/redis.log" 2>&1 &
RP=$!
for i in $(seq 50); do redis-cli -p 16380 PING >/dev/null 2>&1 && redis-cli -p 16390 PING >/dev/null 2>&1 && break; sleep 0.2; done
rps() { timeout 120 redis-benchmark -q "$@" 2>/dev/null | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1; }
printf "%-4s %-3s %12s %12s %6s %12s %12s %6s\n" c P BF.ADD SET ratio BF.EXISTS GET ratio
for c in 1 8; do for P in 1 16; do
  a=$(rps -p 16380 -n $N -c $c -P $P -r 1000000 BF.ADD crawl:seen __rand_int__)
  s=$(rps -p 16390 -n $N -c $c -P $P -r 1000000 -t set)
  e=$(rps -p 16380 -n $N -c $c -P $P -r 1000000 BF.EXISTS crawl:seen __rand_int__)
  g=$(rps -p 16390 -n $N -c $c -P $P -r 1000000 -t get)
  printf "%-4s %-3s %12s %12s %6.2f %12s %12s %6.2f\n" $c $P $a $s $(echo "${a:-0}/${s:-1}" | bc -l) $e $g $(echo "${e:-0}/${g:-1}" | bc -l)
done; done
kill $PP $RP; wait $PP $RP 2>/dev/null
