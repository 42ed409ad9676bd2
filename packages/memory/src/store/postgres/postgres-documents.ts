/** Knowledge-base documents and their chunks. */
import { scopeKey } from "../../scope/memory-scope.ts";
import type { MemoryStore } from "../memory-store.ts";
import { documentFromRow, scopeCondition, scopeParameters } from "../row-codec.ts";
import { metadataBytes, utf8Bytes } from "../tenant-usage.ts";
import { chargeUsage, lockUsage, mark, type PostgresContext, tsQuery } from "./postgres-sql.ts";

export function postgresDocuments(
  context: PostgresContext,
): Pick<MemoryStore, "insertDocument" | "getDocument" | "searchChunks" | "countDocuments"> {
  const { all, one, transaction } = context;
  return {
    async insertDocument(document, chunks, limits) {
      return transaction(async (client) => {
        await lockUsage(client, document.tenantId);
        const result = await client.query(
          `INSERT INTO memory_documents (id, tenant_id, user_id, agent_id, session_id, scope_key, title, source, metadata, content_hash, chunk_count, created_at, metadata_bytes)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING`,
          [
            document.id,
            document.tenantId,
            ...scopeParameters(document),
            scopeKey(document),
            document.title,
            document.source ?? null,
            JSON.stringify(document.metadata),
            document.contentHash,
            document.chunkCount,
            document.createdAt,
            metadataBytes(document.metadata),
          ],
        );
        if (result.rowCount !== 1) {
          const existing = (
            await client.query(
              "SELECT * FROM memory_documents WHERE tenant_id = $1 AND scope_key = $2 AND content_hash = $3",
              [document.tenantId, scopeKey(document), document.contentHash],
            )
          ).rows[0];
          if (!existing) throw new Error(`document ${document.id} was neither inserted nor found`);
          return { document: documentFromRow(existing), created: false };
        }
        if (chunks.length > 0) {
          await client.query(
            `INSERT INTO memory_chunks (id, tenant_id, document_id, ordinal, content)
             SELECT id, $1, $2, ordinal, content FROM unnest($3::text[], $4::int[], $5::text[]) AS c(id, ordinal, content)`,
            [
              document.tenantId,
              document.id,
              chunks.map((chunk) => chunk.id),
              chunks.map((chunk) => chunk.ordinal),
              chunks.map((chunk) => chunk.content),
            ],
          );
        }
        const documentBytes = chunks.reduce((sum, chunk) => sum + utf8Bytes(chunk.content), 0);
        const charged = { documentBytes, metadataBytes: metadataBytes(document.metadata) };
        await chargeUsage(client, document.tenantId, charged, limits);
        return { document, created: true };
      });
    },

    async getDocument(tenantId, id) {
      const row = await one("SELECT * FROM memory_documents WHERE tenant_id = $1 AND id = $2", [
        tenantId,
        id,
      ]);
      return row ? documentFromRow(row) : undefined;
    },

    async searchChunks(tenantId, scope, terms, limit) {
      const query = tsQuery(terms);
      if (query.length === 0) return [];
      const parameters: unknown[] = [query, tenantId];
      const sql = `SELECT d.*, c.id AS chunk_id, c.ordinal AS chunk_ordinal, c.content AS chunk_content, ts_rank(c.tsv, q, 1) AS score
        FROM memory_chunks c JOIN memory_documents d ON d.id = c.document_id AND d.tenant_id = c.tenant_id, to_tsquery('english', $1) q
        WHERE c.tenant_id = $2 AND c.tsv @@ q${scopeCondition(scope, parameters, mark, "d.")}
        ORDER BY score DESC, c.seq LIMIT $${parameters.length + 1}`;
      parameters.push(limit);
      return (await all(sql, parameters)).map((row) => ({
        chunk: {
          id: String(row.chunk_id),
          ordinal: Number(row.chunk_ordinal),
          content: String(row.chunk_content),
        },
        document: documentFromRow(row),
        score: Number(row.score),
      }));
    },

    async countDocuments(tenantId, scope) {
      const parameters: unknown[] = [tenantId];
      const row = await one(
        `SELECT COUNT(*) AS n FROM memory_documents WHERE tenant_id = $1${scopeCondition(scope, parameters, mark)}`,
        parameters,
      );
      return Number(row?.n ?? 0);
    },
  };
}
