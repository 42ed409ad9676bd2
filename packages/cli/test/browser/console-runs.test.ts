/**
 * The durable runs page in a real Chromium against `npm start`: the demo agent approved from its card;
 * rejected with a reason; its arguments edited in the schema form (refused, then accepted); a refund
 * the tool refuses failing its card; a run cancelled at its approval. axe-core after every step.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Locator, Page } from "playwright-core";
import { type ConsoleUnderTest, openConsole } from "./console-under-test.ts";

let ui: ConsoleUnderTest;
let page: Page;
let errors: string[];
let origin: string;
const step = (what: string) => ui.step(what);
const checkPage = (name: string) => ui.checkPage(name);

before(async () => {
  ui = await openConsole({ viaNpmStart: true });
  ({ page, errors, origin } = ui);
  await page.goto(ui.signInUrl());
  await page.getByRole("heading", { name: "Modules and tools", level: 1 }).waitFor({ timeout: 15_000 });
  await step("signing in");
});

after(async () => {
  await ui?.close();
});

/** Starts the demo agent from the runs page and waits for its approval card. */
async function startDemoAgent(): Promise<Locator> {
  await page.getByRole("button", { name: "Start the demo agent" }).click();
  await step('clicking "Start the demo agent"');
  await page.locator("article.approval").waitFor({ timeout: 20_000 });
  return page.locator("article.approval");
}

/** Rejected with a reason: the run ends declined, the card keeps the reason. */
async function rejectWithReason(): Promise<void> {
  const approval = await startDemoAgent();
  await approval.getByLabel("Reason for rejecting").fill("customer withdrew the claim");
  await step('filling "Reason for rejecting"');
  await approval.getByRole("button", { name: "Reject" }).click();
  await step('clicking "Reject"');
  await page.locator(".run-status").filter({ hasText: "declined" }).waitFor({ timeout: 20_000 });
  assert.match(await page.locator(".run-status").innerText(), /declined/);
  // The rejected call keeps its card, declined, with the reason the person typed.
  const declined = page.locator('article.tool-card[data-status="declined"]').filter({ hasText: "refund" });
  await declined.waitFor({ timeout: 10_000 });
  assert.match(await declined.innerText(), /customer withdrew the claim/);
  await checkPage("runs-declined");
}

