/** Splits a document into chunks near `size` characters, breaking at paragraphs, then sentences. */
export function chunkText(text: string, size: number): string[] {
  const pieces = text
    .split(/\n\s*\n/u)
    .flatMap((paragraph) => (paragraph.length <= size ? [paragraph] : paragraph.split(/(?<=[.!?])\s+/u)))
    .flatMap((piece) => {
      const parts: string[] = [];
      for (let start = 0; start < piece.length; start += size) parts.push(piece.slice(start, start + size));
      return parts;
    })
    .map((piece) => piece.trim())
    .filter((piece) => piece.length > 0);
  const chunks: string[] = [];
  let current = "";
  for (const piece of pieces) {
    if (current.length > 0 && current.length + piece.length + 2 > size) {
      chunks.push(current);
      current = "";
    }
    current = current.length > 0 ? `${current}\n\n${piece}` : piece;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
