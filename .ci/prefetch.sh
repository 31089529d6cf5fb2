#!/usr/bin/env bash
# What the later CI steps download and install (Debian packages, Python venvs, npm
# packages, a few pinned Go tools), fetched while the first steps compile: those steps
# are busy on the CPU, these mostly on the network. `.ci/run` starts this in the
# background and waits for it before the first step that installs anything. Each script
# runs with CI_INSTALL_ONLY=1, which makes it stop after its installs, so the versions
# stay in one place; a script that fails here is only logged: its step installs again.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CI_INSTALL_ONLY=1
failed=()
for script in .ci/deploy.sh deploy/scale-out.sh .ci/datasets.sh .ci/interop.sh .ci/faults.sh .ci/connect.sh; do
    started=$SECONDS
    if bash "$script"; then
        echo "prefetch.sh: $script installed in $((SECONDS - started)) s"
    else
        echo "prefetch.sh: $script failed after $((SECONDS - started)) s; its step installs again"
        failed+=("$script")
    fi
done
((${#failed[@]} == 0))
