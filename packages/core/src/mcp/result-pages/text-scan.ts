/**
 * What cutting one text learns and keeps for its next cut (ADR 0558): whether it looks like JSON, and
 * how deep it nests at checkpoints every `checkpointSpacing` characters. A cut asks for the JSON
 * boundary near its own page: the nesting there is read from the checkpoint at or before it, so a
 * page's cut reads about the page, not the text before it, in whatever order the pages are asked.
 */

/** Characters between two kept nesting states. */
export const checkpointSpacing = 4_096;

/** Characters the cuts of texts have read, all told (the nesting scans and the search for a line's end): what tests count. */
export const scannedCharacters = { count: 0 };

export interface TextScan {
  /**
   * The end of the last JSON element before `reach` at the shallowest nesting level whose last
   * element ends at or after `half` (right after a `,` that separates array items or object members);
   * undefined when there is none, or the text does not look like JSON.
   */
  jsonBoundary(half: number, reach: number): number | undefined;
}

/** `spacing` is `checkpointSpacing` but in tests of the checkpoints themselves. */
export function createTextScan(text: string, spacing = checkpointSpacing): TextScan {
  let json: boolean | undefined;
  // The nesting state before index `k * spacing`, encoded by `encode`: the first only, at first.
  const checkpoints = [0];

  /** The nesting state before `position`: from the checkpoint at or before it, kept ones added on the way. */
  function stateAt(position: number): number {
    const at = Math.floor(position / spacing);
    for (let last = checkpoints.length - 1; last < at; last++) {
      const from = last * spacing;
      checkpoints.push(scan(text, checkpoints[last] as number, from, from + spacing));
    }
    return scan(text, checkpoints[at] as number, at * spacing, position);
  }

  return {
    jsonBoundary(half, reach) {
      json ??= looksLikeJson(text);
      if (!json) return undefined;
      // A comma at `half - 1` or later ends an element at `half` or later; the shallowest of those,
      // and its last before `reach`, is the boundary.
      const commas = { depth: Number.POSITIVE_INFINITY, end: -1 };
      scan(text, stateAt(half - 1), half - 1, reach, commas);
      return commas.end < 0 ? undefined : commas.end;
    },
  };
}

function looksLikeJson(text: string): boolean {
  const first = text.trimStart()[0];
  return first === "{" || first === "[";
}

/**
 * A nesting state as one number: the depth times 4, plus 2 inside a string, plus 1 when the character
 * at the position is escaped (the `\` before it was the last character read).
 */
function encode(depth: number, inString: boolean, escaped: boolean): number {
  return depth * 4 + (inString ? 2 : 0) + (escaped ? 1 : 0);
}

/**
 * The nesting state before `to`, reading `text` from `from` in state `state`; `commas`, when given,
 * learns the shallowest depth of a separating comma read and where its last one ends.
 */
function scan(
  text: string,
  state: number,
  from: number,
  to: number,
  commas?: { depth: number; end: number },
): number {
  if (to <= from) return state;
  scannedCharacters.count += to - from;
  const flags = state % 4;
  let depth = (state - flags) / 4;
  let inString = flags >= 2;
  let index = flags % 2 === 1 ? from + 1 : from;
  for (; index < to; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 92 /* \ */) index++;
      else if (code === 34 /* " */) inString = false;
      continue;
    }
    if (code === 34) inString = true;
    else if (code === 123 /* { */ || code === 91 /* [ */) depth++;
    else if (code === 125 /* } */ || code === 93 /* ] */) depth = depth > 0 ? depth - 1 : 0;
    else if (code === 44 /* , */ && commas !== undefined && depth <= commas.depth) {
      commas.depth = depth;
      commas.end = index + 1;
    }
  }
  return encode(depth, inString, index > to);
}
