/** The provider-neutral view of a prompt the core works on: a role and the message's text. */
export interface TurnMessage {
  readonly role: "system" | "user" | "assistant" | "tool";
  readonly text: string;
}

/** The text of the last user message, if any. */
export function lastUserText(messages: readonly TurnMessage[]): string | undefined {
  for (let index = messages.length - 1; index >= 0; index--) {
    const message = messages[index]!;
    if (message.role === "user") return message.text.trim() === "" ? undefined : message.text;
  }
  return undefined;
}
