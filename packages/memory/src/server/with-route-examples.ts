/** `withRouteExamples`: the generated OpenAPI document with each route's example request filled in. */

import { routeExamples } from "./route-examples.ts";
import { memoryRoutes } from "./routes.ts";

interface Operation {
  operationId?: string;
  parameters?: { in: string; name: string; example?: unknown }[];
  requestBody?: { content?: Record<string, { example?: unknown }> };
}

type Document = { paths?: Record<string, Record<string, Operation>> };

export function withRouteExamples<T extends object>(document: T): T {
  const paths = (document as Document).paths ?? {};
  for (const route of memoryRoutes) {
    const operation = paths[route.path]?.[route.method];
    const example = routeExamples[route.operationId];
    if (operation === undefined || example === undefined) continue;
    for (const parameter of operation.parameters ?? []) {
      const value = parameter.in === "path" ? example.id : example.query?.[parameter.name];
      if (value !== undefined) parameter.example = value;
    }
    const media = operation.requestBody?.content?.["application/json"];
    if (media !== undefined && example.body !== undefined) media.example = example.body;
  }
  return document;
}
