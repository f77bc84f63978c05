#!/bin/bash
# Stage 2 of the real-kernel VM (see vm.ts): PID 1, on the host's root over 9p.
set -u
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs tmpfs /run
mkdir -p "$FH_VM_SRC"
mount --bind "$FH_SRC" "$FH_VM_SRC"
mount --bind "$FH_MODULES" /lib/modules
# Fresh tmpfs: iperf3 (and anything that unlinks open temp files) fails on 9p.
mount -t tmpfs tmpfs /tmp
mkdir -p /tmp/home
export NODE_COMPILE_CACHE="$FH_VM_SRC/.cache/node-compile" HOME=/tmp/home PATH="$FH_VM_SRC/node_modules/node/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ip link set lo up
cd "$FH_VM_SRC"
echo "stage2: kernel $(uname -r), running $FH_SCRIPT"
bash "$FH_SCRIPT"
code=$?
echo "FLOWHINT_EXIT=$code"
sync
echo o > /proc/sysrq-trigger
sleep 10
