#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""bridge-test.py [BRIDGE]: vhost-blk-bridge's socket and protocol handling on
the host, no VM and no /dev/vhost-blk (--no-kernel: the same code, with the
device ioctls left out).

Checks the socket options (--socket-mode, --socket-group, a live or stale
socket at the path), --fd and systemd socket activation, that the backend is
opened once and never again by path, that only memfd and regular-file
descriptors are taken as guest memory, the per-session timeouts (silent
client, partial message), SIGTERM while a reply blocks, transient accept()
errors, writeback = 0 without VIRTIO_BLK_F_FLUSH, the backend's lock while
rings run (--lock-timeout), a ring resumed at its used index when the base
lags (a restart under I/O), online resize (SIGHUP, the
back-end channel's config change message, the capacity in GET_CONFIG), the
dirty log of live migration (LOG_SHMFD, SET_LOG_BASE, the log flag of
SET_VRING_ADDR; a log too small for guest memory refused), a new memory
table while the ring runs and memory a front-end shrank (no crash, no
SIGBUS), memory hotplug (CONFIGURE_MEM_SLOTS: ADD/REM_MEM_REG), STATUS and
RESET_DEVICE, SIGTERM while waiting for the backend's lock, config flags,
the rate limit of the log, the seccomp filter, and the privilege drop (with
--user, and of capabilities as root without it).
Prints TAP-style lines ("ok - ", "not ok - ") for scripts/check.sh; run as
root (the socket group and --user checks need it).
"""
import array
import grp
import os
import pwd
import resource
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BRIDGE = sys.argv[1] if len(sys.argv) > 1 else \
    os.path.join(TOP, "tools/vhost-blk-bridge/vhost-blk-bridge")

# vhost-user requests
GET_FEATURES, SET_FEATURES, SET_OWNER, RESET_OWNER = 1, 2, 3, 4
SET_MEM_TABLE, SET_LOG_BASE = 5, 6
SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE, GET_VRING_BASE = 8, 9, 10, 11
SET_VRING_KICK, SET_VRING_CALL = 12, 13
GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES = 15, 16
SET_VRING_ENABLE, SET_BACKEND_REQ_FD, GET_CONFIG, SET_CONFIG = 18, 21, 24, 25
BACKEND_CONFIG_CHANGE_MSG = 2
NEED_REPLY = 1 << 3
F_FLUSH, F_CONFIG_WCE, F_VERSION_1, F_PROTOCOL = 9, 11, 32, 30
PF_LOG_SHMFD, PF_REPLY_ACK, PF_BACKEND_REQ, PF_CONFIG = 1, 3, 5, 9
PF_CONFIGURE_MEM_SLOTS, PF_RESET_DEVICE, PF_STATUS = 15, 13, 16
RESET_DEVICE, SET_STATUS, GET_STATUS = 34, 39, 40
GET_MAX_MEM_SLOTS, ADD_MEM_REG, REM_MEM_REG = 36, 37, 38
F_LOG_ALL, VRING_F_LOG = 26, 0
WCE_OFF = 32
O_DSYNC = 0o10000
O_NOATIME = os.O_NOATIME

failures = 0
work = tempfile.mkdtemp(prefix="bridge-test.")
procs = []


def ok(desc):
    print("ok - bridge: " + desc, flush=True)


def nok(desc, why=""):
    global failures
    failures += 1
    print("not ok - bridge: " + desc, flush=True)
    for line in str(why).splitlines()[-15:]:
        print("#   " + line, flush=True)


def check(desc, cond, why=""):
    if cond:
        ok(desc)
    else:
        nok(desc, why)
    return cond


def skip(desc, why):
    print("ok - bridge: %s # SKIP %s" % (desc, why), flush=True)


class Bridge:
    """One vhost-blk-bridge process with its log."""

    def __init__(self, name, args, pass_fds=(), env=None, preexec=None,
                 wait_socket=None, binary=None):
        self.log = os.path.join(work, name + ".log")
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen([binary or BRIDGE] + args, stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=self.logf,
                                     pass_fds=pass_fds, env=env,
                                     preexec_fn=preexec)
        procs.append(self.proc)
        self.pid = self.proc.pid
        if wait_socket:
            self.wait_log("listening on", 10)

    def text(self):
        with open(self.log) as f:
            return f.read()

    def wait_log(self, s, secs):
        end = time.time() + secs
        while time.time() < end:
            if s in self.text():
                return True
            if self.proc.poll() is not None and s not in self.text():
                return False
            time.sleep(0.05)
        return s in self.text()

    def stop(self, secs=10):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(secs)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def alive(self):
        return self.proc.poll() is None


def run_bridge(args, secs=10):
    """Run the bridge to its end: (status, output)."""
    p = subprocess.run([BRIDGE] + args, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=secs)
    return p.returncode, p.stdout + p.stderr


def backend_file(name, size=1 << 20):
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def hdr(req, size, flags=1):
    return struct.pack("<III", req, flags, size)


def send(sock, req, payload=b"", fds=(), flags=1):
    data = hdr(req, len(payload), flags) + payload
    if fds:
        sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                               array.array("i", fds))])
    else:
        sock.sendall(data)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def recv_reply(sock):
    h = recv_exact(sock, 12)
    if h is None:
        return None
    req, flags, size = struct.unpack("<III", h)
    payload = recv_exact(sock, size) if size else b""
    return req, flags, payload


def connect(path, timeout=10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


def call(sock, req, payload=b"", fds=()):
    send(sock, req, payload, fds)
    return recv_reply(sock)


def acked(sock, req, payload=b"", fds=()):
    """Send with NEED_REPLY; True on a zero REPLY_ACK, False on a nonzero
    one, None when the session ended instead."""
    send(sock, req, payload, fds, flags=1 | NEED_REPLY)
    try:
        r = recv_reply(sock)
    except (ConnectionResetError, socket.timeout):
        return None
    if r is None:
        return None
    return struct.unpack("<Q", r[2])[0] == 0


def get_features_ok(path, timeout=10):
    try:
        with connect(path, timeout) as s:
            r = call(s, GET_FEATURES)
            return r is not None and r[0] == GET_FEATURES and len(r[2]) == 8
    except OSError:
        return False


def get_wce(sock):
    r = call(sock, GET_CONFIG, struct.pack("<III", WCE_OFF, 1, 0) + b"\0")
    return r[2][-1] if r and len(r[2]) == 13 else None


def set_wce(sock, v):
    return acked(sock, SET_CONFIG, struct.pack("<III", WCE_OFF, 1, 0) + bytes([v]))


def handshake(sock, features):
    """The start of QEMU's handshake: protocol features, owner, features."""
    send(sock, SET_PROTOCOL_FEATURES,
         struct.pack("<Q", (1 << PF_REPLY_ACK) | (1 << PF_CONFIG)))
    send(sock, SET_OWNER)
    return acked(sock, SET_FEATURES, struct.pack("<Q", features))


def memfd(size):
    fd = os.memfd_create("guest-ram")
    os.ftruncate(fd, size)
    return fd


def mem_table(size, qva=0x7f0000000000):
    return struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, size, qva, 0)


def socket_path(name):
    return os.path.join(work, name + ".sock")


# ---------------------------------------------------------------------------

def test_command_line(be):
    rc, out = run_bridge(["--backend", be, "--no-kernel"])
    check("no socket at all: exit status 2", rc == 2, out)
    rc, out = run_bridge(["--backend", be, "--no-kernel", "--fd", "3",
                          "--socket", socket_path("x")])
    check("--fd with --socket: exit status 2", rc == 2, out)
    rc, out = run_bridge(["--backend", be, "--no-kernel", "--fd", "3",
                          "--socket-mode", "0600"])
    check("--socket-mode without --socket: exit status 2", rc == 2, out)
    rc, out = run_bridge(["--backend", be, "--no-kernel", "--socket",
                          socket_path("x"), "--socket-mode", "999"])
    check("--socket-mode 999: exit status 2", rc == 2, out)
    rc, out = run_bridge(["--backend", be, "--no-kernel", "--socket",
                          socket_path("x"), "--timeout", "0"])
    check("--timeout 0: exit status 2", rc == 2, out)
    rc, out = run_bridge(["--backend", be, "--no-kernel", "--socket",
                          socket_path("x"), "--socket-group", "no-such-group-x"])
    check("--socket-group naming no group: exit status 1", rc == 1, out)
    with open(os.path.join(TOP, "dkms.conf")) as f:
        ver = [l.split('"')[1] for l in f if l.startswith("PACKAGE_VERSION=")]
    rc, out = run_bridge(["--version"])
    check("--version: '%s', the tree's version (%s), status 0" % (out.strip(), ver),
          rc == 0 and ver and out == "vhost-blk-bridge %s\n" % ver[0], out)


