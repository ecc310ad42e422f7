# SPDX-License-Identifier: GPL-2.0
# vhost-blk: in-kernel virtio-blk datapath, guest driver + host vhost device.
#
#   make                      modules for the running kernel + userspace tools
#   make KDIR=<build dir>     modules for any kernel build dir
#   make guest                only the guest driver (needs no vhost source)
#   make help                 all targets

KDIR  ?= /lib/modules/$(shell uname -r)/build
KSRC  ?=
CACHE ?= $(CURDIR)/build/cache
CC    ?= gcc

# Userspace: warnings, and the hardening Debian's dpkg-buildflags gives
# (fortify, stack protector and clash protection, CET, PIE, full RELRO).
HARDEN_CFLAGS  := -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
		  -fstack-clash-protection -fcf-protection -fPIE -Wformat -Werror=format-security
HARDEN_LDFLAGS := -pie -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack
UCFLAGS := -O2 -g -Wall -Wextra -Wno-unused-parameter $(HARDEN_CFLAGS) \
	   -I$(CURDIR)/include/uapi $(EXTRA_UCFLAGS)
ULDFLAGS := $(HARDEN_LDFLAGS) $(EXTRA_ULDFLAGS)

# The project's version: dkms.conf's, which the modules' MODULE_VERSION matches.
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' \
	     "$(dir $(abspath $(firstword $(MAKEFILE_LIST))))dkms.conf" 2>/dev/null)
BRIDGE := tools/vhost-blk-bridge/vhost-blk-bridge
TOOLS  := $(BRIDGE) selftests/vhost_blk/vhost_blk_test tools/cost-plugin/vbmark
# The cost-counting TCG plugin, for the QEMU installed here (make bench).
PLUGIN := build/plugin/libvbcount.so
MAN    := build/man/vhost-blk-bridge.8
DIST   := tools/vhost-blk-bridge/dist

# The release KDIR builds for (Debian's headers carry the upstream version in
# include/config/kernel.release; utsrelease.h has the real one).
KREL = $(shell sed -n 's/^\#define UTS_RELEASE "\(.*\)"/\1/p' $(KDIR)/include/generated/utsrelease.h)

PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
# systemd, udev and sysusers all read these under /usr/local/lib as under /usr/lib.
UNITDIR     ?= $(PREFIX)/lib/systemd/system
UDEVDIR     ?= $(PREFIX)/lib/udev/rules.d
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d

# The kernel build, with or without the host module (GUEST_ONLY=y: no vhost source).
kbuild = $(MAKE) -C "$(KDIR)" M="$(CURDIR)"
vhost_src = vsrc=$$(scripts/find-vhost-src.sh "$(KDIR)" "$(KSRC)" "$(CACHE)") || exit 1

# The compiler of the kernel in KDIR, as its headers name it (or CC= given here).
# When this machine lacks it (Debian's 7.x kernels: gcc-14, on Debian 12), the
# kernel builds (modules, guest, sparse) run in a Debian 13 rootfs that has it:
# scripts/rootfs.sh makes it once under build/rootfs (mmdebstrap, root) and
# runs make there with this tree, KDIR's and the cache bind-mounted (at their
# real paths: /lib/modules/REL/build is a link the rootfs does not have).
KCC = $(if $(filter command line,$(origin CC)),$(firstword $(CC)),$(shell sed -n \
	's/^\#define LINUX_COMPILER[[:space:]]*"\([^ ]*\).*/\1/p' "$(KDIR)/include/generated/compile.h" 2>/dev/null))
IN_ROOTFS ?=
NEED_ROOTFS := $(if $(IN_ROOTFS),,$(if $(KCC),$(if $(shell command -v "$(KCC)" 2>/dev/null),,y)))
in_rootfs = mkdir -p "$(CACHE)" && scripts/rootfs.sh run --bind "$(CURDIR)" --bind "$(CACHE)" \
	--bind "$(dir $(realpath $(KDIR)))" --bind "$(dir $(realpath $(KDIR)/scripts))" \
	$(if $(KSRC),--bind "$(KSRC)") -- $(MAKE) -C "$(CURDIR)" IN_ROOTFS=1 \
	KDIR="$(realpath $(KDIR))" CACHE="$(realpath $(CACHE))"

.PHONY: all modules guest tools plugin man clean deps deps-build check demo bench flake-rate help sparse \
	install install-modules install-guest install-bridge uninstall uninstall-guest \
	dkms-add dkms-add-guest

all: modules tools

