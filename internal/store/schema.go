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
	// 7: node counts per compute and state, kept by triggers in the same
	// transaction as every node write: a compute GET or list reads a few
	// rows instead of counting 10,000 nodes. (Trigger bodies stay on one
	// line: migrations are split at ";" + newline.)
	`CREATE TABLE node_counts (
		compute TEXT NOT NULL,
		state   TEXT NOT NULL,
		n       INTEGER NOT NULL,
		PRIMARY KEY (compute, state)
	);
	INSERT INTO node_counts (compute, state, n) SELECT compute, state, count(*) FROM nodes GROUP BY compute, state;
	CREATE TRIGGER nodes_count_insert AFTER INSERT ON nodes BEGIN ` + countIn("NEW") + ` END;
	CREATE TRIGGER nodes_count_delete AFTER DELETE ON nodes BEGIN ` + countOut("OLD") + ` END;
	CREATE TRIGGER nodes_count_update AFTER UPDATE OF compute, state ON nodes
		WHEN OLD.state != NEW.state OR OLD.compute != NEW.compute BEGIN ` + countOut("OLD") + " " + countIn("NEW") + ` END`,
	// 8: which workspaces own which blobs (a blob is content-addressed and
	// stored once; each workspace that uploaded it owns it). Blobs that
	// jobs already reference are owned by the jobs' workspaces.
	`CREATE TABLE blob_owners (
		digest    TEXT NOT NULL,
		workspace TEXT NOT NULL,
		size      INTEGER NOT NULL,
		uploaded  INTEGER NOT NULL,
		principal TEXT NOT NULL,
		PRIMARY KEY (digest, workspace)
	);
	CREATE INDEX blob_owners_uploaded ON blob_owners (uploaded);` + backfillBlobOwners,
	// 9: job counts per compute and status, kept by triggers as
	// node_counts is: a metrics scrape reads a few rows, not every job.
	`CREATE TABLE job_counts (
		compute TEXT NOT NULL,
		status  TEXT NOT NULL,
		n       INTEGER NOT NULL,
		PRIMARY KEY (compute, status)
	);
	INSERT INTO job_counts (compute, status, n) SELECT compute, status, count(*) FROM jobs GROUP BY compute, status;
	CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN ` + jobCountIn("NEW") + ` END;
	CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN ` + jobCountOut("OLD") + ` END;
	CREATE TRIGGER jobs_count_update AFTER UPDATE OF compute, status ON jobs
		WHEN OLD.status != NEW.status OR OLD.compute != NEW.compute BEGIN ` + jobCountOut("OLD") + " " + jobCountIn("NEW") + ` END`,
	// 10: leases (who runs the controllers, on a shared PostgreSQL; kept
	// here too so both engines have the same tables) and agents'
	// heartbeats as replicas record them.
	`CREATE TABLE leases (
		name    TEXT PRIMARY KEY,
		holder  TEXT NOT NULL,
		token   INTEGER NOT NULL,
		expires INTEGER NOT NULL
	);
	CREATE TABLE heartbeats (
		node TEXT PRIMARY KEY,
		seen INTEGER NOT NULL
	)`,
	// 11: the event history of computes and their nodes (a job's history
	// is its own statusHistory).
	`CREATE TABLE events (
		seq     INTEGER PRIMARY KEY,
		time    INTEGER NOT NULL,
		compute TEXT NOT NULL,
		node    TEXT NOT NULL,
		type    TEXT NOT NULL,
		body    TEXT NOT NULL
	);
	CREATE INDEX events_compute ON events (compute, seq);
	CREATE INDEX events_time ON events (time)`,
	// 12: the cost ledger: each node's life (billed from its request to
	// its removal) and each attempt's run on its nodes; both outlive the
	// node and job records.
	`CREATE TABLE node_ledger (
		node     TEXT PRIMARY KEY,
		compute  TEXT NOT NULL,
		vm_size  TEXT NOT NULL,
		priority TEXT NOT NULL,
		created  INTEGER NOT NULL,
		removed  INTEGER
	);
	CREATE INDEX node_ledger_created ON node_ledger (created);
	CREATE TABLE job_runs (
		job     TEXT NOT NULL,
		attempt INTEGER NOT NULL,
		name    TEXT NOT NULL,
		compute TEXT NOT NULL,
		nodes   TEXT NOT NULL,
		started INTEGER NOT NULL,
		ended   INTEGER,
		PRIMARY KEY (job, attempt)
	);
	CREATE INDEX job_runs_started ON job_runs (started)`,
	// 13: utilization samples the agents send (see usage.go): a row per
	// node sample (job '') and one per job on that node, kept for the
	// usage retention; and each node's and job's latest as columns, which
	// a metrics scrape reads without decoding 10,000 documents.
	`CREATE TABLE usage_samples (
		compute TEXT NOT NULL,
		node    TEXT NOT NULL,
		job     TEXT NOT NULL,
		time    INTEGER NOT NULL,
		body    TEXT NOT NULL,
		PRIMARY KEY (node, job, time)
	);
	CREATE INDEX usage_samples_compute ON usage_samples (compute, job, time);
	CREATE INDEX usage_samples_time ON usage_samples (time);
	CREATE TABLE usage_latest (
		node         TEXT NOT NULL,
		job          TEXT NOT NULL,
		compute      TEXT NOT NULL,
		time         INTEGER NOT NULL,
		cpu          REAL NOT NULL,
		memory_used  INTEGER NOT NULL,
		memory_total INTEGER NOT NULL,
		disk_used    INTEGER NOT NULL,
		net_rx       INTEGER NOT NULL,
		net_tx       INTEGER NOT NULL,
		gpus         TEXT NOT NULL,
		job_name     TEXT NOT NULL,
		PRIMARY KEY (node, job)
	)`,
	// 14: management locks (Microsoft.Authorization/locks) at a workspace or
	// compute, keyed by the locked resource's id (lower case). A lock
	// goes with its resource: the trigger removes the locks at and under
	// a workspace or compute when its row is deleted.
	`CREATE TABLE locks (
		scope   TEXT NOT NULL,
		name    TEXT NOT NULL,
		level   TEXT NOT NULL,
		body    TEXT NOT NULL,
		created INTEGER NOT NULL,
		PRIMARY KEY (scope, name)
	);
	CREATE TRIGGER locks_resource_deleted AFTER DELETE ON resources WHEN OLD.kind IN ('workspace', 'compute') BEGIN DELETE FROM locks WHERE scope = (CASE OLD.kind WHEN 'compute' THEN OLD.parent || '/computes/' || OLD.name ELSE OLD.parent || '/providers/microsoft.machinelearningservices/workspaces/' || OLD.name END) OR substr(scope, 1, length(CASE OLD.kind WHEN 'compute' THEN OLD.parent || '/computes/' || OLD.name ELSE OLD.parent || '/providers/microsoft.machinelearningservices/workspaces/' || OLD.name END) + 1) = (CASE OLD.kind WHEN 'compute' THEN OLD.parent || '/computes/' || OLD.name ELSE OLD.parent || '/providers/microsoft.machinelearningservices/workspaces/' || OLD.name END) || '/'; END`,
	// 15: what jobs log the MLflow way (see metrics.go): every metric
	// value by job uid, name, step and time; params and tags by name. They
	// go with their job.
	`CREATE TABLE job_metrics (
		job   TEXT NOT NULL,
		name  TEXT NOT NULL,
		step  INTEGER NOT NULL,
		time  INTEGER NOT NULL,
		value REAL NOT NULL,
		PRIMARY KEY (job, name, step, time, value)
	);
	CREATE TABLE job_params (
		job   TEXT NOT NULL,
		kind  TEXT NOT NULL,
		name  TEXT NOT NULL,
		value TEXT NOT NULL,
		PRIMARY KEY (job, kind, name)
	);
	CREATE TRIGGER job_metrics_job_deleted AFTER DELETE ON jobs BEGIN DELETE FROM job_metrics WHERE job = OLD.uid; DELETE FROM job_params WHERE job = OLD.uid; END`,
	// 16: the blob store's names (see blobpaths.go): each blob of a
	// workspace's container by path, naming its content by digest; and
	// the uncommitted blocks of blobs being uploaded in blocks.
	`CREATE TABLE blob_paths (
		workspace    TEXT NOT NULL,
		container    TEXT NOT NULL,
		path         TEXT NOT NULL,
		digest       TEXT NOT NULL,
		size         INTEGER NOT NULL,
		md5          TEXT NOT NULL,
		content_type TEXT NOT NULL,
		metadata     TEXT NOT NULL,
		created      INTEGER NOT NULL,
		modified     INTEGER NOT NULL,
		etag         TEXT NOT NULL,
		PRIMARY KEY (workspace, container, path)
	);
	CREATE INDEX blob_paths_digest ON blob_paths (digest, workspace);
	CREATE TABLE blob_blocks (
		workspace TEXT NOT NULL,
		container TEXT NOT NULL,
		path      TEXT NOT NULL,
		block     TEXT NOT NULL,
		digest    TEXT NOT NULL,
		size      INTEGER NOT NULL,
		created   INTEGER NOT NULL,
		PRIMARY KEY (workspace, container, path, block)
	);
	CREATE INDEX blob_blocks_digest ON blob_blocks (digest, workspace);
	CREATE INDEX blob_blocks_created ON blob_blocks (created)`,
	// 17: fair share. What the scheduler reads of a job's group and of a
	// running job (when its attempt got its nodes, its own minimum
	// runtime), the queue of each group in scheduling order, and each
	// group's decayed usage per compute (see share.go). Jobs running
	// before this migration read as started long ago.
	`ALTER TABLE jobs ADD COLUMN share_group TEXT NOT NULL DEFAULT '';
	ALTER TABLE jobs ADD COLUMN started INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE jobs ADD COLUMN min_runtime INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX jobs_share_queue ON jobs (compute, status, share_group, priority DESC, seq);
	CREATE TABLE share_usage (
		compute TEXT NOT NULL,
		grp     TEXT NOT NULL,
		value   REAL NOT NULL,
		at      INTEGER NOT NULL,
		held    INTEGER NOT NULL,
		PRIMARY KEY (compute, grp)
	)`,
	// 18: the mini-batches of parallel steps (see parallel.go): a row each,
	// with its state, its lease while a node runs it and the rows it
	// returned. They go with their job.
	`CREATE TABLE parallel_batches (
		job          TEXT NOT NULL,
		idx          INTEGER NOT NULL,
		state        TEXT NOT NULL,
		tries        INTEGER NOT NULL,
		retries      INTEGER NOT NULL,
		node         TEXT NOT NULL,
		attempt      INTEGER NOT NULL,
		lease        INTEGER NOT NULL,
		items        INTEGER NOT NULL,
		failed_items INTEGER NOT NULL,
		rows         TEXT NOT NULL,
		error        TEXT NOT NULL,
		item_names   TEXT NOT NULL,
		ended        INTEGER NOT NULL,
		PRIMARY KEY (job, idx)
	);
	CREATE INDEX parallel_batches_state ON parallel_batches (job, state, idx);
	CREATE TRIGGER parallel_batches_job_deleted AFTER DELETE ON jobs BEGIN DELETE FROM parallel_batches WHERE job = OLD.uid; END`,
	// 19: the queue indexes hold queued jobs only: a job's later changes
	// (placed, running, ended) no longer rewrite their entries, and the
	// scheduler's reads of the queue head go through an index the size
	// of the queue, not of every job the compute ever ran.
	`DROP INDEX jobs_queue;
	DROP INDEX jobs_share_queue;
	CREATE INDEX jobs_queued ON jobs (compute, priority DESC, seq) WHERE ` + isQueued + `;
	CREATE INDEX jobs_share_queued ON jobs (compute, share_group, priority DESC, seq) WHERE ` + isQueued,
}

