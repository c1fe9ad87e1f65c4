#!/bin/sh
# /docker-entrypoint-initdb.d/ script of the stand's postgres container (the official image runs
# it once, after initdb): the stand's settings (the same file the local stand includes) and the
# app role and database the experiments use (the local stand gets them from harness.py).
set -eu
cp /workshop/stand/postgresql.conf "$PGDATA/workshop.conf"
echo "include 'workshop.conf'" >> "$PGDATA/postgresql.conf"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<SQL
CREATE ROLE app LOGIN PASSWORD 'app';
CREATE DATABASE app OWNER app;
SQL
