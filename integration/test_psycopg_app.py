"""An application-style scenario with psycopg 3: 20 worker threads, each with its own
connection, share 4 server connections through pgsluice in transaction mode."""

from __future__ import annotations

import random
import threading

import psycopg
import psycopg.errors

THREADS = 20
ORDERS_PER_THREAD = 25


class ServerCounter(threading.Thread):
    """Largest number of app@app server connections seen directly, every 0.2 s."""

    def __init__(self, pg):
        super().__init__(daemon=True)
        self.pg, self.max_seen, self.stop_event = pg, 0, threading.Event()

    def run(self):
        with self.pg.connect() as conn:
            while not self.stop_event.is_set():
                n = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = 'app' "
                                 "AND usename = 'app' AND backend_type = 'client backend'"
                                 ).fetchone()[0]
                self.max_seen = max(self.max_seen, n)
                self.stop_event.wait(0.2)


def test_order_processing(pg, make_pooler):
    pooler = make_pooler(pool_mode="transaction", default_pool_size=4)

    with pooler.connect(autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS orders, accounts")
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)")
        conn.execute("CREATE TABLE orders (id bigserial PRIMARY KEY, worker int NOT NULL, "
                     "account int NOT NULL REFERENCES accounts, amount int NOT NULL, "
                     "note text)")
        conn.execute("INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 10) g")

    expected = {"amount": 0, "orders": 0}
    lock = threading.Lock()
    errors: list[str] = []
    counter = ServerCounter(pg)
    counter.start()

    def worker(n: int) -> None:
        rng = random.Random(n)
        my_amount = my_orders = 0
        try:
            with pooler.connect() as conn:  # explicit transactions
                for i in range(ORDERS_PER_THREAD):
                    amount = rng.randint(1, 1000)
                    account = rng.randint(1, 10)
                    with conn.transaction():
                        conn.execute("INSERT INTO orders (worker, account, amount, note) "
                                     "VALUES (%s, %s, %s, %s)",
                                     (n, account, amount, f"order {n}/{i}"))
                        conn.execute("UPDATE accounts SET balance = balance + %s "
                                     "WHERE id = %s", (amount, account))
                    my_amount += amount
                    my_orders += 1
                    if i % 5 == 0:
                        # A transaction the application gives up on: nothing of it stays.
                        try:
                            with conn.transaction():
                                conn.execute("INSERT INTO orders (worker, account, amount) "
                                             "VALUES (%s, 1, 1)", (n,))
                                conn.execute("INSERT INTO orders (worker, account, amount) "
                                             "VALUES (%s, 999, 1)", (n,))  # FK violation
                        except psycopg.errors.ForeignKeyViolation:
                            pass
                        else:
                            errors.append(f"worker {n}: no foreign key violation")
                conn.commit()
            with pooler.connect(autocommit=True) as conn:  # autocommit reads
                total = conn.execute("SELECT count(*), coalesce(sum(amount), 0) FROM orders "
                                     "WHERE worker = %s", (n,)).fetchone()
                if total != (my_orders, my_amount):
                    errors.append(f"worker {n}: read back {total}, "
                                  f"expected {(my_orders, my_amount)}")
            with lock:
                expected["amount"] += my_amount
                expected["orders"] += my_orders
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"worker {n}: {e!r}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    counter.stop_event.set()
    counter.join(10)
    assert not any(th.is_alive() for th in threads), "a worker hangs"
    assert not errors, errors
    assert expected["orders"] == THREADS * ORDERS_PER_THREAD

    with pooler.connect() as conn:
        orders, amount = conn.execute("SELECT count(*), sum(amount) FROM orders").fetchone()
        balances = conn.execute("SELECT sum(balance) FROM accounts").fetchone()[0]
        per_account = conn.execute(
            "SELECT count(*) FROM accounts a WHERE balance <> "
            "(SELECT coalesce(sum(amount), 0) FROM orders o WHERE o.account = a.id)"
        ).fetchone()[0]
        conn.rollback()
    assert (orders, amount) == (expected["orders"], expected["amount"])
    assert balances == expected["amount"]
    assert per_account == 0
    assert 0 < counter.max_seen <= 4, counter.max_seen
    # Directly on the server, the same totals.
    assert pg.psql("SELECT count(*), sum(amount) FROM orders", db="app") == (
        f"{expected['orders']}|{expected['amount']}")
