/** The browser suites fail, never skip, when Chromium is missing, and say how to install it. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { launchChromium } from "./chromium.ts";

test("a missing Chromium fails with the command that installs it", async () => {
  await assert.rejects(launchChromium("/nonexistent/chromium"), (error: Error) => {
    assert.match(error.message, /Chromium is not installed at \/nonexistent\/chromium/);
    assert.match(error.message, /apt-get install -y chromium/);
    return true;
  });
});
