// node-postgres named queries (protocol-level prepared statements) through pgsluice: many
// clients, each preparing the same names once and reusing them in later transactions, which
// run on whichever pooled server is free. Prints "ok <count>" or exits non-zero.
'use strict';
const { Client } = require('pg');

const port = Number(process.argv[2]);
const clients = Number(process.argv[3] || 10);
const rounds = Number(process.argv[4] || 20);

async function one(n) {
  const c = new Client({ host: '127.0.0.1', port, user: 'app', password: 'app', database: 'app' });
  await c.connect();
  let total = 0;
  try {
    for (let i = 0; i < rounds; i++) {
      const r = await c.query({ name: 'double', text: 'SELECT $1::int * 2 AS v', values: [i] });
      total += r.rows[0].v;
      const s = await c.query({ name: 'concat', text: 'SELECT $1::text || $2::text AS s',
                                values: ['c', String(n)] });
      if (s.rows[0].s !== 'c' + n) throw new Error('wrong row ' + JSON.stringify(s.rows));
      await c.query('BEGIN');
      await c.query({ name: 'double', text: 'SELECT $1::int * 2 AS v', values: [1] });
      await c.query('COMMIT');
    }
  } finally {
    await c.end();
  }
  return total;
}

(async () => {
  const results = await Promise.all([...Array(clients).keys()].map(one));
  const expected = rounds * (rounds - 1);
  for (const r of results) {
    if (r !== expected) throw new Error(`total ${r}, expected ${expected}`);
  }
  console.log('ok ' + results.length);
})().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