def test_socket_options(be):
    gid = grp.getgrnam("kvm").gr_gid if "kvm" in [g.gr_name for g in grp.getgrall()] \
        else 4242
    for args, want_mode, want_gid, desc in (
            ([], 0o600, os.getgid(), "default mode 0600"),
            (["--socket-mode", "0640", "--socket-group", str(gid)], 0o640, gid,
             "--socket-mode 0640 --socket-group %d" % gid),
            (["--socket-group", str(gid)], 0o660, gid,
             "--socket-group alone: mode 0660")):
        path = socket_path("mode")
        b = Bridge("mode", ["--backend", be, "--no-kernel", "--buffered",
                            "--socket", path] + args, wait_socket=True)
        try:
            st = os.lstat(path)
            check("socket %s (got %s, group %d)" % (desc, oct(stat.S_IMODE(st.st_mode)),
                                                    st.st_gid),
                  stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == want_mode
                  and st.st_gid == want_gid, b.text())
            left = [f for f in os.listdir(work) if f.endswith(".tmp")]
            check("  no temporary socket name left behind (%s)" % left, not left)
            check("  answers GET_FEATURES", get_features_ok(path), b.text())
        finally:
            rc = b.stop()
        check("  SIGTERM: exit status 0, socket removed (status %s)" % rc,
              rc == 0 and not os.path.exists(path), b.text())

    # A non-socket file at the path is neither replaced nor accepted.
    path = socket_path("file")
    with open(path, "w") as f:
        f.write("keep me\n")
    rc, out = run_bridge(["--backend", be, "--no-kernel", "--buffered",
                          "--socket", path])
    with open(path) as f:
        kept = f.read() == "keep me\n"
    check("a regular file at the socket path: exit status 1, file untouched",
          rc == 1 and kept, out)

    # A live socket: another bridge listens there; it keeps it.
    path = socket_path("live")
    first = Bridge("live1", ["--backend", be, "--no-kernel", "--buffered",
                             "--socket", path], wait_socket=True)
    try:
        ino = os.lstat(path).st_ino
        rc, out = run_bridge(["--backend", be, "--no-kernel", "--buffered",
                              "--socket", path])
        check("a socket another bridge listens on: exit status 1", rc == 1, out)
        check("  the first bridge keeps its socket and serves",
              os.lstat(path).st_ino == ino and get_features_ok(path), first.text())
    finally:
        first.stop()

    # A stale socket (nobody listens) is replaced.
    path = socket_path("stale")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    b = Bridge("stale", ["--backend", be, "--no-kernel", "--buffered",
                         "--socket", path], wait_socket=True)
    try:
        check("a stale socket at the path is replaced", get_features_ok(path), b.text())
    finally:
        b.stop()


