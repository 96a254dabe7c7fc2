package store

// pgMigrations are PostgreSQL's migrations: applied in order, once each;
// append, never edit. The first is the whole schema as SQLite's
// migrations leave it; later ones follow SQLite's, in the same order.
//
// Differences from SQLite's schema: 64-bit integer columns are BIGINT
// (times are Unix milliseconds), bytes are BYTEA, text sorts bytewise
// (COLLATE "C", as SQLite's BINARY does), job sequence numbers come from a
// sequence, and node and job counts are kept as rows of +1 and -1 that
// readers sum (and CompactCounts folds): concurrent transactions each add
// a row instead of all updating one, which serializable transactions
// would make conflict.
var pgMigrations = []string{
	`CREATE TABLE resources (
		kind     TEXT COLLATE "C" NOT NULL,
		parent   TEXT COLLATE "C" NOT NULL,
		name     TEXT COLLATE "C" NOT NULL,
		version  BIGINT NOT NULL,
		body     TEXT NOT NULL,
		created  BIGINT NOT NULL,
		PRIMARY KEY (kind, parent, name)
	);
	CREATE TABLE operations (
		id       TEXT COLLATE "C" PRIMARY KEY,
		kind     TEXT NOT NULL,
		target   TEXT COLLATE "C" NOT NULL,
		status   TEXT NOT NULL,
		error    TEXT NOT NULL DEFAULT '',
		started  BIGINT NOT NULL,
		ended    BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX operations_status ON operations (status, started);
	CREATE TABLE tokens (
		id       TEXT COLLATE "C" PRIMARY KEY,
		name     TEXT COLLATE "C" NOT NULL,
		hash     TEXT COLLATE "C" NOT NULL UNIQUE,
		role     TEXT NOT NULL,
		created  BIGINT NOT NULL,
		expires  BIGINT NOT NULL DEFAULT 0,
		revoked  BIGINT NOT NULL DEFAULT 0
	);
	CREATE TABLE secrets (
		id       TEXT COLLATE "C" PRIMARY KEY,
		sealed   BYTEA NOT NULL
	);
	CREATE TABLE nodes (
		id          TEXT COLLATE "C" PRIMARY KEY,
		compute     TEXT COLLATE "C" NOT NULL,
		state       TEXT COLLATE "C" NOT NULL,
		job         TEXT COLLATE "C" NOT NULL DEFAULT '',
		body        TEXT NOT NULL,
		created     BIGINT NOT NULL
	);
	CREATE INDEX nodes_compute ON nodes (compute, state);
	CREATE SEQUENCE jobs_seq_source;
	CREATE TABLE jobs (
		uid      TEXT COLLATE "C" PRIMARY KEY,
		parent   TEXT COLLATE "C" NOT NULL,
		name     TEXT COLLATE "C" NOT NULL,
		compute  TEXT COLLATE "C" NOT NULL,
		status   TEXT COLLATE "C" NOT NULL,
		seq      BIGINT NOT NULL,
		version  BIGINT NOT NULL,
		body     TEXT NOT NULL,
		created  BIGINT NOT NULL,
		priority BIGINT NOT NULL DEFAULT 0,
		nodes    BIGINT NOT NULL DEFAULT 1,
		image    TEXT NOT NULL DEFAULT '',
		quota_wait BOOLEAN NOT NULL DEFAULT false,
		UNIQUE (parent, name)
	);
	CREATE INDEX jobs_compute_status ON jobs (compute, status, seq);
	CREATE INDEX jobs_parent_status ON jobs (parent, status, name);
	CREATE INDEX jobs_seq ON jobs (seq);
	CREATE INDEX jobs_queue ON jobs (compute, status, priority DESC, seq);
	CREATE TABLE principals (
		name     TEXT COLLATE "C" PRIMARY KEY,
		kind     TEXT NOT NULL,
		created  BIGINT NOT NULL
	);
	CREATE TABLE role_assignments (
		id        TEXT COLLATE "C" PRIMARY KEY,
		principal TEXT COLLATE "C" NOT NULL,
		role      TEXT NOT NULL,
		scope     TEXT COLLATE "C" NOT NULL,
		created   BIGINT NOT NULL
	);
	CREATE INDEX role_assignments_principal ON role_assignments (principal);
	CREATE TABLE audit (
		seq       BIGSERIAL PRIMARY KEY,
		time      BIGINT NOT NULL,
		principal TEXT COLLATE "C" NOT NULL,
		operation TEXT NOT NULL,
		resource  TEXT COLLATE "C" NOT NULL,
		status    BIGINT NOT NULL
	);
	CREATE INDEX audit_time ON audit (time);
	CREATE TABLE blob_owners (
		digest    TEXT COLLATE "C" NOT NULL,
		workspace TEXT COLLATE "C" NOT NULL,
		size      BIGINT NOT NULL,
		uploaded  BIGINT NOT NULL,
		principal TEXT NOT NULL,
		PRIMARY KEY (digest, workspace)
	);
	CREATE INDEX blob_owners_uploaded ON blob_owners (uploaded);
	CREATE TABLE node_counts (
		compute TEXT COLLATE "C" NOT NULL,
		state   TEXT COLLATE "C" NOT NULL,
		n       BIGINT NOT NULL
	);
	CREATE INDEX node_counts_compute ON node_counts (compute, state);
	CREATE TABLE job_counts (
		compute TEXT COLLATE "C" NOT NULL,
		status  TEXT COLLATE "C" NOT NULL,
		n       BIGINT NOT NULL
	);
	CREATE INDEX job_counts_compute ON job_counts (compute, status);
	CREATE FUNCTION count_nodes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF TG_OP IN ('UPDATE', 'DELETE') THEN INSERT INTO node_counts VALUES (OLD.compute, OLD.state, -1); END IF; IF TG_OP IN ('UPDATE', 'INSERT') THEN INSERT INTO node_counts VALUES (NEW.compute, NEW.state, 1); END IF; RETURN NULL; END $$;
	CREATE TRIGGER nodes_count_insert AFTER INSERT OR DELETE ON nodes FOR EACH ROW EXECUTE FUNCTION count_nodes();
	CREATE TRIGGER nodes_count_update AFTER UPDATE OF compute, state ON nodes FOR EACH ROW
		WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.compute IS DISTINCT FROM NEW.compute) EXECUTE FUNCTION count_nodes();
	CREATE FUNCTION count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF TG_OP IN ('UPDATE', 'DELETE') THEN INSERT INTO job_counts VALUES (OLD.compute, OLD.status, -1); END IF; IF TG_OP IN ('UPDATE', 'INSERT') THEN INSERT INTO job_counts VALUES (NEW.compute, NEW.status, 1); END IF; RETURN NULL; END $$;
	CREATE TRIGGER jobs_count_insert AFTER INSERT OR DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION count_jobs();
	CREATE TRIGGER jobs_count_update AFTER UPDATE OF compute, status ON jobs FOR EACH ROW
		WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.compute IS DISTINCT FROM NEW.compute) EXECUTE FUNCTION count_jobs();
	CREATE TABLE leases (
		name    TEXT COLLATE "C" PRIMARY KEY,
		holder  TEXT NOT NULL,
		token   BIGINT NOT NULL,
		expires BIGINT NOT NULL
	);
	CREATE TABLE heartbeats (
		node TEXT COLLATE "C" PRIMARY KEY,
		seen BIGINT NOT NULL
	)`,
	// SQLite's 11: the event history.
	`CREATE TABLE events (
		seq     BIGSERIAL PRIMARY KEY,
		time    BIGINT NOT NULL,
		compute TEXT COLLATE "C" NOT NULL,
		node    TEXT COLLATE "C" NOT NULL,
		type    TEXT COLLATE "C" NOT NULL,
		body    TEXT NOT NULL
	);
	CREATE INDEX events_compute ON events (compute, seq);
	CREATE INDEX events_time ON events (time)`,
	// SQLite's 12: the cost ledger.
	`CREATE TABLE node_ledger (
		node     TEXT COLLATE "C" PRIMARY KEY,
		compute  TEXT COLLATE "C" NOT NULL,
		vm_size  TEXT COLLATE "C" NOT NULL,
		priority TEXT COLLATE "C" NOT NULL,
		created  BIGINT NOT NULL,
		removed  BIGINT
	);
	CREATE INDEX node_ledger_created ON node_ledger (created);
	CREATE TABLE job_runs (
		job     TEXT COLLATE "C" NOT NULL,
		attempt BIGINT NOT NULL,
		name    TEXT COLLATE "C" NOT NULL,
		compute TEXT COLLATE "C" NOT NULL,
		nodes   TEXT NOT NULL,
		started BIGINT NOT NULL,
		ended   BIGINT,
		PRIMARY KEY (job, attempt)
	);
	CREATE INDEX job_runs_started ON job_runs (started)`,
	// SQLite's 13: utilization samples and the latest of each node and job.
	`CREATE TABLE usage_samples (
		compute TEXT COLLATE "C" NOT NULL,
		node    TEXT COLLATE "C" NOT NULL,
		job     TEXT COLLATE "C" NOT NULL,
		time    BIGINT NOT NULL,
		body    TEXT NOT NULL,
		PRIMARY KEY (node, job, time)
	);
	CREATE INDEX usage_samples_compute ON usage_samples (compute, job, time);
	CREATE INDEX usage_samples_time ON usage_samples (time);
	CREATE TABLE usage_latest (
		node         TEXT COLLATE "C" NOT NULL,
		job          TEXT COLLATE "C" NOT NULL,
		compute      TEXT COLLATE "C" NOT NULL,
		time         BIGINT NOT NULL,
		cpu          DOUBLE PRECISION NOT NULL,
		memory_used  BIGINT NOT NULL,
		memory_total BIGINT NOT NULL,
		disk_used    BIGINT NOT NULL,
		net_rx       BIGINT NOT NULL,
		net_tx       BIGINT NOT NULL,
		gpus         TEXT NOT NULL,
		job_name     TEXT NOT NULL,
		PRIMARY KEY (node, job)
	)`,
	// SQLite's 14: management locks, with the trigger that removes a
	// resource's locks (and those under it) with the resource. The trigger
	// deletes only when there is a lock to delete: a DELETE takes the
	// table in a mode that waits for the write transactions holding it in
	// SHARE mode (GuardLocks), which every resource deletion would
	// otherwise do.
	`CREATE TABLE locks (
		scope   TEXT COLLATE "C" NOT NULL,
		name    TEXT COLLATE "C" NOT NULL,
		level   TEXT NOT NULL,
		body    TEXT NOT NULL,
		created BIGINT NOT NULL,
		PRIMARY KEY (scope, name)
	);
	CREATE FUNCTION delete_resource_locks() RETURNS trigger LANGUAGE plpgsql AS $$ DECLARE id TEXT; BEGIN IF OLD.kind = 'compute' THEN id := OLD.parent || '/computes/' || OLD.name; ELSIF OLD.kind = 'workspace' THEN id := OLD.parent || '/providers/microsoft.machinelearningservices/workspaces/' || OLD.name; ELSE RETURN NULL; END IF; IF EXISTS (SELECT 1 FROM locks WHERE scope = id OR substr(scope, 1, length(id) + 1) = id || '/') THEN DELETE FROM locks WHERE scope = id OR substr(scope, 1, length(id) + 1) = id || '/'; END IF; RETURN NULL; END $$;
	CREATE TRIGGER locks_resource_deleted AFTER DELETE ON resources FOR EACH ROW EXECUTE FUNCTION delete_resource_locks()`,
	// SQLite's 15: job metrics, params and tags, removed with their job.
	`CREATE TABLE job_metrics (
		job   TEXT COLLATE "C" NOT NULL,
		name  TEXT COLLATE "C" NOT NULL,
		step  BIGINT NOT NULL,
		time  BIGINT NOT NULL,
		value DOUBLE PRECISION NOT NULL,
		PRIMARY KEY (job, name, step, time, value)
	);
	CREATE TABLE job_params (
		job   TEXT COLLATE "C" NOT NULL,
		kind  TEXT COLLATE "C" NOT NULL,
		name  TEXT COLLATE "C" NOT NULL,
		value TEXT NOT NULL,
		PRIMARY KEY (job, kind, name)
	);
	CREATE FUNCTION delete_job_metrics() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM job_metrics WHERE job = OLD.uid; DELETE FROM job_params WHERE job = OLD.uid; RETURN NULL; END $$;
	CREATE TRIGGER job_metrics_job_deleted AFTER DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION delete_job_metrics()`,
	// SQLite's 16: the blob store's names and uncommitted blocks.
	`CREATE TABLE blob_paths (
		workspace    TEXT COLLATE "C" NOT NULL,
		container    TEXT COLLATE "C" NOT NULL,
		path         TEXT COLLATE "C" NOT NULL,
		digest       TEXT COLLATE "C" NOT NULL,
		size         BIGINT NOT NULL,
		md5          TEXT NOT NULL,
		content_type TEXT NOT NULL,
		metadata     TEXT NOT NULL,
		created      BIGINT NOT NULL,
		modified     BIGINT NOT NULL,
		etag         TEXT NOT NULL,
		PRIMARY KEY (workspace, container, path)
	);
	CREATE INDEX blob_paths_digest ON blob_paths (digest, workspace);
	CREATE TABLE blob_blocks (
		workspace TEXT COLLATE "C" NOT NULL,
		container TEXT COLLATE "C" NOT NULL,
		path      TEXT COLLATE "C" NOT NULL,
		block     TEXT COLLATE "C" NOT NULL,
		digest    TEXT COLLATE "C" NOT NULL,
		size      BIGINT NOT NULL,
		created   BIGINT NOT NULL,
		PRIMARY KEY (workspace, container, path, block)
	);
	CREATE INDEX blob_blocks_digest ON blob_blocks (digest, workspace);
	CREATE INDEX blob_blocks_created ON blob_blocks (created)`,
	// SQLite's 17: fair share.
	`ALTER TABLE jobs ADD COLUMN share_group TEXT COLLATE "C" NOT NULL DEFAULT '';
	ALTER TABLE jobs ADD COLUMN started BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE jobs ADD COLUMN min_runtime BIGINT NOT NULL DEFAULT 0;
	CREATE INDEX jobs_share_queue ON jobs (compute, status, share_group, priority DESC, seq);
	CREATE TABLE share_usage (
		compute TEXT COLLATE "C" NOT NULL,
		grp     TEXT COLLATE "C" NOT NULL,
		value   DOUBLE PRECISION NOT NULL,
		at      BIGINT NOT NULL,
		held    BIGINT NOT NULL,
		PRIMARY KEY (compute, grp)
	)`,
	// SQLite's 18: parallel steps' mini-batches, removed with their job.
	`CREATE TABLE parallel_batches (
		job          TEXT COLLATE "C" NOT NULL,
		idx          BIGINT NOT NULL,
		state        TEXT NOT NULL,
		tries        BIGINT NOT NULL,
		retries      BIGINT NOT NULL,
		node         TEXT NOT NULL,
		attempt      BIGINT NOT NULL,
		lease        BIGINT NOT NULL,
		items        BIGINT NOT NULL,
		failed_items BIGINT NOT NULL,
		rows         TEXT NOT NULL,
		error        TEXT NOT NULL,
		item_names   TEXT NOT NULL,
		ended        BIGINT NOT NULL,
		PRIMARY KEY (job, idx)
	);
	CREATE INDEX parallel_batches_state ON parallel_batches (job, state, idx);
	CREATE FUNCTION delete_parallel_batches() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM parallel_batches WHERE job = OLD.uid; RETURN NULL; END $$;
	CREATE TRIGGER parallel_batches_job_deleted AFTER DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION delete_parallel_batches()`,
	// SQLite's 19: the queue indexes hold queued jobs only.
	`DROP INDEX jobs_queue;
	DROP INDEX jobs_share_queue;
	CREATE INDEX jobs_queued ON jobs (compute, priority DESC, seq) WHERE ` + isQueued + `;
	CREATE INDEX jobs_share_queued ON jobs (compute, share_group, priority DESC, seq) WHERE ` + isQueued,
}
