/** The document client's reads of stored rows and state: pages, row lookups, a plan's state, the change log. */
import type { ChangePage } from "../server/change-log.ts";
import type { EntityPage, PlanState, RelationPage, RowLookupAnswer } from "../server/document-host.ts";
import { jsonOf, type Transport } from "./client-transport.ts";
import type { DocumentClient, PageQuery } from "./create-document-client.ts";
import { DocumentClientError } from "./document-client-error.ts";

export function clientReads({
  request,
  failure,
  documentUrl,
}: Transport): Pick<DocumentClient, "entities" | "relations" | "rows" | "planState" | "changes"> {
  const page = async <Page>(
    documentId: string,
    route: "entities" | "relations",
    query: PageQuery & { endpoint?: string | undefined },
    signal: AbortSignal | undefined,
  ): Promise<Page> => {
    const params = new URLSearchParams();
    for (const kind of query.kinds ?? []) params.append("kind", kind);
    for (const id of query.ids ?? []) params.append("id", id);
    if (query.ids !== undefined && query.ids.length === 0) params.append("id", "");
    if (query.after !== undefined) params.set("after", query.after);
    if (query.limit !== undefined) params.set("limit", String(query.limit));
    if (query.endpoint !== undefined) params.set("endpoint", query.endpoint);
    const response = await request(
      route,
      documentId,
      `${documentUrl(documentId, route)}?${params}`,
      { method: "GET" },
      signal,
    );
    if (response.status !== 200) throw failure(response, documentId);
    const body = jsonOf(response) as Record<string, unknown> | undefined;
    if (body === undefined || typeof body.version !== "string" || !Array.isArray(body[route]))
      throw new DocumentClientError("invalid_response", `the ${route} answer is not a page`, {
        status: response.status,
      });
    return body as Page;
  };

  return {
    entities: (documentId, query = {}, requestOptions = {}) =>
      page<EntityPage>(documentId, "entities", query, requestOptions.signal),
    relations: (documentId, query = {}, requestOptions = {}) =>
      page<RelationPage>(documentId, "relations", query, requestOptions.signal),
    async rows(documentId, lookups, requestOptions = {}) {
      const response = await request(
        "rows",
        documentId,
        documentUrl(documentId, "rows"),
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ lookups, ...(requestOptions.issues === true ? { issues: true } : {}) }),
        },
        requestOptions.signal,
      );
      if (response.status !== 200) throw failure(response, documentId);
      const answer = jsonOf(response) as RowLookupAnswer | undefined;
      if (
        typeof answer?.version !== "string" ||
        !Array.isArray(answer.results) ||
        answer.results.length !== lookups.length ||
        (requestOptions.issues === true && !Array.isArray(answer.issues))
      )
        throw new DocumentClientError("invalid_response", "the rows answer is not a lookup answer", {
          status: response.status,
        });
      return answer;
    },
    async planState(documentId, planId, requestOptions = {}) {
      // A URL resolves these segments away: the request would reach another route and answer 404, as
      // if the document did not exist.
      if (planId === "." || planId === "..")
        throw new DocumentClientError("invalid_request", `plan id "${planId}" cannot be asked for over HTTP`);
      const response = await request(
        "planState",
        documentId,
        documentUrl(documentId, `plans/${encodeURIComponent(planId)}`),
        { method: "GET" },
        requestOptions.signal,
      );
      if (response.status !== 200) throw failure(response, documentId);
      const state = jsonOf(response) as PlanState | undefined;
      if (state === undefined || (state.state !== "applied" && state.state !== "unknown"))
        throw new DocumentClientError("invalid_response", "the plan answer is not a plan state", {
          status: response.status,
        });
      return state;
    },
    async changes(documentId, changesOptions = {}) {
      const query = new URLSearchParams();
      if (changesOptions.cursor !== undefined) query.set("cursor", changesOptions.cursor);
      if (changesOptions.limit !== undefined) query.set("limit", String(changesOptions.limit));
      const suffix = query.size === 0 ? "changes" : `changes?${query}`;
      const response = await request(
        "changes",
        documentId,
        documentUrl(documentId, suffix),
        { method: "GET" },
        changesOptions.signal,
      );
      if (response.status !== 200) throw failure(response, documentId);
      const page = jsonOf(response) as ChangePage | undefined;
      if (!Array.isArray(page?.changes))
        throw new DocumentClientError("invalid_response", "the changes answer is not a change log page", {
          status: response.status,
        });
      return page;
    },
  };
}
