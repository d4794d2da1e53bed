"""Screenshot TensorBoard showing a run's scalars and paintings (docs/figures/tensorboard.png).

    python scripts/tensorboard_figure.py runs/ docs/figures/tensorboard.png [--filter 'reward|paintings']

Starts ``tensorboard --logdir LOGDIR`` on a free 127.0.0.1 port, opens its Time Series dashboard
in headless Debian Chromium (Playwright with ``/usr/bin/chromium``; nothing is downloaded) with the
tag filter, waits until the charts and images have loaded and saves a full-page PNG.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from brushrl.ray_setup import free_port


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logdir")
    p.add_argument("out")
    p.add_argument("--filter", default="reward/mean|reward/pool_similarity|paintings/0[0-2]",
                   help="TensorBoard tag filter (regex)")
    p.add_argument("--width", type=int, default=1400)
    p.add_argument("--height", type=int, default=960)
    args = p.parse_args(argv)
    port = free_port()
    tb = subprocess.Popen([str(Path(sys.executable).parent / "tensorboard"), "--logdir", args.logdir, "--host",
                           "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while True:  # up when its HTTP answers
            try:
                urllib.request.urlopen(url, timeout=2)
                break
            except OSError:
                if tb.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"tensorboard did not start: {tb.stderr.read().decode()[-2000:]}")
                time.sleep(0.5)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            page.goto(f"{url}/?tagFilter={urllib.parse.quote(args.filter)}#timeseries")
            page.wait_for_selector("img", timeout=60000)  # the paintings
            page.wait_for_load_state("networkidle")
            # The settings pane (open at first): no smoothing, no outlier clipping (a 4-step run's
            # curve would be cut off), then close it.
            smoothing = page.get_by_role("spinbutton").first
            smoothing.fill("0")
            smoothing.press("Enter")
            page.get_by_text("Ignore outliers in chart scaling").click()
            page.get_by_role("button", name="Settings").click()
            page.wait_for_timeout(2000)  # the charts' last redraw
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=args.out, full_page=True)
            browser.close()
    finally:
        tb.terminate()
        tb.wait(timeout=30)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