def listener(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(4)
    return s


def test_fd_passing(be):
    path = socket_path("fd")
    ls = listener(path)
    fd = ls.fileno()
    b = Bridge("fd", ["--backend", be, "--no-kernel", "--buffered",
                      "--fd", str(fd)], pass_fds=(fd,), wait_socket=True)
    try:
        check("--fd: serves on the socket passed in", get_features_ok(path), b.text())
        check("  a second session on it", get_features_ok(path), b.text())
    finally:
        rc = b.stop()
    check("  SIGTERM: exit status 0; the socket it did not create stays (status %s)" % rc,
          rc == 0 and os.path.exists(path), b.text())
    ls.close()

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(socket_path("notlistening"))
    b = Bridge("fd-bad", ["--backend", be, "--no-kernel", "--buffered",
                          "--fd", str(s.fileno())], pass_fds=(s.fileno(),))
    rc = b.proc.wait(10)
    check("--fd with a socket that does not listen: exit status 1 (%s)" % rc,
          rc == 1 and "not a listening" in b.text(), b.text())
    s.close()
    with open(be, "rb") as f:
        b = Bridge("fd-file", ["--backend", be, "--no-kernel", "--buffered",
                               "--fd", str(f.fileno())], pass_fds=(f.fileno(),))
        rc = b.proc.wait(10)
    check("--fd with a regular file: exit status 1 (%s)" % rc, rc == 1, b.text())


def activated(name, be, ls, pid_delta=0, nfds="1"):
    """Start the bridge the way systemd does: the socket as fd 3, LISTEN_PID
    (its own pid, unless pid_delta) and LISTEN_FDS in the environment."""
    log = os.path.join(work, name + ".log")
    logfd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pid = os.fork()
    if pid == 0:
        try:
            # Out of the way of 0-3 first, then into place.
            lfd = os.dup2(ls.fileno(), 100)
            out = os.dup2(logfd, 101)
            nul = os.dup2(os.open("/dev/null", os.O_RDONLY), 102)
            os.dup2(nul, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.dup2(lfd, 3, inheritable=True)
            os.closerange(4, 1024)
            env = dict(os.environ, LISTEN_PID=str(os.getpid() + pid_delta),
                       LISTEN_FDS=nfds, LISTEN_FDNAMES="vb")
            os.execve(BRIDGE, [BRIDGE, "--backend", be, "--no-kernel",
                               "--buffered"], env)
        finally:
            os._exit(127)
    os.close(logfd)
    return pid, log


def wait_pid(pid, secs):
    end = time.time() + secs
    while time.time() < end:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            return os.waitstatus_to_exitcode(st)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def test_activation(be):
    path = socket_path("act")
    ls = listener(path)
    pid, log = activated("act", be, ls)
    try:
        up = False
        for _ in range(200):
            if "listening on socket activation" in open(log).read():
                up = True
                break
            time.sleep(0.05)
        check("socket activation (LISTEN_PID, LISTEN_FDS=1, fd 3): serves",
              up and get_features_ok(path), open(log).read())
    finally:
        os.kill(pid, signal.SIGTERM)
        rc = wait_pid(pid, 10)
    check("  SIGTERM: exit status 0 (%s)" % rc, rc == 0, open(log).read())

    pid, log = activated("act-otherpid", be, ls, pid_delta=1)
    rc = wait_pid(pid, 10)
    check("LISTEN_PID of another process is ignored: no socket, exit status 2 (%s)" % rc,
          rc == 2, open(log).read())
    pid, log = activated("act-2fds", be, ls, nfds="2")
    rc = wait_pid(pid, 10)
    check("LISTEN_FDS=2: exit status 1 (%s)" % rc, rc == 1, open(log).read())
    ls.close()


def backend_fds(pid):
    """(fd, st_ino, flags) of every regular file the process has open,
    but its log (stdout, stderr)."""
    res = []
    log = os.stat("/proc/%d/fd/2" % pid).st_ino
    d = "/proc/%d/fd" % pid
    for fd in os.listdir(d):
        try:
            st = os.stat(os.path.join(d, fd))
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_ino == log:
            continue
        flags = 0
        with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
            for line in f:
                if line.startswith("flags:"):
                    flags = int(line.split()[1], 8)
        res.append((int(fd), st.st_ino, flags))
    return res


def test_single_open(_):
    be = backend_file("single.img")
    orig = os.stat(be).st_ino
    path = socket_path("single")
    b = Bridge("single", ["--backend", be, "--no-kernel", "--buffered",
                          "--socket", path], wait_socket=True)
    try:
        fds = backend_fds(b.pid)
        check("the backend is open twice at start, same inode, one O_DSYNC (%s)" % fds,
              len(fds) == 2 and all(i == orig for _, i, _ in fds) and
              sorted(bool(f & O_DSYNC) for _, _, f in fds) == [False, True])
        if os.getuid() == 0:
            check("  both O_NOATIME: the bridge may, as root (flags %s)"
                  % [oct(f) for _, _, f in fds],
                  len(fds) == 2 and all(f & O_NOATIME for _, _, f in fds))
        # Replace the file at the path, then switch the write cache both
        # ways and open new sessions: nothing may follow the path.
        os.rename(be, be + ".old")
        backend_file("single.img")
        new = os.stat(be).st_ino
        with connect(path) as s:
            r0 = set_wce(s, 0)
            w0 = get_wce(s)
            r1 = set_wce(s, 1)
            w1 = get_wce(s)
        with connect(path) as s:
            r2 = set_wce(s, 0)
        check("write cache switched off and on in a session (acks %s %s, wce %s %s)"
              % (r0, r1, w0, w1), r0 and r1 and w0 == 0 and w1 == 1, b.text())
        fds = backend_fds(b.pid)
        check("after the path was replaced: the same two descriptors of the original inode, "
              "none of the new file (%s; original %d, new %d)" % (fds, orig, new),
              r2 and len(fds) == 2 and all(i == orig for _, i, _ in fds), b.text())
    finally:
        b.stop()


def test_memory_fds(be):
    path = socket_path("mem")
    b = Bridge("mem", ["--backend", be, "--no-kernel", "--buffered",
                       "--socket", path], wait_socket=True)
    size = 1 << 20
    features = (1 << F_VERSION_1) | (1 << F_PROTOCOL) | (1 << F_FLUSH)
    try:
        def table(fd_factory, desc, want):
            fd = fd_factory()
            try:
                with connect(path) as s:
                    h = handshake(s, features)
                    r = acked(s, SET_MEM_TABLE, mem_table(size), [fd])
                    if want:
                        check("guest memory from %s is accepted (ack %s)" % (desc, r),
                              h and r is True, b.text())
                    else:
                        check("guest memory from %s is refused and ends the session (%s)"
                              % (desc, r), h and r is None, b.text())
            finally:
                os.close(fd)

        def regular():
            f = os.path.join(work, "ram.img")
            with open(f, "wb") as x:
                x.truncate(size)
            return os.open(f, os.O_RDWR)

        table(lambda: memfd(size), "a memfd", True)
        table(regular, "a regular file", True)
        table(lambda: os.open("/dev/zero", os.O_RDWR), "/dev/zero (a device)", False)
        table(lambda: os.pipe()[0], "a pipe", False)
        sk = socket.socket(socket.AF_UNIX)
        table(lambda: os.dup(sk.fileno()), "a socket", False)
        sk.close()
        table(lambda: memfd(4096), "a memfd smaller than the region", False)
        check("  the refusals are logged",
              "not a memfd or regular file" in b.text() and "the fd holds 4096 bytes" in b.text(),
              b.text())
        check("  the bridge keeps serving", get_features_ok(path), b.text())
    finally:
        b.stop()


def test_timeouts(be):
    path = socket_path("timeout")
    b = Bridge("timeout", ["--backend", be, "--no-kernel", "--buffered",
                           "--socket", path, "--timeout", "2"], wait_socket=True)
    try:
        # A client that stops in the middle of a header holds the bridge
        # for the timeout, not longer: the next client is served.
        a = connect(path)
        a.sendall(hdr(GET_FEATURES, 0)[:6])
        t0 = time.time()
        served = get_features_ok(path, timeout=20)
        took = time.time() - t0
        check("a client that stopped halfway through a header is dropped; the next one is "
              "served (%.1f s)" % took, served and took < 15, b.text())
        check("  logged", "header: the front-end sent part of it" in b.text(), b.text())
        a.settimeout(5)
        check("  its connection is closed", a.recv(16) == b"", b.text())
        a.close()

        # The same for a payload that never comes.
        a = connect(path)
        a.sendall(hdr(SET_FEATURES, 8) + b"\0\0\0\0")
        t0 = time.time()
        served = get_features_ok(path, timeout=20)
        check("a client that stopped halfway through a payload is dropped (%.1f s)"
              % (time.time() - t0), served and time.time() - t0 < 15, b.text())
        a.close()

        # A client that connects and says nothing.
        a = connect(path)
        t0 = time.time()
        served = get_features_ok(path, timeout=20)
        check("a client that connects and sends nothing is dropped (%.1f s)"
              % (time.time() - t0), served and time.time() - t0 < 15 and
              "sent no message within 2 s" in b.text(), b.text())
        a.close()

        # Silence between messages is fine: a session idle for longer than
        # the timeout still gets its answers.
        with connect(path) as s:
            r1 = call(s, GET_FEATURES)
            time.sleep(3)
            r2 = call(s, GET_FEATURES)
        check("a session idle between messages for longer than the timeout is kept",
              r1 is not None and r2 is not None, b.text())
    finally:
        b.stop()


def test_sigterm_blocked_reply(be):
    path = socket_path("term")
    b = Bridge("term", ["--backend", be, "--no-kernel", "--buffered",
                        "--socket", path, "--timeout", "600"], wait_socket=True)
    s = connect(path)
    s.setblocking(False)
    # Requests whose replies are never read, until the bridge's replies
    # fill the socket and it blocks sending one.
    req = hdr(GET_FEATURES, 0) * 256
    sent, stuck_since = 0, None
    end = time.time() + 30
    while time.time() < end:
        try:
            sent += s.send(req)
            stuck_since = None
        except BlockingIOError:
            stuck_since = stuck_since or time.time()
            if time.time() - stuck_since > 1.5:
                break
            time.sleep(0.05)
    blocked = stuck_since is not None
    t0 = time.time()
    rc = b.stop(10)
    took = time.time() - t0
    check("SIGTERM while a reply blocks: exit status 0 within 10 s (status %s, %.1f s, "
          "%d bytes of requests sent)" % (rc, took, sent), blocked and rc == 0, b.text())
    s.close()


def test_accept_errors(be):
    path = socket_path("accept")
    b = Bridge("accept", ["--backend", be, "--no-kernel", "--buffered",
                          "--socket", path], wait_socket=True)
    try:
        nfd = len(os.listdir("/proc/%d/fd" % b.pid))
        # No descriptor left for accept(): the connections wait, the bridge
        # too.  (Two clients: a bridge sleeping in a blocking accept() has
        # its next descriptor reserved already, and fails on the second.)
        soft, hard = resource.prlimit(b.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(b.pid, resource.RLIMIT_NOFILE, (nfd, hard))
        clients = []
        for _ in range(2):
            c = connect(path)
            send(c, GET_FEATURES)
            c.shutdown(socket.SHUT_WR)
            clients.append(c)
        time.sleep(2.5)
        check("accept() failing with EMFILE: the bridge stays up and says so",
              b.alive() and "Too many open files (retrying" in b.text(), b.text())
        resource.prlimit(b.pid, resource.RLIMIT_NOFILE, (soft, hard))
        served = 0
        for c in clients:
            c.settimeout(10)
            try:
                r = recv_reply(c)
            except OSError:
                r = None
            served += r is not None and r[0] == GET_FEATURES
            c.close()
        check("  once descriptors are free again both waiting clients are served (%d)"
              % served, served == 2, b.text())
    finally:
        b.stop()


def start_ring(s, size=1 << 20, qva=0x7f0000000000, used_idx=0, keep=None):
    """Memory table, one ring, a kick fd, enabled: the device runs.  The
    ring is at base 0, its used index in guest memory used_idx.  With keep
    (a list), the memory fd is appended to it, not closed."""
    fd = memfd(size)
    kick = os.eventfd(0)
    os.pwrite(fd, struct.pack("<H", used_idx), 4096 + 2)   # used ring at qva + 4096
    if keep is not None:
        keep.append(os.dup(fd))
    try:
        r = [acked(s, SET_MEM_TABLE, mem_table(size, qva), [fd]),
             acked(s, SET_VRING_NUM, struct.pack("<II", 0, 16)),
             acked(s, SET_VRING_BASE, struct.pack("<II", 0, 0)),
             acked(s, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 0, qva, qva + 4096,
                                                  qva + 8192, 0)),
             acked(s, SET_VRING_KICK, struct.pack("<Q", 0), [kick]),
             acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 1))]
        return all(r)
    finally:
        os.close(fd)
        os.close(kick)


def stop_ring(s):
    return acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 0))


def test_writeback_without_flush(be):
    path = socket_path("wce")
    b = Bridge("wce", ["--backend", be, "--no-kernel", "--buffered", "-v",
                       "--socket", path], wait_socket=True)
    base = (1 << F_VERSION_1) | (1 << F_PROTOCOL) | (1 << F_CONFIG_WCE)

    try:
        with connect(path) as s:
            before = get_wce(s)
            h = handshake(s, base)
            after = get_wce(s)
            refused = set_wce(s, 1)
            still = get_wce(s)
            ran = start_ring(s)
        check("without VIRTIO_BLK_F_FLUSH: writeback 1 before SET_FEATURES, 0 after "
              "(%s, %s)" % (before, after), h and before == 1 and after == 0, b.text())
        check("  SET_CONFIG writeback=1 is refused (ack %s, writeback %s)" % (refused, still),
              refused is False and still == 0, b.text())
        check("  the rings run on the O_DSYNC descriptor",
              ran and "rings started (write-through" in b.text(), b.text())
        mark = len(b.text())
        with connect(path) as s:
            h = handshake(s, base | (1 << F_FLUSH))
            wce = get_wce(s)
            ran = start_ring(s)
        check("with VIRTIO_BLK_F_FLUSH: writeback 1, the rings run write-back (%s)" % wce,
              h and wce == 1 and ran and "rings started (write-back)" in b.text()[mark:],
              b.text())
    finally:
        b.stop()


