"""Screenshot the MLflow UI showing a brushrl run: its metric charts and one of its step paintings
(docs/figures/mlflow_metrics.png, docs/figures/mlflow_painting.png).

    # a server with the UI (full mlflow, kept out of brushrl's env: it would upgrade pyarrow)
    python3 -m venv /tmp/mlf && /tmp/mlf/bin/pip install mlflow playwright
    /tmp/mlf/bin/mlflow server --backend-store-uri sqlite:////tmp/mlf.db \\
        --default-artifact-root /tmp/mlf-artifacts --host 127.0.0.1 --port 5055 &
    brushrl train --config configs/local.yaml --name mlf-shot --steps 3 \\
        --set "logging.trackers=[tensorboard,mlflow]" --set logging.mlflow_tracking_uri=http://127.0.0.1:5055
    /tmp/mlf/bin/python scripts/mlflow_figures.py http://127.0.0.1:5055 docs/figures

Finds the newest run of experiment ``brushrl`` through the REST API, opens its "Model metrics" tab and
its artifacts (``images/paintings~01`` of the last step) in headless Debian Chromium (Playwright with
``/usr/bin/chromium``; nothing is downloaded). The UI polls, so pages are given a fixed settle time
rather than waiting for network idle.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request

SETTLE_S = 8.0


def _api(uri: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"{uri}/api/2.0/mlflow/{path}", data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=30).read())


def main(uri: str, out: str) -> int:
    from playwright.sync_api import sync_playwright

    exp = _api(uri, "experiments/get-by-name?experiment_name=brushrl")["experiment"]["experiment_id"]
    run = _api(uri, "runs/search", {"experiment_ids": [exp], "max_results": 1,
                                    "order_by": ["attributes.start_time DESC"]})["runs"][0]
    run_id, steps = run["info"]["run_id"], max(int(m.get("step", 0)) for m in run["data"]["metrics"])
    base = f"{uri}/#/experiments/{exp}/runs/{run_id}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/model-metrics")
        time.sleep(SETTLE_S)
        page.screenshot(path=f"{out}/mlflow_metrics.png")
        page.goto(f"{base}/artifacts")
        time.sleep(SETTLE_S)
        page.get_by_text("images", exact=True).click()
        time.sleep(2)
        name = re.compile(re.escape(f"paintings~01+step+{steps}+") + r".*[0-9a-f]\.png$")
        page.get_by_text(name).first.click()
        time.sleep(SETTLE_S / 2)
        page.screenshot(path=f"{out}/mlflow_painting.png")
        browser.close()
    print(f"run {run_id} ({run['info'].get('run_name')}), step {steps}: {out}/mlflow_metrics.png, {out}/mlflow_painting.png")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
