#!/usr/bin/env python3
"""Checks that every system call in an `strace -f` log is allowed by the unit's
SystemCallFilter= lines (sets expanded as `systemd-analyze syscall-filter` lists them),
and every socket(2) family by its RestrictAddressFamilies=, so that the sandbox never
turns one into EPERM.

Usage: check-syscalls.py UNIT STRACE_LOG
Exits 1 naming the calls the filter would refuse.
"""

import re
import subprocess
import sys


def syscall_sets():
    """Every set `systemd-analyze syscall-filter` knows: name -> its entries."""
    listing = subprocess.run(["systemd-analyze", "syscall-filter", "--no-pager"],
                             check=True, capture_output=True, text=True).stdout
    sets, current = {}, None
    for line in listing.splitlines():
        if line.startswith("@"):
            current = sets.setdefault(line.strip(), [])
        elif current is not None and line.startswith("    ") and not line.strip().startswith("#"):
            current.append(line.strip())
    return sets


def expand(entries, sets, seen=None):
    seen = seen or set()
    calls = set()
    for entry in entries:
        if entry.startswith("@"):
            if entry not in seen:
                seen.add(entry)
                calls |= expand(sets[entry], sets, seen)
        else:
            calls.add(entry)
    return calls


def main():
    unit, trace = sys.argv[1], sys.argv[2]
    sets = syscall_sets()
    allowed, denied, families = set(), set(), None
    with open(unit) as f:
        for line in f:
            match = re.match(r"SystemCallFilter=(~?)(.*)", line.strip())
            if match:
                names = expand(match.group(2).split(), sets)
                (denied if match.group(1) else allowed).update(names)
            match = re.match(r"RestrictAddressFamilies=(.*)", line.strip())
            if match:
                families = set(match.group(1).split())
    if not allowed:
        print("check-syscalls: the unit has no SystemCallFilter allow-list", file=sys.stderr)
        return 1
    used, used_families = set(), set()
    with open(trace) as f:
        for line in f:
            # "PID name(...", or "PID <... name resumed>" for a call another thread interrupted.
            match = re.match(r"\d+\s+(?:<\.\.\. )?([a-z_0-9]+)[( ]", line)
            if match:
                used.add(match.group(1))
            match = re.match(r"\d+\s+socket\((AF_[A-Z0-9]+)", line)
            if match:
                used_families.add(match.group(1))
    refused = sorted(c for c in used if c not in allowed or c in denied)
    if refused:
        print(f"check-syscalls: refused by SystemCallFilter: {' '.join(refused)}", file=sys.stderr)
    refused_families = sorted(used_families - families) if families is not None else []
    if refused_families:
        print(f"check-syscalls: refused by RestrictAddressFamilies: {' '.join(refused_families)}", file=sys.stderr)
    if refused or refused_families:
        return 1
    print(f"check-syscalls: ok: the {len(used)} system calls the server made are in the filter "
          f"({len(allowed - denied)} calls), its sockets ({' '.join(sorted(used_families))}) in the families allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
