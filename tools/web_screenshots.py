"""Screenshots of `agenvoy web` for docs/web.md and the README (docs/img/web-*.png): a home
seeded as the browser tests seed it (tests/web/seed.py), the real viewer with --write, and
headless Chromium (tests/web/browser.py).

Usage: python tools/web_screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAGES = [("sessions", "/"), ("session", "/s/main"), ("session-archive", "/s/main#archive"),
         ("search", "/search?q=deploy+permission&mode=hybrid&session=main"),
         ("context", "/context/main"), ("errors", "/errors"), ("notes", "/notes"),
         ("health", "/health"), ("forget", "/forget/main?seq=27"),
         ("hostile", "/s/hostile")]


def main() -> None:
    from tests.web import browser
    from tests.web.seed import seed, viewer

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agenvoy-shots-") as tmp:
        home = Path(tmp) / "home"
        seed(home)
        with viewer(home, "--write") as web:
            driver = browser.start()
            try:
                driver.set_window_size(1100, 760)
                driver.get(web.login)
                for name, path in PAGES:
                    driver.get(web.url + path)
                    driver.save_screenshot(str(args.out / f"web-{name}.png"))
                    print(f"docs/img/web-{name}.png")
            finally:
                browser.quit_browser(driver)


if __name__ == "__main__":
    main()
