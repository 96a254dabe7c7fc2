package store

import "github.com/cumulus-ml/cumulus/internal/api"

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
	// 5: what the scheduler reads of a queued job, as columns: a pass no
	// longer decodes every queued job's document.
	`ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE jobs ADD COLUMN nodes INTEGER NOT NULL DEFAULT 1;
	ALTER TABLE jobs ADD COLUMN image TEXT NOT NULL DEFAULT '';
	ALTER TABLE jobs ADD COLUMN quota_wait INTEGER NOT NULL DEFAULT 0;` + backfillJobColumns,
	// 6: the queue in scheduling order, so a pass reads only its head.
	`CREATE INDEX jobs_queue ON jobs (compute, status, priority DESC, seq)`,
}

// backfillJobColumns fills migration 5's columns from the job documents.
const backfillJobColumns = `
	UPDATE jobs SET
		priority = coalesce(json_extract(body, '$.doc.properties.priority'), 0),
		nodes = max(coalesce(json_extract(body, '$.doc.properties.resources.instanceCount'), 1), 1),
		image = coalesce(json_extract(body, '$.doc.properties.environmentImage'), ''),
		quota_wait = coalesce(json_extract(body, '$.doc.properties.statusMessage'), '') LIKE '` + api.QuotaWaitPrefix + `%'`
