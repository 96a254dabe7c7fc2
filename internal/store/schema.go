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
	// 3: principals, role assignments and the audit log.
	`CREATE TABLE principals (
		name     TEXT PRIMARY KEY,
		kind     TEXT NOT NULL,
		created  INTEGER NOT NULL
	);
	CREATE TABLE role_assignments (
		id        TEXT PRIMARY KEY,
		principal TEXT NOT NULL,
		role      TEXT NOT NULL,
		scope     TEXT NOT NULL,
		created   INTEGER NOT NULL
	);
	CREATE INDEX role_assignments_principal ON role_assignments (principal);
	CREATE TABLE audit (
		seq       INTEGER PRIMARY KEY AUTOINCREMENT,
		time      INTEGER NOT NULL,
		principal TEXT NOT NULL,
		operation TEXT NOT NULL,
		resource  TEXT NOT NULL,
		status    INTEGER NOT NULL
	);
	CREATE INDEX audit_time ON audit (time);
	INSERT INTO principals (name, kind, created) SELECT DISTINCT name, 'User', created FROM tokens;
	INSERT INTO role_assignments (id, principal, role, scope, created) SELECT 'admin-owner', name, 'Owner', '/', created FROM tokens WHERE name = 'admin' LIMIT 1`,
	// 4: the next job sequence number without a scan of every job.
	`CREATE INDEX jobs_seq ON jobs (seq)`,
}
