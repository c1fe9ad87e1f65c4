// node-postgres through pgsluice at its defaults (transaction mode, settings kept): each client
// SETs its own work_mem and time zone, then runs transactions until they have run on two different
// servers (other clients keep the pool busy, so they move), checking every time that it still
// sees its own values, that a SET rolled back did not stick and that SET LOCAL ended with its
// transaction. Prints "ok <clients> <servers seen>" or exits non-zero.
'use strict';
const { Client } = require('pg');

const port = Number(process.argv[2]);
const clients = Number(process.argv[3] || 3);
const maxRounds = Number(process.argv[4] || 400);

async function one(n) {
  const c = new Client({ host: '127.0.0.1', port, user: 'app', password: 'app', database: 'app' });
  await c.connect();
  const want = { work_mem: `${64 + n}MB`, TimeZone: n % 2 ? 'Asia/Tokyo' : 'America/Lima' };
  const pids = new Set();
  try {
    await c.query(`SET work_mem = '${want.work_mem}'`);
    await c.query(`SET TIME ZONE '${want.TimeZone}'`);
    for (let i = 0; i < maxRounds && pids.size < 2; i++) {
      if (i % 5 === 1) {
        await c.query('BEGIN');
        await c.query("SET work_mem = '1MB'");
        await c.query('ROLLBACK');
      } else if (i % 5 === 3) {
        await c.query('BEGIN');
        await c.query("SET LOCAL work_mem = '2MB'");
        await c.query('COMMIT');
      }
      const r = await c.query("SELECT current_setting('work_mem') AS work_mem, " +
                              "current_setting('TimeZone') AS tz, pg_backend_pid() AS pid, " +
                              'pg_sleep(0.002)');
      const row = r.rows[0];
      if (row.work_mem !== want.work_mem || row.tz !== want.TimeZone) {
        throw new Error(`client ${n} round ${i} on ${row.pid}: ` +
                        `${row.work_mem}/${row.tz}, wanted ${want.work_mem}/${want.TimeZone}`);
      }
      pids.add(row.pid);
    }
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
