#!/usr/bin/env python3
"""Checks the rendered kustomize output (`kubectl kustomize deploy/kubernetes`) against
the server it runs, without a cluster, and writes the container's exact configuration
for `gamesolver-server --check-config` to try.

Usage: check-manifests.py RENDERED.yaml --help-text HELP.txt --image-env ENV.json
                          [--emit DIR]
  HELP.txt:  `gamesolver-server --help`, whose long flags are the accepted names.
  ENV.json:  the image's Config.Env (`podman image inspect`), the defaults under the
             Deployment's own environment.
  DIR:       gets `args` and `env` (NUL-separated), `mounts` (a line each) and `user`
             (UID:GID), what .ci/deploy.sh hands the server in the image's root.
Exits 1 with every problem listed.
"""

import argparse
import json
import os
import re
import sys

import yaml

SERVICE = "gamesolver.v1.GameSolverService"
CONTAINER = "gamesolver-server"

problems = []


def check(ok, message):
    if not ok:
        problems.append(message)
    return ok


def env_name(flag):
    """The environment variable of a long flag: --metrics-listen -> GAMESOLVER_METRICS_LISTEN."""
    return "GAMESOLVER_" + flag.upper().replace("-", "_")


def port_of(address):
    """The port of IP:PORT or [IPv6]:PORT."""
    return int(address.rsplit(":", 1)[1])


def host_of(address):
    return address.rsplit(":", 1)[0].strip("[]")


