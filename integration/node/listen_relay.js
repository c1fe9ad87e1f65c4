// node-postgres LISTEN through pgsluice's relay: one client listens and sits idle while another
// sends `count` NOTIFYs (each in a transaction of its own, on whichever pooled server is free).
// Prints "ok <payloads in order>", or exits non-zero (also when a notification does not carry
// the pid of the backend that sent it).
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
  const pids = [];
  listener.on('notification', (n) => {
    got.push(n.payload);
    pids.push(n.processId);
  });
  await listener.query('LISTEN node_jobs');
  // Each NOTIFY in a transaction that reads the sending backend's pid: the pid its
  // notification must carry.
  const senderPids = [];
  for (let i = 0; i < count; i++) {
    await sender.query('BEGIN');
    await sender.query(`NOTIFY node_jobs, '${i}'`);
    senderPids.push((await sender.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    await sender.query('COMMIT');
  }
  const deadline = Date.now() + 5000;
  while (got.length < count && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));  // idle: no query of its own
  }
  await listener.end();
  await sender.end();
  if (pids.join(',') !== senderPids.slice(0, pids.length).join(',')) {
    throw new Error(`sender pids ${pids} where the senders were ${senderPids}`);
  }
  console.log(`ok ${got.join(',')}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
