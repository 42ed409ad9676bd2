/** What the documents page's timeline drawing shows, read in the page (console-page.test.ts). */
import type { Page } from "playwright-core";

/** The timeline's captions as drawn, joined with " | ". */
export function timelineCaptions(page: Page): Promise<string> {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll("#timeline .caption"))
      .map((text) => text.textContent)
      .join(" | "),
  );
}

/**
 * Whether the drawing is legible: how many captions it has, whether any two of them overlap, and how
 * many blocks have a label that runs past the block.
 */
export function timelineLayout(
  page: Page,
): Promise<{ captions: number; overlapping: boolean; spilling: number }> {
  return page.evaluate(() => {
    const boxes = Array.from(document.querySelectorAll<SVGGraphicsElement>("#timeline .caption")).map(
      (text) => text.getBBox(),
    );
    const overlapping = boxes.some((a, i) =>
      boxes.some(
        (b, j) =>
          j > i && a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height,
      ),
    );
    const spilling = Array.from(document.querySelectorAll("#timeline g.clip")).filter((group) => {
      const label = group.querySelector<SVGGraphicsElement>(".clip-label")?.getBBox();
      const block = group.querySelector<SVGGraphicsElement>("rect")?.getBBox();
      return label !== undefined && block !== undefined && label.x + label.width > block.x + block.width;
    }).length;
    return { captions: boxes.length, overlapping, spilling };
  });
}
