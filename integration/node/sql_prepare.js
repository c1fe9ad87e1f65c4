// node-postgres through pgsluice at its defaults (transaction mode, SQL PREPARE kept): every
// client PREPAREs a statement of the same name with its own text (query() without values is a
// simple-protocol Query) and EXECUTEs it until its transactions have run on two different servers
// (other clients keep the pool busy, so they move), checking every time that it gets its own
// statement's result; then PostgreSQL's errors for a name never prepared (26000) and a name in
// use (42P05), and DEALLOCATE. Prints "ok <clients> <servers seen>" or exits non-zero.
'use strict';
const { Client } = require('pg');

const port = Number(process.argv[2]);
const clients = Number(process.argv[3] || 3);
const maxRounds = Number(process.argv[4] || 400);

async function expectError(c, sql, code) {
  try {
    await c.query(sql);
  } catch (e) {
    if (e.code === code) return;
    throw new Error(`${sql}: ${e.code} ${e.message}, wanted ${code}`);
  }
  throw new Error(`${sql}: no error, wanted ${code}`);
}

async function one(n) {
  const c = new Client({ host: '127.0.0.1', port, user: 'app', password: 'app', database: 'app' });
  await c.connect();
  const pids = new Set();
  try {
    await c.query(`PREPARE p (int) AS SELECT 'client${n}:' || $1 AS v, pg_backend_pid() AS pid, ` +
                  'pg_sleep(0.002)');
    for (let i = 0; i < maxRounds && (pids.size < 2 || i < 10); i++) {
      const r = await c.query(`EXECUTE p(${i})`);
      const row = r.rows[0];
      if (row.v !== `client${n}:${i}`) {
        throw new Error(`client ${n} round ${i} on ${row.pid}: ${row.v}`);
      }
      pids.add(row.pid);
    }
    await expectError(c, 'EXECUTE never_prepared', '26000');
    await expectError(c, 'PREPARE p AS SELECT 1', '42P05');
    await c.query('DEALLOCATE p');
    await expectError(c, 'EXECUTE p(1)', '26000');
  } finally {
    await c.end();
  }
  return pids.size;
}

(async () => {
  const seen = await Promise.all([...Array(clients).keys()].map(one));
  console.log(`ok ${seen.length} ${Math.min(...seen)}`);
})().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
