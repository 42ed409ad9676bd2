/** The example's tools, defined once: everything below hands these same definitions to each SDK. */
import { createToolSet, defineTool, ToolError } from "@tackle/core";
import { z } from "zod";

const temperatures: Record<string, number> = { Izmir: 24, Oslo: 3, Lima: 18 };

export const weather = defineTool({
  name: "weather.current",
  description: "Current temperature of a city, in °C.",
  input: z.object({ city: z.string().describe("City name, e.g. Izmir") }),
  output: z.object({ city: z.string(), celsius: z.number() }),
  annotations: { title: "Current weather", readOnlyHint: true },
  execute: ({ city }) => {
    const celsius = temperatures[city];
    if (celsius === undefined) {
      throw new ToolError("unknown_city", `No station in ${city}`, {
        data: { known: Object.keys(temperatures) },
      });
    }
    return { city, celsius };
  },
});

export const convert = defineTool({
  name: "units.celsius_to_fahrenheit",
  description: "Converts °C to °F.",
  input: z.object({ celsius: z.number() }),
  output: z.object({ fahrenheit: z.number() }),
  annotations: { readOnlyHint: true, idempotentHint: true },
  execute: ({ celsius }) => ({ fahrenheit: Math.round((celsius * 9) / 5 + 32) }),
});

export const toolset = createToolSet([weather, convert]);
