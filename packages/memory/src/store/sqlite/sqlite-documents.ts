/** Knowledge-base documents and their chunks. */
import { scopeKey } from "../../scope/memory-scope.ts";
import type { MemoryStore } from "../memory-store.ts";
import { documentFromRow, scopeCondition, scopeParameters } from "../row-codec.ts";
import { metadataBytes, utf8Bytes } from "../tenant-usage.ts";
import { anyWord } from "./scope-tokens.ts";
import { bind, chargeUsage, mark, type SqliteContext } from "./sqlite-sql.ts";

export function sqliteDocuments(
  context: SqliteContext,
): Pick<MemoryStore, "insertDocument" | "getDocument" | "searchChunks" | "countDocuments"> {
  const { all, get, run, transaction } = context;
  return {
    async insertDocument(document, chunks, limits) {
      return transaction(() => {
        const result = run(
          `INSERT INTO memory_documents (id, tenant_id, user_id, agent_id, session_id, scope_key, title, source, metadata, content_hash, chunk_count, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
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
          ],
        );
        if (result.changes !== 1) {
          const existing = get(
            "SELECT * FROM memory_documents WHERE tenant_id = ? AND scope_key = ? AND content_hash = ?",
            [document.tenantId, scopeKey(document), document.contentHash],
          );
          if (!existing) throw new Error(`document ${document.id} was neither inserted nor found`);
          return { document: documentFromRow(existing), created: false };
        }
        for (const chunk of chunks) {
          run(
            "INSERT INTO memory_chunks (id, tenant_id, document_id, ordinal, content) VALUES (?, ?, ?, ?, ?)",
            [chunk.id, document.tenantId, document.id, chunk.ordinal, chunk.content],
          );
        }
        const documentBytes = chunks.reduce((sum, chunk) => sum + utf8Bytes(chunk.content), 0);
        const charged = { documentBytes, metadataBytes: metadataBytes(document.metadata) };
        chargeUsage(context, document.tenantId, charged, limits);
        return { document, created: true };
      });
    },

    async getDocument(tenantId, id) {
      const row = get("SELECT * FROM memory_documents WHERE tenant_id = ? AND id = ?", [tenantId, id]);
      return row ? documentFromRow(row) : undefined;
    },

    async searchChunks(tenantId, scope, terms, limit) {
      const match = anyWord(terms);
      if (match.length === 0) return [];
      const parameters: unknown[] = [match, tenantId];
      const sql = `SELECT d.*, c.id AS chunk_id, c.ordinal AS chunk_ordinal, c.content AS chunk_content, -bm25(memory_chunks_fts) AS score
        FROM memory_chunks_fts JOIN memory_chunks c ON c.seq = memory_chunks_fts.rowid JOIN memory_documents d ON d.id = c.document_id AND d.tenant_id = c.tenant_id
        WHERE memory_chunks_fts MATCH ${mark(1)} AND c.tenant_id = ${mark(2)}${scopeCondition(scope, parameters, mark, "d.")}
        ORDER BY bm25(memory_chunks_fts) LIMIT ${bind(parameters, limit)}`;
      return all(sql, parameters).map((row) => ({
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
      return Number(
        get(
          `SELECT COUNT(*) AS n FROM memory_documents WHERE tenant_id = ${mark(1)}${scopeCondition(scope, parameters, mark)}`,
          parameters,
        )?.n ?? 0,
      );
    },
  };
}
