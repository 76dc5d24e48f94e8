/**
 * Headless Chromium for the browser tests and the inspector benchmark: Debian's `chromium`
 * (or `SPINDLE_CHROMIUM`) driven by puppeteer-core, which downloads no browser of its own.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "puppeteer-core";

const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];
export const SCREENSHOT_DIR = fileURLToPath(new URL("../../test-output/browser/", import.meta.url));

/** The browser's path, or an error that says how to get one (never a silent skip). */
export function chromiumPath(): string {
  const configured = process.env.SPINDLE_CHROMIUM;
  if (configured) {
    if (!existsSync(configured)) throw new Error(`SPINDLE_CHROMIUM=${configured}: no such file.`);
    return configured;
  }
  const found = CANDIDATES.find((path) => existsSync(path));
  if (!found) {
    throw new Error(
      "The browser tests need Chromium: `apt-get install -y chromium` (Debian), or set " +
        "SPINDLE_CHROMIUM to a Chromium or Chrome executable.",
    );
  }
  return found;
}

export async function launchChromium(): Promise<Browser> {
  const { launch } = await import("puppeteer-core");
  return launch({
    executablePath: chromiumPath(),
    headless: true,
    // Containers run as root without user namespaces: Chromium's sandbox cannot start there.
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
}

/** Writes `test-output/browser/<name>.png` (a failed test's last view). */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name.replace(/[^A-Za-z0-9_-]+/g, "-").slice(0, 100)}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * The little of the DOM that the tests' in-page callbacks read (the project's types have no DOM
 * lib: workers-types has its own `Element`). Declared locally as `document` where needed.
 */
export interface PageElement {
  textContent: string | null;
  classList: { contains(name: string): boolean };
  hasAttribute(name: string): boolean;
  getAttribute(name: string): string | null;
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement> & { length: number };
}