// isQueued selects queued jobs; the queue indexes hold only the rows it
// selects, and a query uses them only when its text says so (a bound
// status would not prove it to the planner).
const isQueued = "status = '" + api.JobQueued + "'"

// backfillBlobOwners gives the blobs that stored jobs reference (their
// code snapshot, their cumulus://blobs/ inputs) to the jobs' workspaces.
const backfillBlobOwners = `
	INSERT OR IGNORE INTO blob_owners (digest, workspace, size, uploaded, principal)
		SELECT lower(substr(json_extract(body, '$.doc.properties.codeId'), -64)), parent, 0, created, 'cumulus'
		FROM jobs WHERE length(coalesce(json_extract(body, '$.doc.properties.codeId'), '')) >= 64;
	INSERT OR IGNORE INTO blob_owners (digest, workspace, size, uploaded, principal)
		SELECT lower(substr(json_extract(i.value, '$.uri'), 17)), jobs.parent, 0, jobs.created, 'cumulus'
		FROM jobs, json_each(jobs.body, '$.doc.properties.inputs') AS i
		WHERE json_extract(i.value, '$.uri') LIKE 'cumulus://blobs/%'`

// countIn and countOut are the trigger statements that count a node row in
// or out of node_counts.
func countIn(row string) string {
	return `INSERT INTO node_counts (compute, state, n) VALUES (` + row + `.compute, ` + row + `.state, 1)
		ON CONFLICT (compute, state) DO UPDATE SET n = n + 1;`
}

func countOut(row string) string {
	return `UPDATE node_counts SET n = n - 1 WHERE compute = ` + row + `.compute AND state = ` + row + `.state;`
}

// jobCountIn and jobCountOut count a job row in or out of job_counts.
func jobCountIn(row string) string {
	return `INSERT INTO job_counts (compute, status, n) VALUES (` + row + `.compute, ` + row + `.status, 1)
		ON CONFLICT (compute, status) DO UPDATE SET n = n + 1;`
}

func jobCountOut(row string) string {
	return `UPDATE job_counts SET n = n - 1 WHERE compute = ` + row + `.compute AND status = ` + row + `.status;`
}

// backfillJobColumns fills migration 5's columns from the job documents.
const backfillJobColumns = `
	UPDATE jobs SET
		priority = coalesce(json_extract(body, '$.doc.properties.priority'), 0),
		nodes = max(coalesce(json_extract(body, '$.doc.properties.resources.instanceCount'), 1), 1),
		image = coalesce(json_extract(body, '$.doc.properties.environmentImage'), ''),
		quota_wait = coalesce(json_extract(body, '$.doc.properties.statusMessage'), '') LIKE '` + api.QuotaWaitPrefix + `%'`
