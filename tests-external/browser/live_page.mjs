// Drives staunch's live page in Debian's headless Chromium (playwright-core, no bundled
// browser): waits for a job's progress bar to move, presses its Cancel button, waits for the
// row to read `cancelled`, and saves a screenshot.
//
// Usage: node live_page.mjs <page-url> <job-id> <screenshot.png> [bearer-token]
// With a token (a server with --auth), the page first answers 401 with its sign-in form: the
// token is typed in and the page goes on from there.
// Env: CHROMIUM (default /usr/bin/chromium). Prints one JSON line with what it saw.
import { chromium } from "playwright-core";

const [url, jobId, shot, token] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu"],
});
const seen = {};
try {
  const page = await browser.newPage({ viewport: { width: 1180, height: 560 } });
  const first = await page.goto(url);
  seen.opened = first.status();
  if (token) {
    await page.locator("#login").waitFor({ state: "visible", timeout: 20000 });
    seen.jobsBeforeSignIn = await page.locator("tr[data-job-id]").count();
    await page.fill("#bearer", token);
    await page.click("#login button[type=submit]");
    await page.locator("#login").waitFor({ state: "hidden", timeout: 20000 });
    seen.stored = await page.evaluate(() => sessionStorage.length);
  }
  const row = page.locator(`tr[data-job-id="${jobId}"]`);
  await row.waitFor({ timeout: 20000 });
  const done = async () => Number(await row.getAttribute("data-done"));
  // The bar moves: two different progress values, both seen through the page's live updates.
  const until = async (pred, what) => {
    const end = Date.now() + 20000;
    for (;;) {
      const v = await done();
      if (pred(v)) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last ${v})`);
      await page.waitForTimeout(100);
    }
  };
  seen.first = await until((v) => v > 0, "progress");
  seen.second = await until((v) => v > seen.first, "the bar to move");
  seen.width = await row.locator(".bar > div").evaluate((el) => el.style.width);
  seen.live = await page.locator("#conn").textContent();
  await row.locator("button.cancel").click();
  await page.locator(`tr[data-job-id="${jobId}"][data-state="cancelled"]`).waitFor({ timeout: 20000 });
  seen.state = await page.locator(`tr[data-job-id="${jobId}"]`).getAttribute("data-state");
  seen.status = await page.locator("#status").textContent();
  seen.requests = await page.locator("#requests tr").count();
  await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
}
