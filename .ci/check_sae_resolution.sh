#!/usr/bin/env bash
# Checks that ppairs-lens and SAELens resolve into one environment (`pip install ".[sae]"`):
# sae-lens needs transformer-lens<4, ppairs-lens >=3.9,<5, so pip must settle on 3.9.x.
# A dry run in a throwaway venv: it reads the package index (CI has it) and installs nothing.
# torch is pinned as `make setup` pins it, so the resolver never considers CUDA builds.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
if ! "$tmp/venv/bin/python" -m pip install --dry-run --report "$tmp/report.json" \
    torch==2.13.0 ".[sae]" >"$tmp/log" 2>&1; then
  # The end of pip's log names the conflict ("The conflict is caused by: ...").
  grep -v '^WARNING: Location' "$tmp/log" | tail -n 25 >&2
  echo "FAIL: ppairs-lens[sae] (ppairs-lens with sae-lens) does not resolve: see pip's message" \
       "above; check the transformer-lens bound in pyproject.toml against sae-lens's." >&2
  exit 1
fi
"$tmp/venv/bin/python" - "$tmp/report.json" <<'PY'
import json, sys
chosen = {i["metadata"]["name"].lower(): i["metadata"]["version"]
          for i in json.load(open(sys.argv[1]))["install"]}
missing = [n for n in ("sae-lens", "transformer-lens") if n not in chosen]
if missing:
    sys.exit(f"FAIL: the resolution of ppairs-lens[sae] has no {', '.join(missing)}: "
             "is the `sae` extra still in pyproject.toml?")
print(f"ok: ppairs-lens[sae] resolves with sae-lens {chosen['sae-lens']} and "
      f"transformer-lens {chosen['transformer-lens']}")
PY