def test_backend_lock(_):
    """While its rings run, a bridge holds the backend's lock; another waits."""
    be = backend_file("lock.img")
    pa, pb = socket_path("lock-a"), socket_path("lock-b")
    a = Bridge("lock-a", ["--backend", be, "--no-kernel", "--socket", pa],
               wait_socket=True)
    b = Bridge("lock-b", ["--backend", be, "--no-kernel", "--socket", pb,
                          "--lock-timeout", "1"], wait_socket=True)
    c = None
    try:
        with connect(pa) as sa:
            base = (1 << F_VERSION_1) | (1 << F_PROTOCOL)
            ran_a = handshake(sa, base) and start_ring(sa)
            with connect(pb) as sb:
                t0 = time.time()
                ran_b = handshake(sb, base) and start_ring(sb)
                took = time.time() - t0
                check("a second bridge on a running backend does not start its rings "
                      "(%s), waits --lock-timeout (1 s: %.1f s) and says why" % (ran_b, took),
                      ran_a and not ran_b and took >= 0.9 and
                      "still locked after 1 s" in b.text(), a.text() + b.text())
                stopped = stop_ring(sa)
                ran_b = stop_ring(sb) and start_ring(sb)
                check("  once the first stops its rings, they start (%s, %s)" % (stopped, ran_b),
                      stopped and ran_b, b.text())
                # The rings of b run: a's start waits for them.
                c = Bridge("lock-c", ["--backend", be, "--no-kernel", "--socket",
                                      socket_path("lock-c"), "--lock-timeout", "0"],
                           wait_socket=True)
                with connect(socket_path("lock-c")) as sc:
                    ran_c = handshake(sc, base) and start_ring(sc)
                check("  --lock-timeout 0: no lock, a third starts beside it (%s)" % ran_c,
                      ran_c, c.text())
        b.proc.kill()
        b.proc.wait()
        d = Bridge("lock-d", ["--backend", be, "--no-kernel", "--socket",
                              socket_path("lock-d"), "--lock-timeout", "5"],
                   wait_socket=True)
        try:
            with connect(socket_path("lock-d")) as sd:
                ran_d = handshake(sd, base) and start_ring(sd)
            check("  a bridge killed with its rings running leaves the lock to the next "
                  "(no device of its own here) (%s)" % ran_d,
                  ran_d and "locked by another" not in d.text(), d.text())
        finally:
            d.stop()
    finally:
        a.stop()
        b.stop()
        if c:
            c.stop()


def test_resume_at_used(be):
    """A ring starts at its used index when QEMU's base lags behind it."""
    path = socket_path("resume")
    b = Bridge("resume", ["--backend", be, "--no-kernel", "-v", "--socket", path],
               wait_socket=True)
    base = (1 << F_VERSION_1) | (1 << F_PROTOCOL)
    try:
        with connect(path) as s:
            ran = handshake(s, base) and start_ring(s, used_idx=7)
            r = call(s, GET_VRING_BASE, struct.pack("<II", 0, 0))
            pos = struct.unpack("<II", r[2])[1] if r and len(r[2]) == 8 else None
        check("a ring whose used index (7) is ahead of QEMU's base (0) starts at the "
              "used index, and says so (GET_VRING_BASE: %s)" % pos,
              ran and pos == 7 and
              "ring 0: resuming at used index 7, not at base 0" in b.text(), b.text())
        mark = len(b.text())
        with connect(path) as s:
            ran = handshake(s, base) and start_ring(s, used_idx=0)
            r = call(s, GET_VRING_BASE, struct.pack("<II", 0, 0))
            pos = struct.unpack("<II", r[2])[1] if r and len(r[2]) == 8 else None
        check("  a ring whose used index is the base starts there, nothing logged (%s)" % pos,
              ran and pos == 0 and "resuming" not in b.text()[mark:], b.text())
    finally:
        b.stop()


def session_ended(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def ring_base(s):
    r = call(s, GET_VRING_BASE, struct.pack("<II", 0, 0))
    return struct.unpack("<II", r[2])[1] if r and len(r[2]) == 8 else None


def test_new_mem_table_running(be):
    """QEMU sends SET_MEM_TABLE again while the rings run (a guest's memory
    map changes: SeaBIOS with a VGA card, DIMM hotplug): the rings move to
    the new mappings and go on; the old ones are gone."""
    path = socket_path("newmem")
    b = Bridge("newmem", ["--backend", be, "--no-kernel", "-v", "--socket", path],
               wait_socket=True)
    base = (1 << F_VERSION_1) | (1 << F_PROTOCOL)
    try:
        with connect(path) as s:
            ran = handshake(s, base) and start_ring(s)
            # The same guest memory at another address of the front-end's,
            # its used index now 5: the bridge must read it there.
            fd = memfd(2 << 20)
            os.pwrite(fd, struct.pack("<H", 5), 4096 + 2)
            qva = 0x7e0000000000
            t = acked(s, SET_MEM_TABLE, mem_table(2 << 20, 0x7f0000000000), [fd])
            os.close(fd)
            pos = ring_base(s)
            check("a new memory table while the ring runs: acknowledged, the bridge "
                  "lives, the ring resumes from the new memory (ack %s, base %s)"
                  % (t, pos), ran and t and b.alive() and pos == 5, b.text())
            # Twice more, the ring moving with the table's address.
            fd = memfd(1 << 20)
            t1 = acked(s, SET_MEM_TABLE, mem_table(1 << 20, qva), [fd])
            os.close(fd)
            t2 = acked(s, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 0, qva, qva + 4096,
                                                      qva + 8192, 0))
            t3 = acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 1))
            fd = memfd(1 << 20)
            t4 = acked(s, SET_MEM_TABLE, mem_table(1 << 20, qva), [fd])
            os.close(fd)
            pos = ring_base(s)
            check("  a table at another address, the ring moved to it, a third table: "
                  "the ring keeps its position (%s %s %s %s, base %s)" % (t1, t2, t3, t4, pos),
                  t2 and t3 and t4 and pos == 5 and b.alive(), b.text())
            fd = memfd(1 << 20)
            t5 = acked(s, SET_MEM_TABLE, mem_table(1 << 20, 0x7d0000000000), [fd])
            os.close(fd)
            check("  a table the ring is outside of: the ring waits for an address, the "
                  "bridge lives (%s)" % t5, b.alive() and "outside the new memory table"
                  in b.text(), b.text())
        check("  the bridge serves on", b.alive() and get_features_ok(path), b.text())
    finally:
        b.stop()


def test_shrunk_memory(be):
    """A front-end that cuts its memory fd short after SET_MEM_TABLE costs
    its own session at most, not the bridge (no SIGBUS)."""
    path = socket_path("shrink")
    b = Bridge("shrink", ["--backend", be, "--no-kernel", "-v", "--socket", path],
               wait_socket=True)
    base = (1 << F_VERSION_1) | (1 << F_PROTOCOL)
    keep = []
    try:
        with connect(path) as s:
            ran = handshake(s, base) and start_ring(s, keep=keep)
            os.ftruncate(keep[0], 0)
            off = acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 0))
            on = acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 1))
            check("guest memory cut to 0 bytes under a running ring, the ring "
                  "restarted: refused (%s, %s), the bridge lives" % (off, on),
                  ran and off and on is False and b.alive() and
                  "used ring cannot be read" in b.text(), b.text())
        check("  and serves the next session", b.alive() and get_features_ok(path),
              b.text())
    finally:
        for fd in keep:
            os.close(fd)
        b.stop()


