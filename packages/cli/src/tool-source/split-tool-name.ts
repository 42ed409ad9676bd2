/** Splits `module.tool` at its first dot: module names have no dots, tool names may. */
export function splitToolName(qualifiedName: string): { module: string; tool: string } | undefined {
  const dot = qualifiedName.indexOf(".");
  if (dot <= 0 || dot === qualifiedName.length - 1) return undefined;
  return { module: qualifiedName.slice(0, dot), tool: qualifiedName.slice(dot + 1) };
}
