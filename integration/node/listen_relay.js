// node-postgres LISTEN through pgsluice's relay: one client listens and sits idle while another
// sends `count` NOTIFYs (each in a transaction of its own, on whichever pooled server is free).
// Prints "ok <payloads in order>" or exits non-zero.
'use strict';
const { Client } = require('pg');

const port = Number(process.argv[2]);
const count = Number(process.argv[3] || 10);
const opts = { host: '127.0.0.1', port, user: 'app', password: 'app', database: 'app' };

async function main() {
  const listener = new Client(opts);
  const sender = new Client(opts);
  await listener.connect();
  await sender.connect();
  const got = [];
  listener.on('notification', (n) => got.push(n.payload));
  await listener.query('LISTEN node_jobs');
  for (let i = 0; i < count; i++) await sender.query(`NOTIFY node_jobs, '${i}'`);
  const deadline = Date.now() + 5000;
  while (got.length < count && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));  // idle: no query of its own
  }
  await listener.end();
  await sender.end();
  console.log(`ok ${got.join(',')}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
