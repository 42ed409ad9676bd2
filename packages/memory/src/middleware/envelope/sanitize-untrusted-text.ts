/**
 * `sanitizeUntrustedText`: makes stored text safe to place inside the memory envelope, so it can
 * neither close the envelope nor hide instructions in characters a reader cannot see.
 */

/** Inserted between two angle brackets; stripped from the input first, so every one in the output is ours. */
export const RUN_BREAK = "\u200B";

/** What replaces text that spells the envelope's marker, in any case and with any separators. */
export const MARKER_PLACEHOLDER = "[delimiter-like text]";

/** Characters that render as `<` or `>` (fullwidth, small, guillemets, math and CJK brackets). */
const lessThanLookAlikes = new Set([
  "<",
  "\uFF1C",
  "\uFE64",
  "\u2039",
  "\u00AB",
  "\u2329",
  "\u3008",
  "\u27E8",
  "\u226A",
  "\u02C2",
]);
const greaterThanLookAlikes = new Set([
  "\u003E",
  "\uFF1E",
  "\uFE65",
  "\u203A",
  "\u00BB",
  "\u232A",
  "\u3009",
  "\u27E9",
  "\u226B",
  "\u02C3",
]);

/**
 * Invisible and direction-changing characters: every format character (bidi embeddings, overrides
 * and isolates, zero-width joiners and spaces, word joiner, BOM, soft hyphen, tag characters), C0 and C1
 * controls except tab and newline, and variation selectors.
 */
const formatOrControl = /^[\p{Cf}\p{Cc}]$/u;

function isInvisible(character: string): boolean {
  const codePoint = character.codePointAt(0)!;
  return (
    formatOrControl.test(character) ||
    (codePoint >= 0xfe00 && codePoint <= 0xfe0f) ||
    (codePoint >= 0xe0100 && codePoint <= 0xe01ef) ||
    codePoint === 0x034f ||
    codePoint === 0x115f ||
    codePoint === 0x1160 ||
    codePoint === 0x3164 ||
    codePoint === 0xffa0
  );
}

/**
 * Words of the marker with any run of spaces, underscores, dashes or dots between them. It starts
 * with a literal, so each separator run is scanned by at most one attempt: linear time.
 */
const markerLookAlike = /UNTRUSTED[\s_.-]*MEMORY[\s_.-]*CONTEXT/giu;

/**
 * One linear scan: drops invisible characters, folds angle-bracket look-alikes to ASCII and breaks
 * every pair of touching angle brackets (`<<`, `>>`, `<>`, `><`) with {@link RUN_BREAK}; then one linear regex pass replaces
 * anything spelling the marker. Line separators become newlines; carriage returns are dropped.
 */
export function sanitizeUntrustedText(text: string): string {
  let output = "";
  let previous = "";
  for (const character of text) {
    let folded: string;
    if (character === "\n" || character === "\t") folded = character;
    else if (character === "\u2028" || character === "\u2029") folded = "\n";
    else if (isInvisible(character)) continue;
    else if (lessThanLookAlikes.has(character)) folded = "<";
    else if (greaterThanLookAlikes.has(character)) folded = ">";
    else folded = character;
    if ((folded === "<" || folded === ">") && (previous === "<" || previous === ">")) output += RUN_BREAK;
    output += folded;
    previous = folded;
  }
  return output.replace(markerLookAlike, MARKER_PLACEHOLDER);
}
