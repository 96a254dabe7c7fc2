package store

// migrations are applied in order, once each; append, never edit.
var migrations = []string{
	// 1: ARM resources (workspaces, computes), operations, tokens, secrets.
	`CREATE TABLE resources (
		kind     TEXT NOT NULL,
		parent   TEXT NOT NULL,
		name     TEXT NOT NULL,
		version  INTEGER NOT NULL,
		body     TEXT NOT NULL,
		created  INTEGER NOT NULL,
		PRIMARY KEY (kind, parent, name)
	);
	CREATE TABLE operations (
		id       TEXT PRIMARY KEY,
		kind     TEXT NOT NULL,
		target   TEXT NOT NULL,
		status   TEXT NOT NULL,
		error    TEXT NOT NULL DEFAULT '',
		started  INTEGER NOT NULL,
		ended    INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX operations_status ON operations (status, started);
	CREATE TABLE tokens (
		id       TEXT PRIMARY KEY,
		name     TEXT NOT NULL,
		hash     TEXT NOT NULL UNIQUE,
		role     TEXT NOT NULL,
		created  INTEGER NOT NULL,
		expires  INTEGER NOT NULL DEFAULT 0,
		revoked  INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE secrets (
		id       TEXT PRIMARY KEY,
		sealed   BLOB NOT NULL
	);
	CREATE TABLE nodes (
		id          TEXT PRIMARY KEY,
		compute     TEXT NOT NULL,
		state       TEXT NOT NULL,
		job         TEXT NOT NULL DEFAULT '',
		body        TEXT NOT NULL,
		created     INTEGER NOT NULL
	);
	CREATE INDEX nodes_compute ON nodes (compute, state)`,
	// 2: jobs, queued per compute in submission order.
	`CREATE TABLE jobs (
		uid      TEXT PRIMARY KEY,
		parent   TEXT NOT NULL,
		name     TEXT NOT NULL,
		compute  TEXT NOT NULL,
		status   TEXT NOT NULL,
		seq      INTEGER NOT NULL,
		version  INTEGER NOT NULL,
		body     TEXT NOT NULL,
		created  INTEGER NOT NULL,
		UNIQUE (parent, name)
	);
	CREATE INDEX jobs_compute_status ON jobs (compute, status, seq);
	CREATE INDEX jobs_parent_status ON jobs (parent, status, name)`,
}
