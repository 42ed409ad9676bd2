/** `toTurnMessages`: an AI SDK prompt as role-and-text messages for the middleware core. */
import type { LanguageModelV4Prompt } from "@ai-sdk/provider";
import type { TurnMessage } from "../middleware/turn-message.ts";

export function toTurnMessages(prompt: LanguageModelV4Prompt): TurnMessage[] {
  return prompt.map((message): TurnMessage => {
    if (message.role === "system") return { role: "system", text: message.content };
    const parts: string[] = [];
    for (const part of message.content) {
      if (part.type === "text") parts.push(part.text);
      else if (part.type === "tool-call") parts.push(`[tool call ${part.toolName}]`);
      else if (part.type === "tool-result")
        parts.push(`[tool result ${part.toolName}] ${JSON.stringify(part.output)}`);
    }
    return { role: message.role, text: parts.join("\n") };
  });
}