def test_log_size(be):
    """The dirty log must be memory that covers every guest page."""
    path = socket_path("logsize")
    b = Bridge("logsize", ["--backend", be, "--no-kernel", "--buffered", "-v",
                           "--socket", path], wait_socket=True)
    feats = (1 << F_VERSION_1) | (1 << F_PROTOCOL) | (1 << F_FLUSH)
    pfs = (1 << PF_REPLY_ACK) | (1 << PF_CONFIG) | (1 << PF_LOG_SHMFD)
    gib = 1 << 30

    def set_log(s, fd, size, off=0):
        r = call(s, SET_LOG_BASE, struct.pack("<QQ", size, off), [fd])
        return struct.unpack("<Q", r[2])[0] if r and r[0] == SET_LOG_BASE \
            and len(r[2]) == 8 else None

    try:
        with connect(path) as s:
            send(s, SET_PROTOCOL_FEATURES, struct.pack("<Q", pfs))
            send(s, SET_OWNER)
            h = acked(s, SET_FEATURES, struct.pack("<Q", feats))
            ran = start_ring(s, size=gib)
            small = memfd(4096)
            st_small = set_log(s, small, 4096)
            os.close(small)
            empty = memfd(0)
            st_empty = set_log(s, empty, 32768)
            os.close(empty)
            a, c = socket.socketpair()
            st_sock = set_log(s, a.fileno(), 32768)
            a.close()
            c.close()
            check("1 GiB of guest memory: a 4 KiB log, a 32 KiB log in an empty memfd, "
                  "a socket as the log: each refused (status %s %s %s), the session "
                  "goes on" % (st_small, st_empty, st_sock),
                  h and ran and st_small == 1 and st_empty == 1 and st_sock == 1
                  and b.alive(), b.text())
            log = memfd(32768)
            st = set_log(s, log, 32768)
            os.close(log)
            check("  a 32 KiB memfd log: taken (status %s)" % st, st == 0, b.text())
            fd = memfd(2 * gib)
            t = acked(s, SET_MEM_TABLE, mem_table(2 * gib), [fd])
            os.close(fd)
            check("  a memory table of 2 GiB beyond that log is refused (%s)" % t,
                  t is False and b.alive(), b.text())
            log = memfd(65536)
            st = set_log(s, log, 65536)
            os.close(log)
            fd = memfd(2 * gib)
            t = acked(s, SET_MEM_TABLE, mem_table(2 * gib), [fd])
            os.close(fd)
            check("  and taken once the log has grown to 64 KiB (%s, %s)" % (st, t),
                  st == 0 and t, b.text())
    finally:
        b.stop()


def test_sigterm_lock_wait(_):
    """SIGTERM ends a bridge that waits for the backend's lock at once."""
    be = backend_file("lockterm.img")
    pa, pb = socket_path("lockterm-a"), socket_path("lockterm-b")
    a = Bridge("lockterm-a", ["--backend", be, "--no-kernel", "--socket", pa],
               wait_socket=True)
    b = Bridge("lockterm-b", ["--backend", be, "--no-kernel", "--socket", pb,
                              "--lock-timeout", "60"], wait_socket=True)
    base = (1 << F_VERSION_1) | (1 << F_PROTOCOL)
    try:
        with connect(pa) as sa:
            ran_a = handshake(sa, base) and start_ring(sa)
            with connect(pb, timeout=90) as sb:
                handshake(sb, base)
                fd = memfd(1 << 20)
                send(sb, SET_MEM_TABLE, mem_table(1 << 20), [fd])
                os.close(fd)
                send(sb, SET_VRING_NUM, struct.pack("<II", 0, 16))
                qva = 0x7f0000000000
                send(sb, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 0, qva, qva + 4096,
                                                     qva + 8192, 0))
                kick = os.eventfd(0)
                send(sb, SET_VRING_KICK, struct.pack("<Q", 0), [kick])
                os.close(kick)
                send(sb, SET_VRING_ENABLE, struct.pack("<II", 0, 1))
                waiting = b.wait_log("waiting up to 60 s", 10)
                t0 = time.time()
                b.proc.send_signal(signal.SIGTERM)
                try:
                    rc = b.proc.wait(20)
                except subprocess.TimeoutExpired:
                    rc = None
                took = time.time() - t0
        check("SIGTERM while waiting up to 60 s for the backend's lock: exit in %.1f s "
              "(status %s)" % (took, rc), ran_a and waiting and rc == 0 and took < 5,
              a.text() + b.text())
    finally:
        a.stop()
        b.stop()


def get_capacity(sock):
    r = call(sock, GET_CONFIG, struct.pack("<III", 0, 8, 0) + b"\0" * 8)
    return struct.unpack("<Q", r[2][12:])[0] if r and len(r[2]) == 20 else None


def config_change(chan, secs):
    """The next message on the back-end channel, if one comes within secs."""
    chan.settimeout(secs)
    try:
        return recv_exact(chan, 12)
    except socket.timeout:
        return None


def test_resize(_):
    be = backend_file("resize.img", 1 << 20)
    path = socket_path("resize")
    b = Bridge("resize", ["--backend", be, "--no-kernel", "--buffered", "-v",
                          "--socket", path], wait_socket=True)
    change = hdr(BACKEND_CONFIG_CHANGE_MSG, 0)
    feats = (1 << F_VERSION_1) | (1 << F_PROTOCOL) | (1 << F_FLUSH)
    try:
        with connect(path) as s:
            r = call(s, GET_PROTOCOL_FEATURES)
            pf = struct.unpack("<Q", r[2])[0] if r and len(r[2]) == 8 else 0
            check("resize: BACKEND_REQ is offered (protocol features 0x%x)" % pf,
                  pf & (1 << PF_BACKEND_REQ))
            send(s, SET_PROTOCOL_FEATURES, struct.pack(
                "<Q", (1 << PF_REPLY_ACK) | (1 << PF_CONFIG) | (1 << PF_BACKEND_REQ)))
            send(s, SET_OWNER)
            h = acked(s, SET_FEATURES, struct.pack("<Q", feats))
            front, back = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            a = acked(s, SET_BACKEND_REQ_FD, b"", [back.fileno()])
            back.close()
            cap0 = get_capacity(s)
            check("  SET_BACKEND_REQ_FD taken (%s), capacity %s sectors" % (a, cap0),
                  h and a and cap0 == 2048, b.text())
            os.truncate(be, 2 << 20)
            b.proc.send_signal(signal.SIGHUP)
            m = config_change(front, 10)
            cap1 = get_capacity(s)
            check("  grown to 2 MiB, SIGHUP: CONFIG_CHANGE_MSG on the back-end channel, "
                  "then GET_CONFIG says %s sectors" % cap1, m == change and cap1 == 4096,
                  b.text())
            os.truncate(be, 512 << 10)
            b.proc.send_signal(signal.SIGHUP)
            m = config_change(front, 10)
            cap2 = get_capacity(s)
            check("  shrunk to 512 KiB, SIGHUP: CONFIG_CHANGE_MSG, %s sectors" % cap2,
                  m == change and cap2 == 1024, b.text())
            b.proc.send_signal(signal.SIGHUP)
            m = config_change(front, 1)
            check("  SIGHUP with the size unchanged: no message, still %s sectors"
                  % get_capacity(s), m is None and get_capacity(s) == 1024
                  and "unchanged, 1024 sectors" in b.text(), b.text())
            # QEMU drops a change message while its device is stopped: one
            # the front-end has not answered with GET_CONFIG comes again
            # when the rings start.
            os.truncate(be, 1 << 20)
            b.proc.send_signal(signal.SIGHUP)
            m1 = config_change(front, 10)
            ran = start_ring(s)
            m2 = config_change(front, 10)
            cap3 = get_capacity(s)
            check("  a change not read before the rings start is sent again then "
                  "(%s sectors)" % cap3, m1 == change and ran and m2 == change
                  and cap3 == 2048, b.text())
            stop_ring(s)
            ran = start_ring(s)
            m = config_change(front, 1)
            check("  ... and once read, not again at the next start", ran and m is None,
                  b.text())
            # Resized without SIGHUP: the device takes the size at ring
            # start, the config follows, the front-end is told.
            stop_ring(s)
            os.truncate(be, 3 << 20)
            ran = start_ring(s)
            m = config_change(front, 10)
            cap4 = get_capacity(s)
            check("  resized without SIGHUP: at the next ring start the config follows "
                  "the device (%s sectors) and the front-end is told" % cap4,
                  ran and m == change and cap4 == 6144
                  and "2048 -> 6144 sectors (at ring start)" in b.text(), b.text())
            front.close()
        check("  the bridge serves on after its resizes", b.alive() and get_features_ok(path),
              b.text())
        # A front-end without the back-end channel: the config still follows.
        with connect(path) as s:
            h = handshake(s, feats)
            null = os.open("/dev/null", os.O_RDONLY)
            nack = acked(s, SET_BACKEND_REQ_FD, b"", [null])
            os.close(null)
            os.truncate(be, 1 << 20)
            mark = len(b.text())
            b.proc.send_signal(signal.SIGHUP)
            told = b.wait_log("the front-end was not told", 10)
            cap = get_capacity(s)
        check("  without BACKEND_REQ: SET_BACKEND_REQ_FD refused (%s), SIGHUP updates "
              "the config (%s sectors) and says the front-end was not told" % (nack, cap),
              h and nack is False and cap == 2048 and told
              and "6144 -> 2048 sectors" in b.text()[mark:], b.text())
    finally:
        b.stop()


