"""Flow arrows: each launching API call -> the GPU work it launched (see the package docstring)."""

from __future__ import annotations


class Flows:
    def setup_links(self):
        con = self.con
        W = self._win
        # launch links
        self.execute(f"""
            CREATE OR REPLACE TEMP TABLE tk_pairs AS
            WITH api AS (
              SELECT a.rowid AS api_rowid, a.source_id, a.pid, a.correlation_id, a.start_ns + s.off AS api_s,
                     a.dur_ns AS api_dur, row_number() OVER (PARTITION BY a.source_id, a.pid, a.correlation_id
                                        ORDER BY a.start_ns, a.end_ns DESC, a.tid, a.rowid) AS rn
              FROM api_calls a JOIN tk_src s USING (source_id)
              WHERE a.correlation_id IS NOT NULL AND {W('a')}
            ), chosen AS (
              SELECT *, count(*) OVER (PARTITION BY source_id, correlation_id) AS n_pids FROM api WHERE rn = 1
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
