/** A store location fit for a log line: a PostgreSQL URL keeps its user and host, never its password. */
export function withoutPassword(store: string): string {
  if (!/^postgres(ql)?:\/\//.test(store)) return store;
  try {
    const url = new URL(store);
    if (url.password !== "") url.password = "***";
    return url.toString();
  } catch {
    return "postgres://(unparsable URL)";
  }
}