def test_reset_owner_channel(_):
    """RESET_OWNER resets the device, not the connection: resizes are still
    told on the back-end channel."""
    be = backend_file("resetown.img", 1 << 20)
    path = socket_path("resetown")
    b = Bridge("resetown", ["--backend", be, "--no-kernel", "--buffered", "-v",
                            "--socket", path], wait_socket=True)
    change = hdr(BACKEND_CONFIG_CHANGE_MSG, 0)
    feats = (1 << F_VERSION_1) | (1 << F_PROTOCOL) | (1 << F_FLUSH)
    try:
        with connect(path) as s:
            send(s, SET_PROTOCOL_FEATURES, struct.pack(
                "<Q", (1 << PF_REPLY_ACK) | (1 << PF_CONFIG) | (1 << PF_BACKEND_REQ)))
            send(s, SET_OWNER)
            h = acked(s, SET_FEATURES, struct.pack("<Q", feats))
            front, back = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            a = acked(s, SET_BACKEND_REQ_FD, b"", [back.fileno()])
            back.close()
            r = acked(s, RESET_OWNER)
            o = acked(s, SET_OWNER)
            os.truncate(be, 2 << 20)
            b.proc.send_signal(signal.SIGHUP)
            m = config_change(front, 10)
            cap = get_capacity(s)
            check("after RESET_OWNER a resize is still told on the back-end channel "
                  "(%s %s %s %s, %s sectors)" % (h, a, r, o, cap),
                  h and a and r and o and m == change and cap == 4096, b.text())
            front.close()
    finally:
        b.stop()


def test_config_flags(be):
    """SET_CONFIG and GET_CONFIG take flags 0 (front-end) and 1 (migration)."""
    path = socket_path("cfgflags")
    b = Bridge("cfgflags", ["--backend", be, "--no-kernel", "--buffered", "--socket", path],
               wait_socket=True)
    base = (1 << F_VERSION_1) | (1 << F_PROTOCOL) | (1 << F_FLUSH) | (1 << F_CONFIG_WCE)
    try:
        with connect(path) as s:
            h = handshake(s, base)
            a = acked(s, SET_CONFIG, struct.pack("<III", WCE_OFF, 1, 1) + b"\1")
            check("SET_CONFIG with the migration flag is taken (%s)" % a, h and a, b.text())
            a = acked(s, SET_CONFIG, struct.pack("<III", WCE_OFF, 1, 2) + b"\1")
            check("  SET_CONFIG with an unknown flag ends the session (%s)" % a,
                  a is None and session_ended(s), b.text())
        with connect(path) as s:
            send(s, GET_CONFIG, struct.pack("<III", 0, 8, 0x80) + b"\0" * 8)
            check("  GET_CONFIG with an unknown flag ends the session", session_ended(s),
                  b.text())
        check("  the bridge serves on", b.alive() and get_features_ok(path), b.text())
    finally:
        b.stop()


def test_mem_slots(be):
    """Memory hotplug (CONFIGURE_MEM_SLOTS): regions added one at a time while
    the ring runs (no drain), removed (drained, the ring in a removed region
    waits for an address), and the limits."""
    path = socket_path("slots")
    b = Bridge("slots", ["--backend", be, "--no-kernel", "-v", "--socket", path],
               wait_socket=True)
    feats = (1 << F_VERSION_1) | (1 << F_PROTOCOL)
    pfs = (1 << PF_REPLY_ACK) | (1 << PF_CONFIG) | (1 << PF_CONFIGURE_MEM_SLOTS)
    qva = 0x7f0000000000
    mib = 1 << 20

    def region(gpa, size, uaddr):
        return struct.pack("<Q", 0) + struct.pack("<QQQQ", gpa, size, uaddr, 0)

    def add(s, gpa, size, uaddr, used_idx=None):
        fd = memfd(size)
        if used_idx is not None:
            os.pwrite(fd, struct.pack("<H", used_idx), 4096 + 2)
        try:
            return acked(s, ADD_MEM_REG, region(gpa, size, uaddr), [fd])
        finally:
            os.close(fd)

    try:
        with connect(path) as s:
            r = call(s, GET_PROTOCOL_FEATURES)
            pf = struct.unpack("<Q", r[2])[0] if r and len(r[2]) == 8 else 0
            send(s, SET_PROTOCOL_FEATURES, struct.pack("<Q", pfs))
            send(s, SET_OWNER)
            h = acked(s, SET_FEATURES, struct.pack("<Q", feats))
            r = call(s, GET_MAX_MEM_SLOTS)
            slots = struct.unpack("<Q", r[2])[0] if r and len(r[2]) == 8 else None
            check("CONFIGURE_MEM_SLOTS offered (0x%x), GET_MAX_MEM_SLOTS: %s" % (pf, slots),
                  h and pf & (1 << PF_CONFIGURE_MEM_SLOTS) and slots == 64, b.text())
            a1 = add(s, 0, mib, qva, used_idx=3)
            kick = os.eventfd(0)
            ring = [acked(s, SET_VRING_NUM, struct.pack("<II", 0, 16)),
                    acked(s, SET_VRING_BASE, struct.pack("<II", 0, 0)),
                    acked(s, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 0, qva, qva + 4096,
                                                         qva + 8192, 0)),
                    acked(s, SET_VRING_KICK, struct.pack("<Q", 0), [kick]),
                    acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 1))]
            os.close(kick)
            check("  ADD_MEM_REG of the first region, a ring in it runs, resumed from it "
                  "(%s %s)" % (a1, ring), a1 and all(ring) and "rings started" in b.text()
                  and "resuming at used index 3" in b.text(), b.text())
            mark = len(b.text())
            a2 = add(s, 4 * mib, 2 * mib, qva + 64 * mib)
            a3 = add(s, 8 * mib, mib, qva + 128 * mib)
            check("  two regions added while the ring runs: taken, no drain (%s %s)"
                  % (a2, a3), a2 and a3 and "rings stopped" not in b.text()[mark:]
                  and "region added, 3 region(s)" in b.text(), b.text())
            over = add(s, 4 * mib + 4096, 4096, qva + 256 * mib)
            check("  a region overlapping another is malformed: the session ends", over is None and session_ended(s),
                  b.text())
        with connect(path) as s:
            send(s, SET_PROTOCOL_FEATURES, struct.pack("<Q", pfs))
            send(s, SET_OWNER)
            acked(s, SET_FEATURES, struct.pack("<Q", feats))
            a1 = add(s, 0, mib, qva)
            a2 = add(s, 4 * mib, mib, qva + 64 * mib)
            kick = os.eventfd(0)
            ring = [acked(s, SET_VRING_NUM, struct.pack("<II", 0, 16)),
                    acked(s, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 0, qva, qva + 4096,
                                                         qva + 8192, 0)),
                    acked(s, SET_VRING_KICK, struct.pack("<Q", 0), [kick]),
                    acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 1))]
            os.close(kick)
            mark = len(b.text())
            r2 = acked(s, REM_MEM_REG, region(4 * mib, mib, qva + 64 * mib))
            t = b.text()[mark:]
            check("  REM_MEM_REG of a region the ring is not in: drained, the ring goes on "
                  "(%s)" % r2, a1 and a2 and all(ring) and r2 and "rings stopped" in t
                  and t.count("rings started") == 1 and "region removed, 1 region(s)" in t,
                  b.text())
            rn = acked(s, REM_MEM_REG, region(4 * mib, mib, qva + 64 * mib))
            check("  REM_MEM_REG of a region not in the table: refused, the session goes "
                  "on (%s)" % rn, rn is False and b.alive(), b.text())
            mark = len(b.text())
            r1 = acked(s, REM_MEM_REG, region(0, mib, qva))
            t = b.text()[mark:]
            check("  REM_MEM_REG of the ring's region: the ring waits for an address (%s)"
                  % r1, r1 and "ring 0 is outside the new memory table" in t
                  and "rings started" not in t, b.text())
            full = [add(s, (16 + i) * mib, mib, qva + (16 + i) * mib) for i in range(64)]
            check("  64 regions taken, the 65th refused, the session goes on (%d taken, "
                  "last %s)" % (full.count(True), full[-1]),
                  full[:64].count(True) == 64 and add(s, 100 * mib, mib, qva + 100 * mib)
                  is False and b.alive(), b.text()[-1500:])
        # QEMU keeps its own copy of the regions the back-end has and sends
        # only changes: a reset must not forget them.
        for reset in (RESET_DEVICE, RESET_OWNER):
            with connect(path) as s:
                send(s, SET_PROTOCOL_FEATURES,
                     struct.pack("<Q", pfs | (1 << PF_RESET_DEVICE)))
                send(s, SET_OWNER)
                acked(s, SET_FEATURES, struct.pack("<Q", feats))
                a1 = add(s, 0, mib, qva)
                r = acked(s, reset)
                if reset == RESET_OWNER:
                    acked(s, SET_OWNER)
                acked(s, SET_FEATURES, struct.pack("<Q", feats))
                mark = len(b.text())
                kick = os.eventfd(0)
                ring = [acked(s, SET_VRING_NUM, struct.pack("<II", 0, 16)),
                        acked(s, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 0, qva, qva + 4096,
                                                             qva + 8192, 0)),
                        acked(s, SET_VRING_KICK, struct.pack("<Q", 0), [kick]),
                        acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 1))]
                os.close(kick)
                check("  after %s the regions stay: a ring set up again runs without "
                      "them sent again (%s %s %s)" % ("RESET_DEVICE" if reset == RESET_DEVICE
                                                    else "RESET_OWNER", a1, r, ring),
                      a1 and r and all(ring) and "rings started" in b.text()[mark:],
                      b.text()[-1500:])
        with connect(path) as s:
            h = handshake(s, feats)
            a = add(s, 0, mib, qva)
            check("  ADD_MEM_REG without CONFIGURE_MEM_SLOTS negotiated: refused (%s)" % a,
                  h and a is False and b.alive(), b.text())
    finally:
        b.stop()


