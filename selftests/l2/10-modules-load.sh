#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check: core
# Both modules load and unload cleanly in L2 (the kernel log is checked by the runner).
check() { if "$@" >/tmp/cmd.out 2>&1; then echo "ok - $desc"; else echo "not ok - $desc"; cat /tmp/cmd.out; fi; }
desc="modprobe vhost_blk" check modprobe vhost_blk
desc="/dev/vhost-blk exists" check test -c /dev/vhost-blk
desc="rmmod vhost_blk" check rmmod vhost_blk
desc="vhost_blk gone after rmmod" check sh -c '! grep -q "^vhost_blk " /proc/modules'
desc="modprobe virtio_blk_bio" check modprobe virtio_blk_bio
desc="rmmod virtio_blk_bio" check rmmod virtio_blk_bio
desc="vhost_blk load/unload 3 times" check sh -c 'for i in 1 2 3; do modprobe vhost_blk && rmmod vhost_blk || exit 1; done'
