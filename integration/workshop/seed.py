"""The article's numbers (PostgreSQL 18.6 and PgBouncer 1.26.1 in containers, 4 CPUs, --memory 2g
then 4g, pgbench -s 10, 20 s runs, one series on a shared machine), to print next to this
machine's. MB are MiB, as in the article. (In the project's notes it is "seed 002"; an audience
knows it by its title, so the reports name it that way.)"""

# How the reports name the source of the comparison columns: "article" in a header, this line
# once under each report's title.
ARTICLE_TITLE = ("«Соединения PostgreSQL и PgBouncer: цена backend и что ломает режим "
                 "transaction» (Справочник DBA, статья 10.6)")
ARTICLE_SETUP = ("PostgreSQL 18.6 and PgBouncer 1.26.1 in containers on 4 CPUs (--memory 2g, "
                 "then 4g), max_connections 1100, shared_buffers 256MB, pgbench -s 10, 20 s runs")
ARTICLE_PGBOUNCER = "PgBouncer 1.26.1"


def article_note() -> str:
    return (f"Columns marked *article* are the published numbers of {ARTICLE_TITLE}: "
            f"{ARTICLE_SETUP}. Everything else was measured here.")

# Experiment 1: mem.sh over N idle client backends (pgbench -f idle.sql).
COST = {
    500: {"rss_mb": 9855, "pss_mb": 758, "pss_anon_mb": 714, "pss_shmem_mb": 36, "avg_pss_mb": 1.52,
          "note": "memory.current of the container 226 → 1,101 MB: 1.75 MB per connection"},
    1000: {"rss_mb": 20158, "pss_mb": 1491, "pss_anon_mb": 1427, "pss_shmem_mb": 56,
           "avg_pss_mb": 1.49, "pagetables_mb": 218,
           "note": "memory.stat: anon 1,436 MB, pagetables 218 MB; OOM-killed under --memory 2g"},
}

# Experiment 2: (TPS, mean latency ms) by mode, clients and target; None = not measured.
THROUGHPUT = {
    "select-only": {
        200: {"direct": (101901, 1.963), "pgbouncer": (105437, 1.897)},
        500: {"direct": (67344, 7.425), "pgbouncer": (101092, 4.946)},
        1000: {"direct": (57957, 17.254), "pgbouncer": (89321, 11.196)},
    },
    "tpcb-like": {
        200: {"direct": (3793, 52.7), "pgbouncer": (2960, 67.6)},
        500: {"direct": (3060, 163.4), "pgbouncer": None},
        1000: {"direct": (2841, 351.9), "pgbouncer": (3031, 330.0)},
    },
}
THROUGHPUT_NOTES = ("direct at 1,000 clients ran with --memory 4g (OOM-killed at 2g); "
                    "PgBouncer's SHOW POOLS at 1,000 clients: cl_active 53, cl_waiting 947, "
                    "sv_active 20, maxwait_us 10780")

# Experiment 3: what the article's transcripts showed through PgBouncer 1.26.1 (transaction mode).
BREAKAGE = {
    "set": "B sees A's value; A then sees B's",
    "advisory_lock": "B's pg_try_advisory_lock(42) = true while A holds it; after A's unlock "
                     "1 lock stays in pg_locks, after both left too",
    "listen": "another client sees A's channel in pg_listening_channels(); so does a new "
              "client after A left",
    "prepare": "(not in the article)",
    "temp_table": "(not in the article)",
    "protocol_prepared": "pgbench -M prepared -c 50 with max_prepared_statements = 0: "
                         "47 × \"P_0\" already exists, 50 × does not exist, run aborted; "
                         "with 200: no errors",
}

# The snapshot check: mean latency (ms) of pgbench -S -c 1, four 8 s runs.
SNAPSHOT = {
    "0 idle": [0.024, 0.024, 0.024, 0.024],
    "10 idle": [0.023, 0.023, 0.023, 0.023],
    "1000 idle": [0.023, 0.024, 0.022, 0.023],
    "1000 open xids": [0.026, 0.026, 0.024, 0.025],
}