def test_status_reset(be):
    """STATUS and RESET_DEVICE (protocol features 16 and 13), and the config
    at the virtio-pci offset old cloud-hypervisor releases ask for."""
    path = socket_path("status")
    b = Bridge("status", ["--backend", be, "--no-kernel", "-v", "--socket", path],
               wait_socket=True)
    feats = (1 << F_VERSION_1) | (1 << F_PROTOCOL)
    pfs = (1 << PF_REPLY_ACK) | (1 << PF_CONFIG) | (1 << PF_STATUS) | (1 << PF_RESET_DEVICE)

    def status(s):
        r = call(s, GET_STATUS)
        return struct.unpack("<Q", r[2])[0] if r and r[0] == GET_STATUS \
            and len(r[2]) == 8 else None

    try:
        with connect(path) as s:
            r = call(s, GET_PROTOCOL_FEATURES)
            pf = struct.unpack("<Q", r[2])[0] if r and len(r[2]) == 8 else 0
            send(s, SET_PROTOCOL_FEATURES, struct.pack("<Q", pfs))
            send(s, SET_OWNER)
            h = acked(s, SET_FEATURES, struct.pack("<Q", feats))
            st0 = status(s)
            a = acked(s, SET_STATUS, struct.pack("<Q", 0xf))
            st1 = status(s)
            bad = acked(s, SET_STATUS, struct.pack("<Q", 0x100))
            check("STATUS and RESET_DEVICE offered (0x%x); GET_STATUS %s, after SET_STATUS "
                  "0xf: %s; a status beyond a byte refused (%s)" % (pf, st0, st1, bad),
                  h and pf & (1 << PF_STATUS) and pf & (1 << PF_RESET_DEVICE) and
                  st0 == 0 and a and st1 == 0xf and bad is False, b.text())
            ran = start_ring(s)
            mark = len(b.text())
            rd = acked(s, RESET_DEVICE)
            st2 = status(s)
            again = acked(s, SET_OWNER)
            check("  RESET_DEVICE: the rings stop and drain, the status is 0, the "
                  "front-end stays the owner (%s %s, status %s, a second SET_OWNER %s)"
                  % (ran, rd, st2, again), ran and rd and st2 == 0 and again is False
                  and "rings stopped and drained" in b.text()[mark:], b.text())
            r = call(s, GET_CONFIG, struct.pack("<III", 0x100, 8, 0) + b"\0" * 8)
            cap = struct.unpack("<Q", r[2][12:])[0] if r and len(r[2]) == 20 else None
            check("  GET_CONFIG at offset 0x100 (old cloud-hypervisor) answers the config "
                  "(capacity %s sectors)" % cap, cap == 2048, b.text())
        with connect(path) as s:
            h = handshake(s, feats)
            r = call(s, GET_STATUS)
            check("  GET_STATUS without STATUS negotiated: an empty reply, the session goes "
                  "on", h and r is not None and r[2] == b"" and get_wce(s) is not None,
                  b.text())
    finally:
        b.stop()


def test_seccomp(be):
    """Once set up, the bridge runs under a seccomp filter: sessions are
    served under it (every other test here), and a system call outside it
    kills the process (a test build that calls uname() afterwards)."""
    path = socket_path("seccomp")
    b = Bridge("seccomp", ["--backend", be, "--no-kernel", "--socket", path],
               wait_socket=True)
    try:
        with open("/proc/%d/status" % b.pid) as f:
            mode = [line.split()[1] for line in f if line.startswith("Seccomp:")]
        check("the bridge runs in seccomp filter mode (Seccomp: %s) and serves"
              % mode, mode == ["2"] and get_features_ok(path), b.text())
    finally:
        b.stop()
    cc = shutil.which("cc")
    if not cc:
        skip("a system call outside the filter kills the bridge", "no C compiler")
        return
    src = os.path.join(TOP, "tools/vhost-blk-bridge")
    binary = os.path.join(work, "bridge-seccomp-selftest")
    build = subprocess.run([cc, "-O2", "-DBRIDGE_SECCOMP_SELFTEST",
                            "-I" + os.path.join(TOP, "include/uapi"),
                            "-I" + os.path.join(TOP, "tools/include"), "-o", binary] +
                           sorted(os.path.join(src, f) for f in os.listdir(src)
                                  if f.endswith(".c")) + ["-lseccomp"],
                           capture_output=True, text=True)
    if build.returncode:
        nok("the seccomp test build", build.stdout + build.stderr)
        return
    p = subprocess.run([binary, "--backend", be, "--no-kernel", "--socket",
                        socket_path("seccomp-test")], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=20)
    out = p.stdout + p.stderr
    check("a system call outside the filter (uname) kills the bridge with SIGSYS "
          "(status %s)" % p.returncode, p.returncode == -signal.SIGSYS and
          "calling uname()" in out and "still alive" not in out, out)


def test_log_rate(be):
    """A front-end that makes the bridge log (refused requests) cannot fill
    the disk: past a burst, lines are dropped and counted."""
    path = socket_path("lograte")
    b = Bridge("lograte", ["--backend", be, "--no-kernel", "--buffered", "--socket", path],
               wait_socket=True)
    try:
        with connect(path) as s:
            for _ in range(3000):
                send(s, 19, struct.pack("<Q", 0))     # SEND_RARP: refused, logged
            r = call(s, GET_FEATURES)
        refused = b.text().count("refusing unsupported request")
        time.sleep(1.2)
        with connect(path) as s:
            send(s, 19, struct.pack("<Q", 0))
            call(s, GET_FEATURES)
        check("3000 refused requests: %d of them logged, then a count of the rest, the "
              "session served on" % refused,
              r is not None and 50 <= refused < 400 and
              "messages not logged (more than 20 a second)" in b.text(), b.text()[-2000:])
    finally:
        b.stop()


