"""Flow arrows: each launching API call -> the GPU work it launched (see the package docstring)."""

from __future__ import annotations


class Flows:
    def setup_links(self):
        con = self.con
        W = self._win
        ids = ", ".join(str(int(sid)) for sid in self.sources)
        # launch links
        self.execute(f"""
            CREATE OR REPLACE TEMP TABLE tk_pairs AS
            WITH chosen AS (  -- the launch call of each (source, pid, correlation id): tk_launch_calls()
                              -- of sql/lib/host_calls.sql, as its api_calls row (calls with the same
                              -- start and end are one call twice: the first row), when exported
              SELECT c.source_id, c.pid, c.correlation_id, c.n_pids, min(a.rowid) AS api_rowid,
                     c.start_ns + s.off AS api_s, c.dur_ns AS api_dur
              FROM tk_launch_calls() c JOIN tk_src s USING (source_id)
                   JOIN api_calls a ON a.source_id = c.source_id AND a.pid IS NOT DISTINCT FROM c.pid
                    AND a.correlation_id = c.correlation_id AND a.start_ns = c.start_ns
                    AND a.end_ns IS NOT DISTINCT FROM c.end_ns
              WHERE c.source_id IN ({ids}) AND {W('a')}
              GROUP BY ALL
            ), gpu AS (
              SELECT 'k' AS tbl, k.rowid AS g_rowid, k.source_id, k.pid, k.correlation_id,
                     k.start_ns + s.off AS g_s, k.dur_ns AS g_dur
              FROM kernels k JOIN tk_src s USING (source_id)
              WHERE k.correlation_id IS NOT NULL AND {W('k')} AND {self._dev('k')}
              UNION ALL
              SELECT 'm', m.rowid, m.source_id, m.pid, m.correlation_id, m.start_ns + s.off, m.dur_ns
              FROM memops m JOIN tk_src s USING (source_id)
              WHERE m.correlation_id IS NOT NULL AND {W('m')} AND {self._dev('m')}
            )
            SELECT g.tbl, g.g_rowid, c.api_rowid, g.g_s, c.api_s,
                   -- Perfetto orders events by ts, then longer first, then file order (host first)
                   g.g_s > c.api_s OR (g.g_s = c.api_s AND g.g_dur <= c.api_dur) AS ok
            FROM gpu g JOIN chosen c ON g.source_id = c.source_id AND g.correlation_id = c.correlation_id
            WHERE tk_launch_link(g.pid, c.pid, c.n_pids)  -- the one launch rule (sql/lib/host_calls.sql)""")
        late = con.execute("SELECT count(*) FROM tk_pairs WHERE NOT ok").fetchall()[0][0]
        if late:
            self.r.skipped["flow arrows whose GPU work starts before its launch call"] += late
        con.execute("""
            CREATE OR REPLACE TEMP TABLE tk_links AS
            SELECT tbl, g_rowid, api_rowid,
                   row_number() OVER (ORDER BY api_rowid, g_s, tbl, g_rowid) AS link_id,
                   row_number() OVER (PARTITION BY api_rowid ORDER BY g_s, tbl, g_rowid) - 1 AS link_rank
            FROM tk_pairs WHERE ok""")
        con.execute("""
            CREATE OR REPLACE TEMP TABLE tk_launch AS
            SELECT api_rowid, min(link_id) AS first_link, count(*) AS n_links FROM tk_links GROUP BY api_rowid""")
