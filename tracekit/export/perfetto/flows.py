"""Flow arrows: each launching API call -> the GPU work it launched (see the package docstring)."""

from __future__ import annotations


class Flows:
    def setup_links(self):
        con = self.con
        # launch links (the statements of sql/queries/perfetto.sql: tk_pairs, tk_links, tk_launch)
        self.execute(self.sql("create_pairs"))
        late = con.execute(self.sql("late_links")).fetchall()[0][0]
        if late:
            self.r.skipped["flow arrows whose GPU work starts before its launch call"] += late
        con.execute(self.sql("create_links"))
        con.execute(self.sql("create_launch"))