ifneq ($(NEED_ROOTFS),)
# The vhost source is found and its version checked here, where the machine's
# package records are; the rootfs build gets the checked copy as KSRC.
modules sparse:
	@echo "$(KCC) (the compiler of $(KDIR)) is not here: building in the Debian 13 rootfs" >&2
	@$(vhost_src); $(in_rootfs) $@ KSRC="$$vsrc"
guest:
	@echo "$(KCC) (the compiler of $(KDIR)) is not here: building in the Debian 13 rootfs" >&2
	@$(in_rootfs) $@
else
modules:
	@$(vhost_src); $(kbuild) VHOST_SRC="$$vsrc" modules

# The guest driver alone, from the guest kernel's headers: no vhost.h needed.
guest:
	$(kbuild) GUEST_ONLY=y modules

# sparse build of both modules; any warning printed by sparse is in the output.
sparse:
	@$(vhost_src); $(kbuild) VHOST_SRC="$$vsrc" C=2 modules
endif

tools: $(TOOLS)

$(BRIDGE): $(wildcard tools/vhost-blk-bridge/*.[ch]) include/uapi/linux/vhost_blk.h tools/include/vhost_workers.h Makefile dkms.conf
	$(CC) $(UCFLAGS) -I$(CURDIR)/tools/include -DBRIDGE_VERSION='"$(VERSION)"' \
		-o $@ $(filter %.c,$^) $(ULDFLAGS) -lseccomp

selftests/vhost_blk/vhost_blk_test: $(wildcard selftests/vhost_blk/*.[ch]) include/uapi/linux/vhost_blk.h tools/include/vhost_workers.h Makefile
	$(CC) $(UCFLAGS) -I$(CURDIR)/tools/include -pthread -o $@ $(filter %.c,$^) $(ULDFLAGS)

# The guest's marker program: static, so one binary serves every VM image.
tools/cost-plugin/vbmark: tools/cost-plugin/vbmark.c
	$(CC) -O2 -Wall -Wextra -static -o $@ $<

plugin: $(PLUGIN)

$(PLUGIN): tools/cost-plugin/vbcount.c
	@hdr=$$(scripts/qemu-plugin-api.sh "$(CACHE)") || exit 1; \
	glib=$$(pkg-config --cflags glib-2.0) || { echo "plugin: glib headers missing (make deps)" >&2; exit 1; }; \
	mkdir -p $(dir $@) && \
	$(CC) -O2 -g -Wall -Wextra -Wno-unused-parameter -shared -fPIC -I"$$hdr" $$glib -o $@ $<

# vhost-blk-bridge(8) from its reStructuredText source (python3-docutils).
man: $(MAN)

$(MAN): Documentation/vhost-blk-bridge.8.rst
	@command -v rst2man >/dev/null || { echo "rst2man not found: install python3-docutils (make deps-build)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	rst2man --exit-status=2 $< $@.tmp && mv $@.tmp $@

# Everything for a host: both modules (+ depmod), the bridge, its man page, the
# systemd units, the udev rule for /dev/vhost-blk and the bridge's system user.
# DESTDIR stages everything under another root (modules and depmod included);
# without DESTDIR the user is created and udev and systemd are told.
install: install-modules install-bridge

install-modules: modules
	@$(vhost_src); $(kbuild) VHOST_SRC="$$vsrc" INSTALL_MOD_DIR=updates \
		$(if $(DESTDIR),INSTALL_MOD_PATH="$(DESTDIR)") modules_install
	depmod $(if $(DESTDIR),-b "$(DESTDIR)") -a "$(KREL)"

# A guest: virtio_blk_bio only.
install-guest: guest
	$(kbuild) GUEST_ONLY=y INSTALL_MOD_DIR=updates \
		$(if $(DESTDIR),INSTALL_MOD_PATH="$(DESTDIR)") modules_install
	depmod $(if $(DESTDIR),-b "$(DESTDIR)") -a "$(KREL)"

install-bridge: $(BRIDGE) $(MAN)
	install -D -m 755 $(BRIDGE) $(DESTDIR)$(BINDIR)/vhost-blk-bridge
	install -D -m 644 $(MAN) $(DESTDIR)$(MANDIR)/man8/vhost-blk-bridge.8
	install -D -m 644 $(DIST)/vhost-blk-bridge@.socket $(DESTDIR)$(UNITDIR)/vhost-blk-bridge@.socket
	@mkdir -p build/dist
	sed 's|@BINDIR@|$(BINDIR)|g' $(DIST)/vhost-blk-bridge@.service.in >build/dist/vhost-blk-bridge@.service
	install -D -m 644 build/dist/vhost-blk-bridge@.service $(DESTDIR)$(UNITDIR)/vhost-blk-bridge@.service
	install -D -m 644 $(DIST)/60-vhost-blk.rules $(DESTDIR)$(UDEVDIR)/60-vhost-blk.rules
	install -D -m 644 $(DIST)/vhost-blk-bridge.sysusers $(DESTDIR)$(SYSUSERSDIR)/vhost-blk-bridge.conf
ifeq ($(DESTDIR),)
	@scripts/install-post.sh "$(SYSUSERSDIR)/vhost-blk-bridge.conf"
endif

uninstall: uninstall-guest
	rm -f $(DESTDIR)/lib/modules/$(KREL)/updates/vhost_blk/vhost_blk.ko*
	-rmdir $(DESTDIR)/lib/modules/$(KREL)/updates/vhost_blk 2>/dev/null
	depmod $(if $(DESTDIR),-b "$(DESTDIR)") -a "$(KREL)"
	rm -f $(DESTDIR)$(BINDIR)/vhost-blk-bridge $(DESTDIR)$(MANDIR)/man8/vhost-blk-bridge.8 \
	      $(DESTDIR)$(UNITDIR)/vhost-blk-bridge@.socket $(DESTDIR)$(UNITDIR)/vhost-blk-bridge@.service \
	      $(DESTDIR)$(UDEVDIR)/60-vhost-blk.rules $(DESTDIR)$(SYSUSERSDIR)/vhost-blk-bridge.conf

uninstall-guest:
	rm -f $(DESTDIR)/lib/modules/$(KREL)/updates/virtio_blk_bio/virtio_blk_bio.ko*
	-rmdir $(DESTDIR)/lib/modules/$(KREL)/updates/virtio_blk_bio 2>/dev/null
	depmod $(if $(DESTDIR),-b "$(DESTDIR)") -a "$(KREL)"

# DKMS: stage the package's files in /usr/src/NAME-VERSION and add it; then
# dkms install vhost-blk/VERSION (a host) or virtio-blk-bio/VERSION (a guest).
dkms-add:
	dkms add "$$(scripts/dkms-src.sh host)"

dkms-add-guest:
	dkms add "$$(scripts/dkms-src.sh guest)"

clean:
	@if [ -d "$(KDIR)" ]; then $(MAKE) -C "$(KDIR)" M="$(CURDIR)" VHOST_SRC=clean clean; fi
	rm -f $(TOOLS) $(PLUGIN)
	rm -rf build/k build/vm build/check build/man build/dist

# Everything make check, make demo and make bench need (the toolchain and the test
# kit: QEMU, libvirt, fio, ..., the test kernels unpacked into build/kernels).
deps:
	scripts/deps.sh test

# What building and installing on this machine needs: the toolchain, the headers of
# the running kernel (or of KDIR) and its vhost source, dkms, rst2man.
deps-build:
	scripts/deps.sh build $(if $(filter command line,$(origin KDIR)),"$(KDIR)")

# KERNELS="6.12 7.3 6.1" (default all three) or KERNELS=6.1; the full suite on
# FULL_KERNELS (default 6.12), first, the core tests on the others; SLOW=1: the
# slow tests, and the full suite on every kernel
check:
	SLOW="$(SLOW)" FULL_KERNELS="$(FULL_KERNELS)" scripts/check.sh $(KERNELS)

# The main job on an embedded default: L2 host + bridge + L3 guest, a short fio table.
demo:
	scripts/demo.sh $(if $(KERNEL),--kernel $(KERNEL))

# KERNELS=6.12 (default) QUICK=1 REPS=3 ROWS="..." BACKENDS="nullb nullb-lat file nbd" IOS=8192,
# and the variables of Documentation/benchmarks.rst ("Running it"), passed on to scripts/bench.sh
bench:
	KERNELS="$(or $(KERNELS),6.12)" QUICK="$(QUICK)" scripts/bench.sh

# MINUTES=30 KERNEL=6.12, FLAKE_OPTS="--cpu MODEL --kvm-amd PARAMS ...": how often
# nested KVM kills or wedges an L2 here (scripts/flake-rate.sh --help)
flake-rate:
	scripts/flake-rate.sh --minutes "$(or $(MINUTES),30)" --kernel "$(or $(KERNEL),6.12)" $(FLAKE_OPTS)

# vhost_blk as a git format-patch series against the 7.3 source, generated from
# this tree (make deps KERNELS="6.1 6.12 7.3" unpacks it): O=DIR (default
# build/upstream/series); CHECK=1 then applies, builds and checkpatches it.
.PHONY: upstream
upstream:
	scripts/upstream.sh $(if $(O),-o "$(O)") $(if $(CHECK),--check)

help:
	@echo 'Targets:'
	@echo '  all (default)   both modules for KDIR (default: running kernel) + tools'
	@echo '  modules         vhost_blk/vhost_blk.ko and virtio_blk_bio/virtio_blk_bio.ko'
	@echo '  guest           virtio_blk_bio.ko only, from the kernel headers alone (no vhost source)'
	@echo '  tools           vhost-blk-bridge, the vhost_blk selftest driver, vbmark (cost windows)'
	@echo '  plugin          the TCG plugin make bench counts with (QEMU plugin header: make deps)'
	@echo '  man             build/man/vhost-blk-bridge.8 (rst2man)'
	@echo '  sparse          modules built with sparse (C=2)'
	@echo '  install         modules into /lib/modules/<rel>/updates (+ depmod); the bridge, its man page,'
	@echo '                  systemd units, udev rule and system user under PREFIX; DESTDIR= stages'
	@echo '  install-modules both modules only (+ depmod)'
	@echo '  install-bridge  the bridge only: binary, man page, systemd units, udev rule, system user'
	@echo '  install-guest   virtio_blk_bio only (+ depmod)'
	@echo '  uninstall       remove what install put in place (uninstall-guest: the guest module)'
	@echo '  dkms-add        stage /usr/src/vhost-blk-VERSION (both modules) and dkms add it'
	@echo '  dkms-add-guest  stage /usr/src/virtio-blk-bio-VERSION (guest driver alone) and dkms add it'
	@echo '  deps-build      install what building and installing here needs (root, Debian 12;'
	@echo '                  headers of the running kernel, or KDIR=)'
	@echo '  deps            install the test kit (root, Debian 12): QEMU, libvirt, fio, ...; the test'
	@echo '                  kernels are unpacked into build/kernels, never installed'
	@echo '  check           static checks + VM tests on KERNELS (default "6.12 7.3 6.1"): the full'
	@echo '                  suite on FULL_KERNELS= (6.12), the core tests on the others; L2_BOOTS= (16),'
	@echo '                  CHECK_BUDGET= (4200 s): fresh L2 boots after the nested-KVM flake;'
	@echo '                  CHECK_LIMIT= (4500 s), KERNEL_RESERVE= (1500 s): when L2 boots end; testing.rst'
	@echo '  demo            vhost_blk under stock QEMU end to end, fio table (KERNEL=6.1|6.12)'
	@echo '  bench           benchmark tables, cost.tsv (instructions and VM exits per I/O, counted'
	@echo '                  under TCG by tools/cost-plugin) + plots in results/<date>-<kernel>/;'
	@echo '                  KERNELS= (default 6.12); QUICK=1 short; ROWS=, BACKENDS=, WORKLOADS=,'
	@echo '                  REPS=, IOS=, IOS_QD1=, BASE_REPS=, RUNTIME=, PASSES=, L2_CPUS=, L3_CPUS=,'
	@echo '                  PARAMS=, REPEAT_ROW=, REPEAT_WORKLOADS=, REPEAT_PARAMS=, EXIT_COST=, BUSY_CPUS=,'
	@echo '                  PIN=0, PIN_CPU=, QEMU_POLL_NS=, NULLB_LAT_NS=, DEVICE_OPTS=, L3_HPET=on,'
	@echo '                  EXIT_REASONS=1, BENCH_L2_BOOTS=, BENCH_L2_SECS=, BENCH_NESTED=1,'
	@echo '                  PROFILE=1 (by function: profile.md);'
	@echo '                  RESUME=results/DIR goes on with a run that stopped:'
	@echo '                  Documentation/benchmarks.rst'
	@echo '  flake-rate      L2 deaths and wedges per L3-hour under nested L3 load (not a test);'
	@echo '                  MINUTES= (30), KERNEL= (6.12), FLAKE_OPTS= (scripts/flake-rate.sh --help)'
	@echo '  upstream        vhost_blk as a format-patch series against Linux 7.3 (the 7.3 test kernel'"'"'s'
	@echo '                  source) in O= (default build/upstream/series); CHECK=1: git am, build, checkpatch'
	@echo '  clean'
	@echo 'Variables: KDIR=<kernel build dir> KSRC=<kernel source tree> KERNELS="6.1 6.12 7.3" SLOW=1'
	@echo '           PREFIX=/usr/local DESTDIR= TEST_KERNELS_DIR= (default build/kernels)'
	@echo '           VHOST_BLK_FAULT_INJECTION=y: test modules with fault injection (never for production)'
