#!/usr/bin/env bash
# Runs Baton on this machine, offline: a local control plane (kube-apiserver and etcd), the
# CRDs, the operator, and the helpdesk sample run; then the MCP memory server and the helpdesk
# whose memory agent uses it, and the two-gate pipeline. Everything keeps running afterwards so
# that kubectl can be used against it; 'down' stops it all. The memory server is installed from
# npm the first time (cached under ~/.cache/baton/npm); without npm, that sample is left out.
#
#   hack/quickstart.sh up     start (restarting whatever a previous 'up' left running)
#   hack/quickstart.sh down   stop
#
# Environment: LOCAL_DIR (state, logs and kubeconfig; default bin/local), MANAGER_BIN (the
# operator binary; default bin/manager).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
LOCAL_DIR=${LOCAL_DIR:-$root/bin/local}
MANAGER_BIN=${MANAGER_BIN:-$root/bin/manager}
KUBECONFIG_FILE="$LOCAL_DIR/kubeconfig"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

stop_pid() {
  local file="$LOCAL_DIR/$1.pid"
  [ -f "$file" ] || return 0
  local pid
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

down() {
  stop_pid mcpmemory
  stop_pid manager
  stop_pid controlplane
  rm -f "$KUBECONFIG_FILE"
}

up() {
  down
  mkdir -p "$LOCAL_DIR"
  cd "$root"

  say "Making kube-apiserver and etcd available (built once per machine if they cannot be downloaded)"
  assets=$(hack/envtest-assets.sh)
  go build -o bin/localcluster ./hack/localcluster

  say "Starting a local control plane"
  KUBEBUILDER_ASSETS="$assets" nohup bin/localcluster --dir "$LOCAL_DIR" --webhooks config/webhook >"$LOCAL_DIR/controlplane.log" 2>&1 &
  echo $! >"$LOCAL_DIR/controlplane.pid"
  for _ in $(seq 1 600); do
    grep -q "Control plane ready" "$LOCAL_DIR/controlplane.log" 2>/dev/null && break
    kill -0 "$(cat "$LOCAL_DIR/controlplane.pid")" 2>/dev/null || { cat "$LOCAL_DIR/controlplane.log"; exit 1; }
    sleep 0.2
  done
  grep -q "Control plane ready" "$LOCAL_DIR/controlplane.log" || { echo "the control plane did not start"; cat "$LOCAL_DIR/controlplane.log"; exit 1; }
  export KUBECONFIG="$KUBECONFIG_FILE"
  kubectl version

  say "Installing the CRDs"
  kubectl apply --server-side -k config/crd
  kubectl wait --for condition=established --timeout=60s crd/agentconfigs.agents.baton.dev crd/agentruns.agents.baton.dev crd/agentsessions.agents.baton.dev

  say "Starting the operator (log: $LOCAL_DIR/manager.log)"
  # The operator has its own identity, and serves the admission webhook that records who decides.
  # The MCP memory server below runs on this machine's loopback, which the egress policy refuses
  # unless it is allowed: a cluster would allow its tools' addresses instead.
  # shellcheck disable=SC2046
  KUBECONFIG="$LOCAL_DIR/kubeconfig-operator" nohup "$MANAGER_BIN" --health-probe-bind-address=0 \
    --transcript-store="$LOCAL_DIR/transcript.db" --egress-allow=127.0.0.1,::1 \
    $(cat "$LOCAL_DIR/webhook.flags") >"$LOCAL_DIR/manager.log" 2>&1 &
  echo $! >"$LOCAL_DIR/manager.pid"

  say "Applying the helpdesk sample"
  kubectl apply -f config/samples/helpdesk.yaml
  if ! kubectl wait --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s agentrun/ticket-1234; then
    kubectl get agentrun ticket-1234 -o yaml
    tail -20 "$LOCAL_DIR/manager.log"
    exit 1
  fi
  kubectl get agentconfigs
  kubectl get agentruns
  echo
  echo "Handoff sequence of ticket-1234:"
  # Every step, from the transcript: status keeps only the latest 10.
  "$root/bin/kubectl-baton" handoffs ticket-1234
  echo "Termination: $(kubectl get agentrun ticket-1234 -o jsonpath='{.status.terminationReason}: {.status.terminationMessage}')"
  echo

  say "Applying the helpdesk session sample: a conversation whose turns are runs"
  kubectl apply -f config/samples/helpdesk-session.yaml
  if ! kubectl wait --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s agentrun/helpdesk-chat-t1; then
    kubectl get agentrun helpdesk-chat-t1 -o yaml
    tail -20 "$LOCAL_DIR/manager.log"
    exit 1
  fi
  kubectl get agentsessions
  echo

  say "Starting the MCP memory server (log: $LOCAL_DIR/mcpmemory.log) and the helpdesk that keeps its memory there"
  go build -o bin/mcpmemory ./hack/mcpmemory
  nohup bin/mcpmemory >"$LOCAL_DIR/mcpmemory.log" 2>&1 &
  echo $! >"$LOCAL_DIR/mcpmemory.pid"
  for _ in $(seq 1 1500); do
    grep -q "ready at" "$LOCAL_DIR/mcpmemory.log" 2>/dev/null && break
    kill -0 "$(cat "$LOCAL_DIR/mcpmemory.pid")" 2>/dev/null || break
    sleep 0.2
  done
  memory_url=$(sed -n 's/.*ready at \([^ ]*\).*/\1/p' "$LOCAL_DIR/mcpmemory.log")
  if [ -n "$memory_url" ]; then
    sed "s#http://127.0.0.1:8090/mcp#$memory_url#" config/samples/helpdesk-memory.yaml | kubectl apply -f -
    if ! kubectl wait --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s agentrun/ticket-2001; then
      kubectl get agentrun ticket-2001 -o yaml
      tail -20 "$LOCAL_DIR/manager.log"
      exit 1
    fi
    kubectl get agentrun ticket-2001 -o custom-columns=NAME:.metadata.name,PHASE:.status.phase,STEPS:.status.stepCount,TOOLCALLS:.status.toolCalls
    echo "  its tool calls: kubectl baton transcript ticket-2001"
  else
    echo "The MCP memory server did not start (npm unreachable?); the helpdesk-memory sample is left out:"
    tail -5 "$LOCAL_DIR/mcpmemory.log"
  fi
  echo

  say "Applying the two-gate pipeline: it waits for you at its plan gate"
  kubectl apply -f config/samples/approvals-pipeline.yaml
  kubectl wait --for=jsonpath='{.status.phase}'=AwaitingApproval --timeout=60s agentrun/vendor-review
  kubectl get agentrun vendor-review
  echo "  approve the plan:  kubectl annotate agentrun vendor-review agents.baton.dev/approve=plan"
  echo "  then the results:  kubectl annotate agentrun vendor-review agents.baton.dev/approve=final"
  echo "  or send it back:   kubectl annotate agentrun vendor-review agents.baton.dev/reject=final agents.baton.dev/revise=crm agents.baton.dev/feedback='check the disputes'"
  echo
  say "Baton is running. To use it:"
  echo "  export KUBECONFIG=$KUBECONFIG_FILE PATH=$root/bin:\$PATH"
  echo "  kubectl get agentruns -w"
  echo "  kubectl baton describe ticket-1234; kubectl baton transcript ticket-1234"
  echo "  kubectl baton ui        # the web console: runs, timelines, the gate waiting for you"
  echo "  kubectl baton chat helpdesk-chat   # go on with the sample conversation, a line a turn"
  echo "Stop it all with: make quickstart-down"
}

case "${1:-}" in
  up) up ;;
  down) down; echo "Stopped." ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
