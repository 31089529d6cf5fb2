"""A server binary started for a benchmark (bench/floor.py, bench/soak.py): its `listening
on` address, what /proc says of it (CPU time, context switches, memory), its log, and a
stop by its PID."""

import glob
import os
import re
import select
import signal
import subprocess
import time


class ServerProcess:
    """`argv` started with stdout piped (for its address) and stderr in `log_path`.

    Raises RuntimeError, after stopping it, when no `listening on ADDR` line comes within
    `timeout` seconds.
    """

    def __init__(self, argv, log_path, name="server", preexec=None, timeout=30.0):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, preexec_fn=preexec)
        self.addr = self._address(timeout)
        if self.addr is None:
            self.stop()
            raise RuntimeError(f"{name} ({argv[0]}) did not print its address; its log: {log_path}")
        host, port = self.addr.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def _address(self, timeout):
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            # The server prints whole lines, so a readable pipe holds one.
            if not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            line = self.proc.stdout.readline().decode(errors="replace")
            if not line:
                return None
            if line.startswith("listening on "):
                return line.split()[-1]
        return None

    def _status(self, field):
        with open(f"/proc/{self.proc.pid}/status") as status:
            return int(re.search(rf"{field}:\s+(\d+)", status.read()).group(1)) * 1024

    def rss(self):
        """Resident memory, bytes."""
        return self._status("VmRSS")

    def hwm(self):
        """Peak resident memory, bytes."""
        return self._status("VmHWM")

    def reset_peak(self):
        """Starts a new peak: VmHWM is the process's lifetime peak, so a probe that checks
        its own peak resets it first (writing 5 to clear_refs, Linux 4.0 and later)."""
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as clear_refs:
            clear_refs.write("5")

    def cpu_seconds(self):
        """User and system CPU time so far."""
        with open(f"/proc/{self.proc.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def context_switches(self):
        """Voluntary and involuntary context switches of all its threads so far."""
        total = 0
        for status in glob.glob(f"/proc/{self.proc.pid}/task/*/status"):
            try:
                with open(status) as f:
                    total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
            except FileNotFoundError:
                pass  # a thread that ended while we read
        return total

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as log:
            return log.read().decode(errors="replace")

    def stop(self):
        """SIGTERM, then SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
