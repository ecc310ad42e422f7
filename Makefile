# SPDX-License-Identifier: GPL-2.0
# vhost-blk: in-kernel virtio-blk datapath, guest driver + host vhost device.
#
#   make                      modules for the running kernel + userspace tools
#   make KDIR=<build dir>     modules for any kernel build dir
#   make help                 all targets

KDIR  ?= /lib/modules/$(shell uname -r)/build
KSRC  ?=
CACHE ?= $(CURDIR)/build/cache
CC    ?= gcc
UCFLAGS := -O2 -g -Wall -Wextra -Wno-unused-parameter -I$(CURDIR)/include/uapi $(EXTRA_UCFLAGS)

TOOLS := tools/vhost-blk-bridge/vhost-blk-bridge selftests/vhost_blk/vhost_blk_test

# The release KDIR builds for (Debian's headers carry the upstream version in
# include/config/kernel.release; utsrelease.h has the real one).
KREL = $(shell sed -n 's/^\#define UTS_RELEASE "\(.*\)"/\1/p' $(KDIR)/include/generated/utsrelease.h)

PREFIX  ?= /usr/local
DESTDIR ?=

.PHONY: all modules tools clean deps check demo bench help sparse install uninstall

all: modules tools

modules:
	@vsrc=$$(scripts/find-vhost-src.sh "$(KDIR)" "$(KSRC)" "$(CACHE)") || exit 1; \
	$(MAKE) -C "$(KDIR)" M="$(CURDIR)" VHOST_SRC="$$vsrc" modules

# sparse build of both modules; any warning printed by sparse is in the output.
sparse:
	@vsrc=$$(scripts/find-vhost-src.sh "$(KDIR)" "$(KSRC)" "$(CACHE)") || exit 1; \
	$(MAKE) -C "$(KDIR)" M="$(CURDIR)" VHOST_SRC="$$vsrc" C=2 modules

tools: $(TOOLS)

tools/vhost-blk-bridge/vhost-blk-bridge: $(wildcard tools/vhost-blk-bridge/*.[ch]) include/uapi/linux/vhost_blk.h
	@if ls tools/vhost-blk-bridge/*.c >/dev/null 2>&1; then \
		$(CC) $(UCFLAGS) -o $@ $(filter %.c,$^); fi

selftests/vhost_blk/vhost_blk_test: $(wildcard selftests/vhost_blk/*.[ch]) include/uapi/linux/vhost_blk.h
	@if ls selftests/vhost_blk/*.c >/dev/null 2>&1; then \
		$(CC) $(UCFLAGS) -pthread -o $@ $(filter %.c,$^); fi

# modules_install + depmod for KDIR's kernel, and the bridge into $(PREFIX)/bin.
# DESTDIR stages everything under another root (modules and depmod included).
install: all
	@vsrc=$$(scripts/find-vhost-src.sh "$(KDIR)" "$(KSRC)" "$(CACHE)") || exit 1; \
	$(MAKE) -C "$(KDIR)" M="$(CURDIR)" VHOST_SRC="$$vsrc" INSTALL_MOD_DIR=updates \
		$(if $(DESTDIR),INSTALL_MOD_PATH="$(DESTDIR)") modules_install
	depmod $(if $(DESTDIR),-b "$(DESTDIR)") -a "$(KREL)"
	@if [ -x tools/vhost-blk-bridge/vhost-blk-bridge ]; then \
		install -D -m 755 tools/vhost-blk-bridge/vhost-blk-bridge $(DESTDIR)$(PREFIX)/bin/vhost-blk-bridge; fi

uninstall:
	rm -f $(DESTDIR)/lib/modules/$(KREL)/updates/vhost_blk/vhost_blk.ko* \
	      $(DESTDIR)/lib/modules/$(KREL)/updates/virtio_blk_bio/virtio_blk_bio.ko*
	depmod $(if $(DESTDIR),-b "$(DESTDIR)") -a "$(KREL)"
	rm -f $(DESTDIR)$(PREFIX)/bin/vhost-blk-bridge

clean:
	@if [ -d "$(KDIR)" ]; then $(MAKE) -C "$(KDIR)" M="$(CURDIR)" VHOST_SRC=clean clean; fi
	rm -f $(TOOLS)
	rm -rf build/k build/vm build/check

deps:
	scripts/deps.sh

# KERNELS="6.1 6.12" (default both) or KERNELS=6.1; SLOW=1 adds the slow tests
check:
	SLOW="$(SLOW)" scripts/check.sh $(KERNELS)

# The main job on an embedded default: L2 host + bridge + L3 guest, a short fio table.
demo:
	scripts/demo.sh $(if $(KERNEL),--kernel $(KERNEL))

# KERNELS=6.12 (default) QUICK=1 REPS=3 ROWS="..." BACKENDS="nullb file"
bench:
	KERNELS="$(or $(KERNELS),6.12)" QUICK="$(QUICK)" scripts/bench.sh

help:
	@echo 'Targets:'
	@echo '  all (default)   both modules for KDIR (default: running kernel) + tools'
	@echo '  modules         vhost_blk/vhost_blk.ko and virtio_blk_bio/virtio_blk_bio.ko'
	@echo '  tools           vhost-blk-bridge and the vhost_blk selftest driver'
	@echo '  sparse          modules built with sparse (C=2)'
	@echo '  install         modules into /lib/modules/<rel>/updates (+ depmod), bridge into PREFIX/bin'
	@echo '  uninstall       remove what install put in place'
	@echo '  deps            install build/test dependencies (root, Debian 12)'
	@echo '  check           static checks + VM tests on KERNELS (default "6.1 6.12"); L2_BOOTS= (5),'
	@echo '                  CHECK_BUDGET= (4200 s): fresh L2 boots after the nested-KVM flake, testing.rst'
	@echo '  demo            vhost_blk under stock QEMU end to end, fio table (KERNEL=6.1|6.12)'
	@echo '  bench           benchmark tables + plots in results/<date>-<kernel>/ (~45 min; QUICK=1: ~10 min;'
	@echo '                  ROWS=, BACKENDS=, WORKLOADS=, REPS=, RUNTIME=, L3_CPUS= (default 2): benchmarks.rst)'
	@echo '  clean'
	@echo 'Variables: KDIR=<kernel build dir> KSRC=<kernel source tree> KERNELS="6.1 6.12" SLOW=1 PREFIX=/usr/local'
	@echo '           VHOST_BLK_FAULT_INJECTION=y: test modules with fault injection (never for production)'
	@echo 'DKMS: dkms.conf packages both modules (see README)'