def seconds(value):
    return float(value)


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("rendered")
    parser.add_argument("--help-text", required=True)
    parser.add_argument("--image-env", required=True)
    parser.add_argument("--emit")
    opts = parser.parse_args()

    with open(opts.rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    with open(opts.help_text) as f:
        flags = set(re.findall(r"^\s+(?:-\w, )?--([a-z0-9-]+)", f.read(), re.M))
    check("listen" in flags, "the --help text lists no --listen: not gamesolver-server's")
    with open(opts.image_env) as f:
        image_env = dict(e.split("=", 1) for e in json.load(f) or [])

    by_kind = {}
    for doc in docs:
        for key in ("apiVersion", "kind", "metadata"):
            check(key in doc, f"a document without {key}: {str(doc)[:80]}")
        by_kind.setdefault(doc.get("kind"), []).append(doc)
    for kind in ("Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"):
        check(kind in by_kind, f"no {kind} rendered")
    if problems:
        return report()

    (deployment,) = by_kind["Deployment"]
    name = deployment["metadata"]["name"]
    template = deployment["spec"]["template"]
    pod_labels = template["metadata"]["labels"]
    check(matches(deployment["spec"]["selector"]["matchLabels"], pod_labels),
          "the Deployment's selector does not match its pod labels")
    check("replicas" not in deployment["spec"],
          "the Deployment sets replicas: each apply would reset what the autoscaler chose")
    pod = template["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    if not check(CONTAINER in containers, f"no container named {CONTAINER}"):
        return report()
    container = containers[CONTAINER]
    check("command" not in container, "the container replaces the image's entrypoint")

    # The flags, as the server will see them: the image's environment, the container's
    # on top, and the arguments over both (clap: a flag beats its variable).
    args = [str(a) for a in container.get("args", [])]
    env = {}
    for var in container.get("env", []):
        if not check("value" in var, f"env {var['name']}: only literal values are checked"):
            continue
        env[var["name"]] = str(var["value"])
    for var in env:
        if var.startswith("GAMESOLVER_"):
            flag = var[len("GAMESOLVER_"):].lower().replace("_", "-")
            check(flag in flags, f"env {var}: the server has no --{flag}")
        else:
            check(var == "RUST_LOG", f"env {var}: not a GAMESOLVER_ flag nor RUST_LOG")
    for arg in args:
        if arg.startswith("--"):
            flag = arg[2:].split("=", 1)[0]
            check(flag in flags, f"argument {arg}: the server has no --{flag}")
    effective = {**image_env, **env}
    i = 0
    while i < len(args):
        if args[i].startswith("--"):
            flag, _, value = args[i][2:].partition("=")
            if not value and i + 1 < len(args) and not args[i + 1].startswith("--"):
                value = args[i + 1]
                i += 1
            effective[env_name(flag)] = value
        i += 1

    listen = effective.get("GAMESOLVER_LISTEN", "127.0.0.1:50051")
    metrics = effective.get("GAMESOLVER_METRICS_LISTEN")
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    check(host_of(listen) in ("0.0.0.0", "::"),
          f"the server listens on {listen}: probes and the Service cannot reach it")
    check(ports.get("grpc") == port_of(listen),
          f"containerPort grpc {ports.get('grpc')} is not the listen port {port_of(listen)}")
    if check(metrics is not None, "no GAMESOLVER_METRICS_LISTEN: nothing to scrape"):
        check(host_of(metrics) in ("0.0.0.0", "::"), f"metrics on {metrics}: unreachable from Prometheus")
        check(ports.get("metrics") == port_of(metrics),
              f"containerPort metrics {ports.get('metrics')} is not the metrics port {port_of(metrics)}")

    # Probes: the kubelet's own gRPC health check, on the port the server listens on.
    for kind in ("readinessProbe", "livenessProbe"):
        probe = container.get(kind)
        if not check(probe and "grpc" in probe, f"{kind}: not a grpc probe"):
            continue
        check(probe["grpc"].get("port") == port_of(listen),
              f"{kind}: port {probe['grpc'].get('port')} is not the listen port {port_of(listen)}")
    readiness = container.get("readinessProbe", {}).get("grpc", {})
    check(readiness.get("service") == SERVICE, f"readinessProbe: service is not {SERVICE}")

    # Shutdown: the grace period covers the preStop sleep, the drain and the table save.
    grace = pod.get("terminationGracePeriodSeconds", 30)
    drain = seconds(effective.get("GAMESOLVER_SHUTDOWN_TIMEOUT", "30"))
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    check(grace > pre_stop + drain,
          f"terminationGracePeriodSeconds {grace} <= preStop {pre_stop} + shutdown timeout {drain}")

    # Non-root, read-only root: then the table must be on a volume.
    pod_security = pod.get("securityContext", {})
    security = {**pod_security, **container.get("securityContext", {})}
    check(security.get("runAsNonRoot") is True, "runAsNonRoot is not true")
    uid, gid = security.get("runAsUser"), security.get("runAsGroup", security.get("runAsUser"))
    check(isinstance(uid, int) and uid > 0, "runAsUser is not a non-zero number")
    check(security.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem is not true")
    check(security.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation is not false")
    mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
    volumes = {v["name"] for v in pod.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        check(m["name"] in volumes, f"volumeMount {m['name']}: no such volume")
    table = effective.get("GAMESOLVER_IV_TABLE")
    if table:
        check(os.path.dirname(table) in mounts,
              f"the table {table} is not on a mounted volume (the root is read-only)")
    resources = container.get("resources", {})
    for key in ("cpu", "memory"):
        check(key in resources.get("requests", {}), f"no {key} request")
    check("memory" in resources.get("limits", {}), "no memory limit")

    # Services reach the pods, on ports they have.
    services = by_kind["Service"]
    check(any(s["spec"].get("clusterIP") == "None" for s in services), "no headless Service")
    check(any(s["spec"].get("type", "ClusterIP") == "ClusterIP" and s["spec"].get("clusterIP") != "None"
              for s in services), "no ClusterIP Service")
    for s in services:
        sname = s["metadata"]["name"]
        check(matches(s["spec"].get("selector", {}), pod_labels), f"Service {sname} selects no pod")
        for p in s["spec"]["ports"]:
            target = p.get("targetPort", p["port"])
            check(target in ports or target in ports.values(),
                  f"Service {sname} port {p['name']}: targetPort {target} is not a container port")
    for pdb in by_kind["PodDisruptionBudget"]:
        check(matches(pdb["spec"]["selector"]["matchLabels"], pod_labels), "the PodDisruptionBudget selects no pod")
    for hpa in by_kind["HorizontalPodAutoscaler"]:
        ref = hpa["spec"]["scaleTargetRef"]
        check(ref["kind"] == "Deployment" and ref["name"] == name, "the HorizontalPodAutoscaler scales another target")
        check(hpa["spec"].get("minReplicas", 1) >= 2,
              "minReplicas below 2: the PodDisruptionBudget would block every drain")
    for monitor in by_kind.get("ServiceMonitor", []):
        selected = [s for s in services if matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"].get("labels", {}))]
        check(len(selected) == 1, f"the ServiceMonitor selects {len(selected)} Services, not one")
        for endpoint in monitor["spec"]["endpoints"]:
            check(any(endpoint["port"] == p["name"] and p.get("targetPort") == "metrics"
                      for s in selected for p in s["spec"]["ports"]),
                  f"the ServiceMonitor scrapes port {endpoint['port']}, not the metrics port")

    if opts.emit and not problems:
        os.makedirs(opts.emit, exist_ok=True)
        with open(os.path.join(opts.emit, "args"), "w") as f:
            f.write("".join(a + "\0" for a in args))
        with open(os.path.join(opts.emit, "env"), "w") as f:
            f.write("".join(f"{k}={v}\0" for k, v in {**image_env, **env}.items()))
        with open(os.path.join(opts.emit, "mounts"), "w") as f:
            f.write("".join(m + "\n" for m in mounts))
        with open(os.path.join(opts.emit, "user"), "w") as f:
            f.write(f"{uid}:{gid}\n")
    return report(f"{len(docs)} objects ({', '.join(sorted(by_kind))}); listen {listen}, metrics {metrics}, "
                  f"probes on {port_of(listen)}, grace {grace} s > {pre_stop} + {drain:g} s")


def report(summary=""):
    for p in problems:
        print(f"check-manifests: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-manifests: ok: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