def test_migration_log(_):
    be = backend_file("mig.img", 1 << 20)
    path = socket_path("mig")
    b = Bridge("mig", ["--backend", be, "--no-kernel", "--buffered", "-v",
                       "--socket", path], wait_socket=True)
    feats = (1 << F_VERSION_1) | (1 << F_PROTOCOL) | (1 << F_FLUSH)
    pfs = (1 << PF_REPLY_ACK) | (1 << PF_CONFIG) | (1 << PF_LOG_SHMFD)

    try:
        with connect(path) as s:
            r = call(s, GET_FEATURES)
            f = struct.unpack("<Q", r[2])[0] if r and len(r[2]) == 8 else 0
            r = call(s, GET_PROTOCOL_FEATURES)
            pf = struct.unpack("<Q", r[2])[0] if r and len(r[2]) == 8 else 0
            check("migration: VHOST_F_LOG_ALL and LOG_SHMFD are offered "
                  "(features 0x%x, protocol features 0x%x)" % (f, pf),
                  f & (1 << F_LOG_ALL) and pf & (1 << PF_LOG_SHMFD))
            send(s, SET_PROTOCOL_FEATURES, struct.pack("<Q", pfs))
            send(s, SET_OWNER)
            h = acked(s, SET_FEATURES, struct.pack("<Q", feats))
            ran = start_ring(s)
            log = memfd(8192)
            r = call(s, SET_LOG_BASE, struct.pack("<QQ", 4096, 4096), [log])
            os.close(log)
            check("  SET_LOG_BASE (4 KiB at offset 4 KiB of a memfd): a SET_LOG_BASE "
                  "reply, status 0", h and ran and r is not None and r[0] == SET_LOG_BASE
                  and r[2] == struct.pack("<Q", 0) and "dirty log: 4096 bytes" in b.text(),
                  b.text())
            a = acked(s, SET_FEATURES, struct.pack("<Q", feats | (1 << F_LOG_ALL)))
            qva = 0x7f0000000000
            v = acked(s, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 1 << VRING_F_LOG, qva,
                                                     qva + 4096, qva + 8192, 8192))
            e = acked(s, SET_VRING_ENABLE, struct.pack("<II", 0, 1))
            check("  logging on: SET_FEATURES with VHOST_F_LOG_ALL, SET_VRING_ADDR with "
                  "VHOST_VRING_F_LOG, the ring runs (%s %s %s)" % (a, v, e),
                  a and v and e, b.text())
            a = acked(s, SET_FEATURES, struct.pack("<Q", feats))
            v = acked(s, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 0, qva, qva + 4096,
                                                     qva + 8192, 0))
            check("  logging off again (%s %s)" % (a, v), a and v, b.text())
            v = acked(s, SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 2, qva, qva + 4096,
                                                     qva + 8192, 0))
            check("  SET_VRING_ADDR with an unknown flag ends the session",
                  v is None and session_ended(s), b.text())
        # Without LOG_SHMFD the log would not be shared: a malformed request.
        with connect(path) as s:
            h = handshake(s, feats)
            log = memfd(4096)
            send(s, SET_LOG_BASE, struct.pack("<QQ", 4096, 0), [log])
            os.close(log)
            check("  SET_LOG_BASE without LOG_SHMFD negotiated ends the session",
                  h and session_ended(s), b.text())
        for desc, payload, nfd in (("a zero-sized log", struct.pack("<QQ", 0, 0), 1),
                                   ("no fd", struct.pack("<QQ", 4096, 0), 0),
                                   ("a short payload", struct.pack("<Q", 4096), 1)):
            with connect(path) as s:
                send(s, SET_PROTOCOL_FEATURES, struct.pack("<Q", pfs))
                send(s, SET_OWNER)
                log = memfd(4096)
                send(s, SET_LOG_BASE, payload, [log] if nfd else [])
                os.close(log)
                check("  SET_LOG_BASE with %s ends the session" % desc,
                      session_ended(s), b.text())
        check("  the bridge serves on", b.alive() and get_features_ok(path), b.text())
    finally:
        b.stop()


def test_root_caps(be):
    """Root without --user keeps its uid but no capability."""
    if os.getuid() != 0:
        skip("root without --user drops its capabilities", "needs root")
        return
    path = socket_path("rootcaps")
    b = Bridge("rootcaps", ["--backend", be, "--no-kernel", "--buffered", "--socket", path],
               wait_socket=True)
    try:
        st = {}
        with open("/proc/%d/status" % b.pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.split()
        check("root without --user: uid 0, no capabilities (effective, permitted, "
              "bounding), no_new_privs (CapBnd %s)" % st["CapBnd"][0],
              st["Uid"][0] == "0" and int(st["CapEff"][0], 16) == 0 and
              int(st["CapPrm"][0], 16) == 0 and int(st["CapBnd"][0], 16) == 0 and
              st["NoNewPrivs"] == ["1"], b.text())
        check("  serves", get_features_ok(path), b.text())
    finally:
        rc = b.stop()
    check("  SIGTERM: exit status 0, its socket removed (%s)" % rc,
          rc == 0 and not os.path.exists(path), b.text())


def test_user(be):
    if os.getuid() != 0:
        skip("--user", "needs root")
        return
    nobody = pwd.getpwnam("nobody")
    path = socket_path("user")
    b = Bridge("user", ["--backend", be, "--no-kernel", "--buffered",
                        "--socket", path, "--user", "nobody"], wait_socket=True)
    try:
        st = {}
        with open("/proc/%d/status" % b.pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.split()
        ids_ok = st["Uid"] == [str(nobody.pw_uid)] * 4 and st["Gid"] == [str(nobody.pw_gid)] * 4
        check("--user nobody: uid/gid %s/%s, no capabilities, no_new_privs"
              % (st["Uid"][0], st["Gid"][0]),
              ids_ok and int(st["CapEff"][0], 16) == 0 and int(st["CapPrm"][0], 16) == 0
              and st["NoNewPrivs"] == ["1"], b.text())
        check("  serves", get_features_ok(path), b.text())
        check("  the backend descriptors opened as root stay", len(backend_fds(b.pid)) == 2)
    finally:
        rc = b.stop()
    check("  SIGTERM: exit status 0 (%s)" % rc, rc == 0, b.text())
    rc, out = run_bridge(["--backend", be, "--no-kernel", "--buffered", "--socket",
                          socket_path("nouser"), "--user", "no-such-user-x"])
    check("--user naming no user: exit status 1", rc == 1, out)


def test_noatime_fallback(_):
    """A bridge that may not set O_NOATIME (not the file's owner, no
    CAP_FOWNER) opens the backend without it and serves."""
    if os.getuid() != 0:
        skip("O_NOATIME fallback", "needs root (to run the bridge as nobody)")
        return
    nobody = pwd.getpwnam("nobody")
    d = tempfile.mkdtemp(prefix="bridge-noatime.", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        # a copy nobody can run wherever the tree is (a home of 0700)
        bridge = os.path.join(d, "vhost-blk-bridge")
        shutil.copy(BRIDGE, bridge)
        os.chmod(bridge, 0o755)
        be = os.path.join(d, "root-owned.img")
        with open(be, "wb") as f:
            f.truncate(16 << 20)
        os.chmod(be, 0o666)
        os.chown(d, nobody.pw_uid, nobody.pw_gid)	# for its socket
        path = os.path.join(d, "noatime.sock")

        def as_nobody():
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
        b = Bridge("noatime", ["--backend", be, "--no-kernel", "--buffered",
                               "--socket", path], preexec=as_nobody,
                   wait_socket=True, binary=bridge)
        try:
            if not check("a bridge running as nobody starts on a root-owned "
                         "backend", b.alive(), b.text()):
                return
            fds = backend_fds(b.pid)
            check("  and opens it "
                  "without O_NOATIME (flags %s)" % [oct(f) for _, _, f in fds],
                  len(fds) == 2 and not any(f & O_NOATIME for _, _, f in fds),
                  b.text())
            check("  and serves", get_features_ok(path), b.text())
        finally:
            b.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    if not os.access(BRIDGE, os.X_OK):
        nok("binary %s built" % BRIDGE)
        return 1
    be = backend_file("disk.img")
    try:
        for t in (test_command_line, test_socket_options, test_fd_passing,
                  test_activation, test_single_open, test_memory_fds,
                  test_timeouts, test_sigterm_blocked_reply, test_accept_errors,
                  test_writeback_without_flush, test_backend_lock,
                  test_resume_at_used, test_new_mem_table_running,
                  test_shrunk_memory, test_log_size, test_sigterm_lock_wait,
                  test_resize, test_reset_owner_channel, test_config_flags,
                  test_mem_slots, test_status_reset, test_seccomp, test_log_rate,
                  test_migration_log, test_root_caps, test_user, test_noatime_fallback):
            try:
                t(be)
            except Exception as e:	# a test that breaks is a failure, the rest run
                nok("%s ended early: %s: %s" % (t.__name__, type(e).__name__, e))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
