#!/bin/bash
# usage: run.sh NAME runner-args...   (results in /work/l7/NAME)
cd /work/main
name=$1; shift; d=/work/l7/$name; mkdir -p $d
{ date -u; uptime; } > $d/uptime.txt
echo "go run ./bench/runner $* -out $d" > $d/command.txt
( while sleep 30; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg) lbplane_rss_kb=$(ps -C lbplane -o rss= | head -1) envoy_rss_kb=$(ps -C envoy -o rss= | tr '\n' ' ')"; done ) > $d/samples.txt &
s=$!
go run ./bench/runner "$@" -out $d > $d/stdout.txt 2> $d/stderr.txt
echo "rc=$?" >> $d/uptime.txt; kill $s
{ date -u; uptime; } >> $d/uptime.txt