/** The arguments edited in the schema form: refused twice, then accepted, and the tool ran with them. */
async function editTheArguments(): Promise<void> {
  const approval = await startDemoAgent();
  // The edit is a form drawn from the refund's input JSON Schema, filled in with the proposed
  // arguments; the card number (redacted, not in the schema) is not offered, and there is no raw JSON.
  const edit = approval.getByRole("form", { name: "Edit the arguments" });
  assert.equal(await edit.getAttribute("data-form"), "schema");
  assert.equal(await edit.getByLabel("amount *").inputValue(), "42.5");
  assert.equal(await edit.getByLabel("note").inputValue(), "Damaged on arrival");
  assert.match(await edit.getByLabel("orderId").inputValue(), /^ORD-\d+$/);
  assert.equal(await edit.getByLabel(/cardNumber/).count(), 0, "redacted fields are not offered for editing");
  assert.equal(await edit.locator("textarea").count(), 0, "no raw JSON for a schema the form draws");
  // An edit the tool's input schema refuses: its messages beside the fields they name, the run still paused.
  await edit.getByLabel("amount *").fill("-5");
  await step('filling "amount *"');
  await edit.getByLabel("note").fill("x".repeat(201));
  await step('filling "note"');
  await edit.getByRole("button", { name: "Approve with these arguments" }).click();
  await step('clicking "Approve with these arguments"');
  const besideField = async (label: string) =>
    edit.locator(`#${await edit.getByLabel(label).getAttribute("aria-describedby")}`);
  await (await besideField("amount *")).filter({ hasText: /\S/ }).waitFor({ timeout: 20_000 });
  assert.match(await (await besideField("amount *")).innerText(), /^-5 is less than\b/);
  assert.match(await (await besideField("note")).innerText(), /too long \(201 > 200\)/);
  assert.equal(await (await besideField("orderId")).innerText(), "");
  assert.match(await approval.getByRole("alert").innerText(), /refused by the tool's input schema/);
  assert.match(await page.locator(".run-status").innerText(), /Paused/);
  // The refusal is the one thing the browser logged (the resume's 400).
  assert.deepEqual(errors.splice(0), [
    "console: Failed to load resource: the server responded with a status of 400 (Bad Request)",
  ]);
  await checkPage("runs-edit-refused");
  // A required amount left out: "required" beside the amount, said once, with no internal id.
  await edit.getByLabel("amount *").fill("");
  await step('filling "amount *"');
  await edit.getByLabel("note").fill("fine");
  await step('filling "note"');
  await edit.getByRole("button", { name: "Approve with these arguments" }).click();
  await step('clicking "Approve with these arguments"');
  await (await besideField("amount *")).filter({ hasText: /required/ }).waitFor({ timeout: 20_000 });
  const alert = await approval.getByRole("alert").innerText();
  assert.doesNotMatch(alert, /approve:|agent:refund/, "no internal id in the message");
  assert.equal(alert.match(/required/g)?.length ?? 0, 0, "said beside the field, not again below");
  assert.deepEqual(errors.splice(0), [
    "console: Failed to load resource: the server responded with a status of 400 (Bad Request)",
  ]);
  await edit.getByLabel("amount *").fill("10");
  await step('filling "amount *"');
  await edit.getByLabel("note").fill("Partial refund: the customer keeps the box");
  await step('filling "note"');
  await edit.getByRole("button", { name: "Approve with these arguments" }).click();
  await step('clicking "Approve with these arguments"');
  await page.locator(".run-status").filter({ hasText: "Completed" }).waitFor({ timeout: 20_000 });
  // The completed refund card shows the edited values: the tool ran with them.
  const refund = page.locator("article.tool-card").filter({ hasText: "refund" });
  assert.equal(await refund.getAttribute("data-status"), "completed");
  assert.match(await refund.innerText(), /"amount": 10\b/);
  assert.match(await refund.innerText(), /"note": "Partial refund: the customer keeps the box"/);
  assert.doesNotMatch(await refund.innerText(), /42\.5|Damaged on arrival/);
}

/** An amount the schema accepts but the refund tool refuses (above the order's): its card fails with
 * the tool's error, and the run ends saying so. */
async function refundTheToolRefuses(): Promise<void> {
  const approval = await startDemoAgent();
  await approval.getByLabel("amount *").fill("100");
  await step('filling "amount *"');
  await approval.getByRole("button", { name: "Approve with these arguments" }).click();
  await step('clicking "Approve with these arguments"');
  await page.locator(".run-status").filter({ hasText: "Completed" }).waitFor({ timeout: 20_000 });
  const failed = page.locator("article.tool-card").filter({ hasText: "refund" });
  assert.equal(await failed.getAttribute("data-status"), "error");
  assert.match(await failed.locator(".badge").innerText(), /^error$/);
  assert.match(
    await failed.innerText(),
    /Error\s+"A refund cannot exceed the order's 42\.5 EUR \(asked 100\)"/,
  );
  assert.match(await page.locator(".run-status").innerText(), /refund_failed/);
}

/** Cancelled at its approval: the refund never ran, and the run is cancelled in the store. */
async function cancelAtTheApproval(): Promise<void> {
  const approval = await startDemoAgent();
  await approval.getByRole("button", { name: "Cancel run" }).click();
  await step('clicking "Cancel run"');
  await page.locator(".run-status").filter({ hasText: "cancelled" }).waitFor({ timeout: 20_000 });
  // The refund the approval stood for never ran: its card says cancelled, not completed.
  const cancelledCard = page
    .locator('article.tool-card[data-status="cancelled"]')
    .filter({ hasText: "refund" });
  await cancelledCard.waitFor({ timeout: 10_000 });
  assert.match(await cancelledCard.innerText(), /"cancelled": true/);
  assert.doesNotMatch(await cancelledCard.innerText(), /refundId/);
  // The run itself is cancelled in the durable store, not merely declined.
  await page
    .locator("#runs tbody tr:first-child .badge")
    .filter({ hasText: /^cancelled$/ })
    .waitFor({ timeout: 10_000 });
  const rows = await page.locator("#runs tbody tr").allInnerTexts();
  assert.ok(rows.length >= 4);
  assert.deepEqual(errors, []);
}

describe("durable runs on the console page, served by npm start", () => {
  test("durable runs: the demo agent pauses for approval, its card is approved, and the run completes", async () => {
    await page.goto(`${origin}/#/runs`);
    await step("opening the runs page");
    await page.getByRole("button", { name: "Start the demo agent" }).click();
    await step('clicking "Start the demo agent"');
    const approval = page.locator("article.approval");
    await approval.waitFor({ timeout: 20_000 });
    const lookup = page.locator("article.tool-card").filter({ hasText: "lookup_order" });
    assert.equal(await lookup.getAttribute("data-status"), "completed");
    // The card number is shown as redacted, in the result and in the approval.
    assert.match(await lookup.locator(".redacted").first().innerText(), /redacted/);
    assert.doesNotMatch(await page.locator("main").innerText(), /4111/);
    assert.match(await approval.innerText(), /cardNumber": redacted/);
    await checkPage("runs");

    await approval.getByRole("button", { name: "Approve", exact: true }).click();
    await step('clicking "Approve"');
    await page.locator(".run-status").filter({ hasText: "Completed" }).waitFor({ timeout: 20_000 });
    const refund = page.locator("article.tool-card").filter({ hasText: "refund" });
    assert.equal(await refund.getAttribute("data-status"), "completed");
    assert.match(await refund.innerText(), /"refundId": "rf-ORD-\d+"/);
    assert.match(await page.locator(".run-status").innerText(), /refunded/);

    // The thread's history, from the durable app's history route: the start, then after the agent node.
    await page.locator("#run-history summary").click();
    await step("opening the run's history");
    const rows = page.locator("#run-history tbody tr");
    await rows.nth(1).waitFor({ timeout: 10_000 });
    const texts = await rows.allInnerTexts();
    assert.equal(texts.length, 2);
    // One page holds it (durable pages a history by 100 checkpoints): nothing later to ask for.
    assert.equal(await page.locator("#run-history .history-more").isHidden(), true);
    assert.match(texts[0] ?? "", /^\d+\s+\S+\s+\(start\)\s+agent\s+\{\s+"orderId": "ORD-\d+"/);
    assert.match(texts[1] ?? "", /agent\s+\(end\)[\s\S]*"outcome": "refunded"/);
    // The card number stays redacted in the states shown.
    assert.doesNotMatch(texts.join("\n"), /4111/);
    await step("the run's history drawn");
    assert.deepEqual(errors, []);
  });

  test("durable runs: reject with a reason; edit the arguments in the schema form (refused, then accepted) and approve; a refund the tool refuses fails its card; cancel", async () => {
    await page.goto(`${origin}/#/runs`);
    await step("opening the runs page");
    await rejectWithReason();
    await editTheArguments();
    await refundTheToolRefuses();
    await cancelAtTheApproval();
  });
});
