#!/usr/bin/env bash
# Holistic Trace Analysis for scripts/hta_check.py (the hta_cpu ctest), in its
# own .venv-hta: it needs pandas, numpy and plotly, none of which attnprof or
# its LibTorch .venv needs. Pinned, without HTA's declared extras (jupyterlab,
# pytest: about 100 packages HTA never imports); about 30 s and 400 MB.
# Idempotent: a second run only checks the import.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HTA_VENV:-.venv-hta}
say() { printf '[setup_hta] %s\n' "$*" >&2; }
if "$VENV/bin/python" -c 'import hta, importlib.metadata as m; assert m.version("HolisticTraceAnalysis") == "0.5.0"' 2>/dev/null; then
  say "HTA 0.5.0 already in $VENV"
  exit 0
fi
python3 -m venv "$VENV"
# What hta/ imports (numpy, pandas, plotly, networkx, yaml, ijson, psutil,
# pydot) and their own requirements, at versions HTA 0.5.0 was released with.
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps \
  HolisticTraceAnalysis==0.5.0 numpy==2.2.6 pandas==2.2.3 python-dateutil==2.9.0.post0 six==1.17.0 \
  pytz==2025.2 tzdata==2025.2 plotly==5.24.1 tenacity==9.1.2 packaging==25.0 networkx==3.4.2 \
  PyYAML==6.0.2 ijson==3.3.0 psutil==7.0.0 pydot==3.0.4 pyparsing==3.2.3
"$VENV/bin/python" -c 'import hta.trace_analysis' >/dev/null
say "installed HTA 0.5.0 into $VENV"
